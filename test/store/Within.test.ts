import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, TestClock } from "effect"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import { within } from "../../src/store/internal/failure.js"

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
})
