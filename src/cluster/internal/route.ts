/**
 * route — how a node reaches a session's owner in a cluster: the `Supervisor` that `SessionEntity.layer` provides
 * sends each message through the entity client, turns the cluster's own failures into the domain's, fetches approval
 * tokens by a volatile `Renew`, and wakes the owner of a Run or Continue that failed for an infrastructure failure
 * (`nudge`).
 */
import type { Scope } from "effect"
import { Duration, Effect, Option } from "effect"
import { isCorralError, PersistenceFailed } from "../../domain/Errors.js"
import type { SendError } from "../../domain/Errors.js"
import type { Ids } from "../../session/Ids.js"
import type * as SessionActor from "../../session/SessionActor.js"
import type * as Supervisor from "../../session/Supervisor.js"
import type { Answer, SessionEntity } from "../SessionEntity.js"

/** When the owner of a session whose Run or Continue failed is woken, each after the one before (see `nudge`). */
const nudges = [Duration.seconds(1), Duration.seconds(2), Duration.seconds(4), Duration.seconds(8)]

/** How long one of those wakes is awaited, at most. */
const wakeWait = Duration.seconds(5)

/** A failure of the cluster itself (storage, mailbox, transport) as the domain's `PersistenceFailed`. */
const asSendError = (operation: string) => (error: unknown): SendError =>
  isCorralError(error) && (error._tag === "PersistenceFailed" || error._tag === "InvalidSessionState" ||
      error._tag === "AlreadyDecided" || error._tag === "SessionNotFound")
    ? error
    : new PersistenceFailed({
      operation: `cluster.${operation}`,
      message: typeof error === "object" && error !== null && "message" in error && typeof error.message === "string"
        ? error.message
        : String(error)
    })

/** What the route is made of: this runner's supervisor (for what describes it), the entity client, ids, a scope for nudges. */
export interface Parts {
  readonly local: Supervisor.Service
  readonly client: Effect.Effect.Success<typeof SessionEntity.client>
  readonly ids: typeof Ids.Service
  readonly scope: Scope.Scope
}

