import { describe, expect, it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Supervisor, TestClock } from "effect"
import * as BoundedWait from "../../src/internal/boundedWait.js"
import * as SyncFirst from "../../src/internal/syncFirst.js"

class Late {
  readonly _tag = "Late"
}
class Refused {
  readonly _tag = "Refused"
}

const bound = { duration: "1 second", onTimeout: () => new Late() } as const

/** An effect that never answers and records its interruption in `interrupted`. */
const silent = (interrupted: Deferred.Deferred<void>) =>
  Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)))

/** An effect that waits for `answer` (so it suspends) and then returns what it holds. */
const answered = <A, E>(answer: Deferred.Deferred<A, E>) => Deferred.await(answer)

/**
 * Whether every fiber `supervisor` saw has ended, once the fibers told to stop have had a few turns (a TestClock
 * sleep, interrupted, first ends the warning fiber it forked).
 */
const allEnded = (supervisor: Supervisor.Supervisor<Array<Fiber.RuntimeFiber<unknown, unknown>>>) =>
  Effect.gen(function*() {
    for (let turn = 0; turn < 20; turn++) {
      if ((yield* supervisor.value).length === 0) return true
      yield* Effect.yieldNow()
    }
    return false
  })

describe("BoundedWait.disconnected", () => {
  it.effect("fails with the timeout exactly at the bound, not before", () =>
    Effect.gen(function*() {
      const interrupted = yield* Deferred.make<void>()
      const caller = yield* Effect.fork(BoundedWait.disconnected(silent(interrupted), bound))
      yield* TestClock.adjust("999 millis")
      expect(caller.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      expect(yield* Effect.flip(Fiber.join(caller))).toBeInstanceOf(Late)
    }))

  it.effect("interrupts the abandoned effect in the background: the caller does not wait for its finalizer", () =>
    Effect.gen(function*() {
      const interrupted = yield* Deferred.make<void>()
      const neverReleased = yield* Deferred.make<void>()
      const stuck = Effect.never.pipe(
        Effect.onInterrupt(() =>
          Effect.zipRight(Deferred.succeed(interrupted, undefined), Deferred.await(neverReleased))
        )
      )
      const caller = yield* Effect.fork(BoundedWait.disconnected(stuck, bound))
      yield* TestClock.adjust("1 second")
      expect(yield* Effect.flip(Fiber.join(caller))).toBeInstanceOf(Late)
      yield* Deferred.await(interrupted)
    }))

  it.effect("an interrupted caller interrupts the effect, without waiting for its finalizer", () =>
    Effect.gen(function*() {
      const interrupted = yield* Deferred.make<void>()
      const neverReleased = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      const stuck = Effect.zipRight(Deferred.succeed(started, undefined), Effect.never).pipe(
        Effect.onInterrupt(() =>
          Effect.zipRight(Deferred.succeed(interrupted, undefined), Deferred.await(neverReleased))
        )
      )
      const caller = yield* Effect.fork(BoundedWait.disconnected(stuck, bound))
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(caller)
      expect(Exit.isInterrupted(exit)).toBe(true)
      yield* Deferred.await(interrupted)
    }))

  it.effect("passes a success, a typed failure and a defect through, whether or not the effect suspends", () =>
    Effect.gen(function*() {
      expect(yield* BoundedWait.disconnected(Effect.succeed(1), bound)).toBe(1)
      const refused = new Refused()
      expect(yield* Effect.flip(BoundedWait.disconnected(Effect.fail(refused), bound))).toBe(refused)
      const boom = new Error("boom")
      const died = yield* Effect.exit(BoundedWait.disconnected(Effect.die(boom), bound))
      expect(Exit.isFailure(died) && Cause.squash(died.cause)).toBe(boom)

      const success = yield* Deferred.make<number, Refused>()
      const later = yield* Effect.fork(BoundedWait.disconnected(answered(success), bound))
      yield* Deferred.succeed(success, 2)
      expect(yield* Fiber.join(later)).toBe(2)
      const failure = yield* Deferred.make<number, Refused>()
      const laterFailing = yield* Effect.fork(BoundedWait.disconnected(answered(failure), bound))
      yield* Deferred.fail(failure, refused)
      expect(yield* Effect.flip(Fiber.join(laterFailing))).toBe(refused)
    }))

  it.effect("an effect that answers in time leaves no timer behind (TestClock: its sleep's fiber has ended)", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.track
      const answer = yield* Deferred.make<number>()
      const caller = yield* Effect.fork(
        Effect.supervised(BoundedWait.disconnected(answered(answer), bound), supervisor)
      )
      yield* Effect.yieldNow()
      // The effect and the timer's sleep are both running now.
      expect((yield* supervisor.value).length).toBe(2)
      yield* Deferred.succeed(answer, 3)
      expect(yield* Fiber.join(caller)).toBe(3)
      expect(yield* allEnded(supervisor)).toBe(true)
      // Past the bound nothing fires (a timeout after the answer would be a defect of the caller's resume).
      yield* TestClock.adjust("2 seconds")
    }))

  it.live("an effect that answers in time leaves no timer behind (live clock: the setTimeout is cleared)", () =>
    Effect.gen(function*() {
      const timers = () => process.getActiveResourcesInfo().filter((resource) => resource === "Timeout").length
      const before = timers()
      const answer = yield* Deferred.make<number>()
      const caller = yield* Effect.fork(
        BoundedWait.disconnected(answered(answer), { duration: "1 minute", onTimeout: () => new Late() })
      )
      for (let turn = 0; turn < 20 && timers() === before; turn++) yield* Effect.yieldNow()
      expect(timers()).toBe(before + 1)
      yield* Deferred.succeed(answer, 4)
      expect(yield* Fiber.join(caller)).toBe(4)
      expect(timers()).toBe(before)
    }))
})

