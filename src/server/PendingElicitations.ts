/**
 * PendingElicitations — `corral serve`'s answerer of MCP servers' questions (the tools layer's `Elicitations` port):
 * a question becomes an `elicitation` event on the asking session's stream, and waits for the person's answer through
 * `POST /v1/sessions/{id}/elicitations/{elicitationId}` (accept with values, decline, cancel).
 *
 * The failure it prevents: a server that asks while nobody can answer would hang its tool call (and the session's
 * burst) until the call's deadline, or — before this — every question was declined without anyone seeing it. The
 * wait is bounded by the question's `answerBy` (the asking call's deadline less the server's margin, from the
 * registry): at the bound the question is declined, and an `elicitation_settled` event with reason `timed_out` says
 * so on the stream. A question asked when no burst of the session is in flight (nobody follows its stream) is
 * declined at once. An answer for a question that is settled, unknown, or of another session is refused
 * (`ElicitationNotFound`, 404): each question is answered at most once.
 */
import { Clock, Context, Deferred, Duration, Effect, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import type { SessionEvent } from "../domain/SessionEvent.js"
import type { ElicitationAnswer, ElicitationRequest } from "../tools/Elicitations.js"

/** No open question with this id for this session (never asked, already answered, or declined at its bound). */
export class ElicitationNotFound extends Schema.TaggedError<ElicitationNotFound>()("ElicitationNotFound", {
  sessionId: Schema.String,
  elicitationId: Schema.String,
  message: Schema.String
}) {}

/** The service: ask (the `Elicitations` port's `ask`), and answer an open question. */
export interface Service {
  readonly ask: (request: ElicitationRequest) => Effect.Effect<ElicitationAnswer>
  /** Settles the open question `elicitationId` of `sessionId` with `answer`; fails when there is none. */
  readonly answer: (
    sessionId: string,
    elicitationId: string,
    answer: ElicitationAnswer
  ) => Effect.Effect<void, ElicitationNotFound>
}

/** The open questions of this process. */
export class PendingElicitations extends Context.Tag("corral/server/PendingElicitations")<
  PendingElicitations,
  Service
>() {}

interface Open {
  readonly request: ElicitationRequest
  readonly answered: Deferred.Deferred<ElicitationAnswer>
}

/**
 * The service over the live event stream: `publish` sends an event, `seqOf` is the session's last published
 * sequence (none when no burst of it is in flight).
 */
export const make = (
  publish: (event: SessionEvent) => Effect.Effect<void>,
  seqOf: (sessionId: string) => number | undefined
): Service => {
  const open = new Map<string, Open>()
  const settled = (id: string, request: ElicitationRequest, action: ElicitationAnswer["action"], timedOut: boolean) =>
    Effect.suspend(() => {
      const seq = seqOf(request.sessionId)
      return seq === undefined ? Effect.void : publish({
        _tag: "elicitation_settled",
        sessionId: request.sessionId,
        seq,
        callId: request.callId,
        name: request.tool,
        elicitationId: id,
        action,
        reason: timedOut ? "timed_out" : "answered"
      })
    })
  return {
    ask: (request) =>
      Effect.gen(function*() {
        const seq = seqOf(request.sessionId)
        if (seq === undefined) return { action: "decline" } as const
        const id = `eli_${randomBytes(12).toString("hex")}`
        const answered = yield* Deferred.make<ElicitationAnswer>()
        open.set(id, { request, answered })
        yield* publish({
          _tag: "elicitation",
          sessionId: request.sessionId,
          seq,
          callId: request.callId,
          name: request.tool,
          elicitationId: id,
          server: request.server,
          message: request.message,
          requestedSchema: { ...request.requestedSchema },
          answerBy: request.answerBy
        })
        const waitMs = Math.max(0, request.answerBy - (yield* Clock.currentTimeMillis))
        const answer = yield* Deferred.await(answered).pipe(
          Effect.timeoutTo({ duration: Duration.millis(waitMs), onSuccess: Option.some, onTimeout: Option.none }),
          // The asking call was cancelled: the question goes with it.
          Effect.onInterrupt(() => Effect.sync(() => void open.delete(id)))
        )
        // Removed before the outcome is told: an answer arriving now finds nothing open, never a second settlement.
        const stillOpen = open.delete(id)
        if (Option.isSome(answer)) return answer.value
        if (stillOpen) yield* settled(id, request, "decline", true)
        return { action: "decline" } as const
      }),
    answer: (sessionId, elicitationId, answer) =>
      Effect.suspend(() => {
        const found = open.get(elicitationId)
        if (found === undefined || found.request.sessionId !== sessionId) {
          return Effect.fail(
            new ElicitationNotFound({
              sessionId,
              elicitationId,
              message: `no open question ${elicitationId} in session ${sessionId}: it was answered already, ` +
                "declined at its deadline, or never asked"
            })
          )
        }
        open.delete(elicitationId)
        return Effect.zipRight(
          Deferred.succeed(found.answered, answer),
          settled(elicitationId, found.request, answer.action, false)
        )
      })
  }
}
