/**
 * PendingElicitations, the answerer of MCP servers' questions in `corral serve`: bounded by the question's answerBy
 * (TestClock), then declined with an `elicitation_settled` event saying it timed out; declined at once when no burst
 * of the session is in flight; an answer only for the asking session, and only once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import * as PendingElicitations from "../../src/server/PendingElicitations.js"

describe("PendingElicitations", () => {
  const request = {
    server: "ev",
    sessionId: "ses_1",
    callId: "call_1",
    tool: "ask",
    message: "Name?",
    requestedSchema: { type: "object", properties: { name: { type: "string" } } },
    answerBy: 10_000
  }

  it.effect("declines a question nobody answers by its answerBy, and says so on the stream", () =>
    Effect.gen(function*() {
      const published: Array<SessionEvent> = []
      const pending = PendingElicitations.make((e) => Effect.sync(() => void published.push(e)), () => 3)
      const asking = yield* Effect.fork(pending.ask(request))
      yield* TestClock.adjust("9999 millis")
      expect(published.map((e) => e._tag)).toEqual(["elicitation"])
      yield* TestClock.adjust("1 millis")
      expect(yield* Fiber.join(asking)).toEqual({ action: "decline" })
      expect(published[1]).toMatchObject({
        _tag: "elicitation_settled",
        action: "decline",
        reason: "timed_out",
        seq: 3
      })
      const id = (published[0] as Extract<SessionEvent, { _tag: "elicitation" }>).elicitationId
      const late = yield* Effect.flip(pending.answer("ses_1", id, { action: "accept", content: {} }))
      expect(late._tag).toBe("ElicitationNotFound")
    }))

  it.effect("declines at once when no burst of the session is in flight (nobody follows its stream)", () =>
    Effect.gen(function*() {
      const published: Array<SessionEvent> = []
      const pending = PendingElicitations.make((e) => Effect.sync(() => void published.push(e)), () => undefined)
      expect(yield* pending.ask(request)).toEqual({ action: "decline" })
      expect(published).toEqual([])
    }))

  it.effect("takes an answer for its own session only", () =>
    Effect.gen(function*() {
      const published: Array<SessionEvent> = []
      const pending = PendingElicitations.make((e) => Effect.sync(() => void published.push(e)), () => 1)
      const asking = yield* Effect.fork(pending.ask(request))
      yield* TestClock.adjust("1 millis")
      const id = (published[0] as Extract<SessionEvent, { _tag: "elicitation" }>).elicitationId
      expect((yield* Effect.flip(pending.answer("ses_other", id, { action: "decline" })))._tag).toBe(
        "ElicitationNotFound"
      )
      yield* pending.answer("ses_1", id, { action: "accept", content: { name: "Ada" } })
      expect(yield* Fiber.join(asking)).toEqual({ action: "accept", content: { name: "Ada" } })
    }))
})
