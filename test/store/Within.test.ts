import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, TestClock } from "effect"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import { within } from "../../src/store/internal/failure.js"
import * as Overload from "../../src/store/internal/overload.js"

describe("store: within (a statement's deadline)", () => {
  it.effect("a statement that never answers fails with timedOut at the bound, and is interrupted", () =>
    Effect.gen(function*() {
      const interrupted = yield* Deferred.make<void>()
      const statement = Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))
      const call = yield* Effect.fork(within("loadSession", 10_000)(statement))
      yield* TestClock.adjust("9999 millis")
      expect(call.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      const failure = yield* Effect.flip(Fiber.join(call))
      expect(failure).toBeInstanceOf(PersistenceFailed)
      expect(failure).toMatchObject({
        operation: "loadSession",
        message: "the store did not answer within 10000 ms"
      })
      yield* Deferred.await(interrupted)
    }))

  it.effect("a statement's own answer and failure pass through unchanged", () =>
    Effect.gen(function*() {
      const answer = yield* Deferred.make<string, PersistenceFailed>()
      const call = yield* Effect.fork(within("loadSession", 10_000)(Deferred.await(answer)))
      yield* TestClock.adjust("5 seconds")
      yield* Deferred.succeed(answer, "row")
      expect(yield* Fiber.join(call)).toBe("row")

      const failed = new PersistenceFailed({ operation: "loadSession", message: "relation does not exist" })
      expect(yield* Effect.flip(within("loadSession", 10_000)(Effect.fail(failed)))).toBe(failed)
    }))

  it.effect("a statement queued behind a flood waits on while the database answers others, up to six timeouts", () =>
    Effect.gen(function*() {
      const liveness = new Overload.Liveness()
      const answered = Effect.sync(() => liveness.answered())
      /** Other statements of the store answered every second, for `seconds`. */
      const busy = (seconds: number) =>
        Effect.forEach(Array.from({ length: seconds }), () => Effect.zipRight(TestClock.adjust("1 second"), answered), {
          discard: true
        })
      const answer = yield* Deferred.make<string>()
      const queued = yield* Effect.fork(within("saveState", 10_000, liveness)(Deferred.await(answer)))
      yield* busy(30)
      expect(queued.unsafePoll()).toBeNull()
      yield* Deferred.succeed(answer, "saved")
      expect(yield* Fiber.join(queued)).toBe("saved")
      // Its own answer counts too: one more than the 30 others.
      expect(liveness.answers).toBe(31)

      const flooded = yield* Effect.fork(within("saveState", 10_000, liveness)(Effect.never))
      yield* busy(59)
      expect(flooded.unsafePoll()).toBeNull()
      yield* busy(1)
      expect(yield* Effect.flip(Fiber.join(flooded))).toMatchObject({
        operation: "saveState",
        message: "the store did not answer within 60000 ms (overloaded: it went on answering other statements)"
      })

      // Nothing answered since it started: an outage, noticed at the timeout as without patience.
      const quiet = yield* Effect.fork(within("saveState", 10_000, liveness)(Effect.never))
      yield* TestClock.adjust("10 seconds")
      expect(yield* Effect.flip(Fiber.join(quiet))).toMatchObject({
        message: "the store did not answer within 10000 ms"
      })
    }))
})