/** The routing `Supervisor` (see `SessionEntity.layer`). */
export const make = ({ client, ids, local, scope }: Parts): Supervisor.Service => {
  const delivered = <A>(operation: string, call: Effect.Effect<A, unknown>): Effect.Effect<A, SendError> =>
    call.pipe(
      Effect.tapError((error) =>
        isCorralError(error)
          ? Effect.void
          : Effect.logWarning(`cluster: ${operation} not delivered: ${String(error)}`, error)
      ),
      Effect.mapError(asSendError(operation))
    )
  // A persisted message's answer (stored by the cluster) says whether tokens were issued, not which: they come
  // by a volatile `Renew` for the session's user, so no token is ever in the cluster's tables (see `Answer`).
  // The message has run by then: a `Renew` that fails does not fail it — the session is answered without tokens
  // (its user renews them: `POST /v1/sessions/{id}/approvals/tokens`), and the failure is logged with the session id.
  const answered = (
    operation: string,
    orgId: string,
    sessionId: string,
    call: Effect.Effect<typeof Answer.Type, unknown>
  ): Effect.Effect<SessionActor.Reply, SendError> =>
    Effect.flatMap(delivered(operation, call), ({ issued, session }) =>
      issued
        ? delivered(
          "renew",
          client(sessionId).Renew({
            orgId,
            by: { orgId: session.principal.orgId, userId: session.principal.userId }
          })
        ).pipe(
          Effect.catchAll((error) =>
            Effect.as(
              Effect.logWarning(
                `session ${sessionId}: ${operation} ran, but its approval tokens were not fetched: ${error.message}`
              ),
              { session, tokens: [] }
            )
          )
        )
        : Effect.succeed({ session, tokens: [] }))
  /**
   * A Run or Continue that did not run for an infrastructure failure — the cluster's storage refused it, or the
   * owner answered `PersistenceFailed` (its store failed, or it was stopping: the cluster keeps that answer and
   * never delivers the message again) — still waits in the session's inbox. Rather than leave it to the sweep (a
   * lock life later), the owner is woken `nudges` times, 1 s then doubling apart (1, 3, 7, 15 s after): a `Wake`
   * runs what waits in the inbox, in the order accepted, and nothing that ran already, so a wake that finds
   * nothing costs a read. Volatile and best effort: the sweep remains the bound. The caller's failure stands.
   */
  // Each wake is bounded and on its own: a wake sent to a runner that is leaving may never be answered, and
  // it must not hold back the wakes after it (the one that reaches the next owner).
  const wake = (orgId: string, sessionId: string) =>
    client(sessionId).Wake({ orgId }).pipe(
      Effect.timeoutFail({ duration: wakeWait, onTimeout: () => `no answer within ${Duration.format(wakeWait)}` }),
      Effect.catchAll((error) => Effect.logDebug(`session ${sessionId}: wake not delivered: ${String(error)}`))
    )
  const nudge = (orgId: string, sessionId: string) =>
    Effect.forkIn(
      Effect.forEach(
        nudges.reduce<Array<Duration.Duration>>(
          (at, wait) => [...at, Duration.sum(at.at(-1) ?? Duration.zero, wait)],
          []
        ),
        (at) => Effect.zipRight(Effect.sleep(at), wake(orgId, sessionId)),
        { concurrency: "unbounded", discard: true }
      ),
      scope
    )
  const nudged = <A>(orgId: string, sessionId: string, call: Effect.Effect<A, SendError>) =>
    Effect.tapError(call, (error) => error._tag === "PersistenceFailed" ? nudge(orgId, sessionId) : Effect.void)
  // Run and Continue always come from the durable mailbox (Corral accepts them first): the id is their key.
  const keyOf = (inboxId: string | undefined) =>
    inboxId === undefined
      ? Effect.dieMessage("a Run or Continue sent to a cluster session must carry its accepted message id")
      : Effect.succeed(inboxId)
  const route: Supervisor.Service = {
    // The owner loads the session from the store on its first message: nothing to do here.
    adopt: () => Effect.void,
    send: (orgId, sessionId, message) => {
      const entity = client(sessionId)
      switch (message._tag) {
        case "Run":
          return Effect.flatMap(keyOf(message.inboxId), (inboxId) =>
            nudged(
              orgId,
              sessionId,
              answered(
                "run",
                orgId,
                sessionId,
                entity.Run({
                  orgId,
                  inboxId,
                  text: message.text,
                  ...(message.context === undefined ? {} : { context: message.context }),
                  ...(message.notes === undefined ? {} : { notes: message.notes })
                })
              )
            ))
        case "Continue":
          return Effect.flatMap(
            keyOf(message.inboxId),
            (inboxId) =>
              nudged(
                orgId,
                sessionId,
                answered("continue", orgId, sessionId, entity.Continue({ orgId, inboxId, text: message.text }))
              )
          )
        case "Approve":
          return answered(
            "approve",
            orgId,
            sessionId,
            entity.Approve({
              orgId,
              requestId: ids.messageId(),
              by: { orgId: message.by.orgId, userId: message.by.userId },
              tokenHash: message.tokenHash,
              decision: message.decision
            })
          )
        case "Renew":
          return delivered(
            "renew",
            entity.Renew({ orgId, by: { orgId: message.by.orgId, userId: message.by.userId } })
          )
      }
    },
    cancel: (orgId, sessionId) =>
      client(sessionId).Cancel({ orgId }).pipe(
        Effect.catchAll((error) =>
          Effect.as(Effect.logWarning(`session ${sessionId}: cancel not delivered: ${String(error)}`), false)
        )
      ),
    landed: (orgId, sessionId) =>
      client(sessionId).Landed({ orgId }).pipe(
        Effect.catchAll((error) => Effect.logWarning(`session ${sessionId}: landing not awaited: ${String(error)}`))
      ),
    peek: () => Option.none(),
    live: local.live,
    admission: local.admission,
    running: local.running,
    release: local.release
  }
  return route
}