describe("BoundedWait.joinWithin", () => {
  it.effect("fails with the timeout at the bound once the interrupted fiber has ended", () =>
    Effect.gen(function*() {
      const interrupted = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const stuck = Effect.never.pipe(
        Effect.onInterrupt(() => Effect.zipRight(Deferred.succeed(interrupted, undefined), Deferred.await(release)))
      )
      const fiber = yield* Effect.forkDaemon(stuck)
      const caller = yield* Effect.fork(BoundedWait.joinWithin(fiber, bound))
      yield* TestClock.adjust("999 millis")
      expect(caller.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 millis")
      yield* Deferred.await(interrupted)
      // The fiber's finalizer still runs: the caller waits for it.
      yield* Effect.yieldNow()
      expect(caller.unsafePoll()).toBeNull()
      yield* Deferred.succeed(release, undefined)
      expect(yield* Effect.flip(Fiber.join(caller))).toBeInstanceOf(Late)
    }))

  it.effect("an interrupted caller interrupts the fiber and waits for it", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      const released = yield* Deferred.make<void>()
      const stuck = Effect.never.pipe(
        Effect.onInterrupt(() => Effect.zipRight(Deferred.await(release), Deferred.succeed(released, undefined)))
      )
      const fiber = yield* Effect.forkDaemon(stuck)
      const caller = yield* Effect.fork(BoundedWait.joinWithin(fiber, bound))
      yield* Effect.yieldNow()
      const interrupting = yield* Effect.fork(Fiber.interrupt(caller))
      yield* Effect.yieldNow()
      expect(interrupting.unsafePoll()).toBeNull()
      yield* Deferred.succeed(release, undefined)
      expect(Exit.isInterrupted(yield* Fiber.join(interrupting))).toBe(true)
      expect(yield* Deferred.isDone(released)).toBe(true)
    }))

  it.effect("SyncFirst.within: a suspended call that answers in time passes through and leaves no fiber behind", () =>
    Effect.gen(function*() {
      const supervisor = yield* Supervisor.track
      const answer = yield* Deferred.make<number, Refused>()
      const caller = yield* Effect.fork(
        Effect.supervised(SyncFirst.within(answered(answer), "1 second", () => new Late()), supervisor)
      )
      yield* Effect.yieldNow()
      const refused = new Refused()
      yield* Deferred.fail(answer, refused)
      expect(yield* Effect.flip(Fiber.join(caller))).toBe(refused)
      expect(yield* allEnded(supervisor)).toBe(true)
    }))
})
