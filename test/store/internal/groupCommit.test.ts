import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Scope, TestClock } from "effect"
import * as GroupCommit from "../../../src/store/internal/groupCommit.js"
import * as Overload from "../../../src/store/internal/overload.js"

interface Item {
  readonly key: string
  readonly n: number
  readonly size?: number
}

/** A writer whose batches are recorded and can be held in flight until `release`. */
const harness = (
  options: { lanes?: number; maxItems?: number; maxWeight?: number; patience?: Overload.Liveness } = {}
) =>
  Effect.gen(function*() {
    const batches: Array<Array<number>> = []
    let gate = yield* Deferred.make<void>()
    let entered = yield* Deferred.make<void>()
    let hold = false
    const submit = yield* GroupCommit.make<Item, number, string>({
      lanes: options.lanes ?? 1,
      maxItems: options.maxItems ?? 100,
      maxWeight: options.maxWeight ?? 1_000,
      key: (item) => item.key,
      weight: (item) => item.size ?? 1,
      write: (batch) =>
        Effect.gen(function*() {
          batches.push(batch.map((item) => item.n))
          yield* Deferred.succeed(entered, undefined)
          if (hold) yield* Deferred.await(gate)
          if (batch.some((item) => item.n < 0)) return yield* Effect.fail("batch failed")
          return batch.map((item) => item.n % 7 === 0 ? Exit.fail(`item ${item.n} refused`) : Exit.succeed(item.n * 10))
        }),
      closed: () => "closed",
      timedOut: (item, waitedMs) => `item ${item.n} timed out after ${waitedMs} ms`,
      ...(options.patience === undefined ? {} : { patience: options.patience })
    })
    return {
      submit,
      batches,
      /** Holds the next batch in flight until `release`; resolves once it is in flight. */
      holdNext: Effect.gen(function*() {
        hold = true
        entered = yield* Deferred.make<void>()
      }),
      inFlight: Effect.suspend(() => Deferred.await(entered)),
      release: Effect.gen(function*() {
        hold = false
        yield* Deferred.succeed(gate, undefined)
        gate = yield* Deferred.make<void>()
        entered = yield* Deferred.make<void>()
      })
    }
  })

describe("groupCommit", () => {
  it.scoped("writes a lone item at once, then batches whatever queued while a batch was in flight", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      yield* h.holdNext
      const first = yield* Effect.fork(h.submit({ key: "a", n: 1 }))
      yield* h.inFlight
      const rest = yield* Effect.forEach([2, 3, 4], (n) => Effect.fork(h.submit({ key: `k${n}`, n })))
      yield* Effect.yieldNow()
      expect(h.batches).toEqual([[1]])
      yield* h.release
      expect(yield* Fiber.join(first)).toBe(10)
      expect(yield* Effect.forEach(rest, Fiber.join)).toEqual([20, 30, 40])
      expect(h.batches).toEqual([[1], [2, 3, 4]])
    }))

  it.scoped("gives each caller its own item's outcome, and fails every item of a failed batch", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      const outcomes = yield* Effect.forEach([5, 7, 8], (n) => Effect.either(h.submit({ key: "a", n })), {
        concurrency: "unbounded"
      })
      expect(outcomes.map((o) => o._tag === "Right" ? o.right : o.left)).toEqual([50, "item 7 refused", 80])

      yield* h.holdNext
      const blocker = yield* Effect.fork(h.submit({ key: "a", n: 1 }))
      yield* h.inFlight
      const doomed = yield* Effect.forEach([-1, 2], (n) => Effect.fork(Effect.either(h.submit({ key: "b", n }))))
      yield* h.release
      yield* Fiber.join(blocker)
      const failed = yield* Effect.forEach(doomed, Fiber.join)
      expect(failed.map((o) => o._tag === "Left" ? o.left : o.right)).toEqual(["batch failed", "batch failed"])
    }))

  it.scoped("keeps each key's submission order across batches and lanes", () =>
    Effect.gen(function*() {
      const h = yield* harness({ lanes: 4, maxItems: 7 })
      const fibers = []
      for (let n = 1; n <= 200; n++) fibers.push(yield* Effect.fork(h.submit({ key: `k${n % 10}`, n })))
      yield* Effect.forEach(fibers, (fiber) => Effect.either(Fiber.join(fiber)), { discard: true })
      const written = h.batches.flat()
      expect(written.slice().sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
      for (let k = 0; k < 10; k++) {
        const order = written.filter((n) => n % 10 === k)
        expect(order).toEqual(order.slice().sort((a, b) => a - b))
      }
      expect(h.batches.every((batch) => batch.length <= 7)).toBe(true)
    }))

  it.scoped("splits a batch by weight, and sends an overweight item alone", () =>
    Effect.gen(function*() {
      const h = yield* harness({ maxWeight: 10 })
      yield* h.holdNext
      const blocker = yield* Effect.fork(h.submit({ key: "a", n: 1 }))
      yield* h.inFlight
      const sized = [[2, 4], [3, 4], [4, 4], [5, 30], [6, 1]] as const
      const rest = yield* Effect.forEach(sized, ([n, size]) => Effect.fork(h.submit({ key: "a", n, size })))
      yield* h.release
      yield* Fiber.join(blocker)
      yield* Effect.forEach(rest, Fiber.join, { discard: true })
      expect(h.batches).toEqual([[1], [2, 3], [4], [5], [6]])
    }))

  it.scoped("withdraws an item whose caller is interrupted before a writer took it", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      yield* h.holdNext
      const blocker = yield* Effect.fork(h.submit({ key: "a", n: 1 }))
      yield* h.inFlight
      const withdrawn = yield* Effect.fork(h.submit({ key: "a", n: 2 }))
      const kept = yield* Effect.fork(h.submit({ key: "a", n: 3 }))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(withdrawn)
      yield* h.release
      yield* Fiber.join(blocker)
      expect(yield* Fiber.join(kept)).toBe(30)
      expect(h.batches).toEqual([[1], [3]])
    }))

  it.effect("fails queued and in-flight items, and later submissions, once its scope closes", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const h = yield* harness().pipe(Scope.extend(scope))
      yield* h.holdNext
      const inFlight = yield* Effect.fork(h.submit({ key: "a", n: 1 }))
      yield* h.inFlight
      const queued = yield* Effect.fork(h.submit({ key: "a", n: 2 }))
      yield* Effect.yieldNow()
      yield* Scope.close(scope, Exit.void)
      expect(yield* Effect.flip(Fiber.join(inFlight))).toBe("closed")
      expect(yield* Effect.flip(Fiber.join(queued))).toBe("closed")
      expect(yield* Effect.flip(h.submit({ key: "a", n: 3 }))).toBe("closed")
    }))

  it.scoped("fails an item its timeout caught, in flight or queued, and never writes a queued one", () =>
    Effect.gen(function*() {
      const h = yield* harness()
      yield* h.holdNext
      const inFlight = yield* Effect.fork(h.submit({ key: "a", n: 1 }, 1_000))
      yield* h.inFlight
      const queued = yield* Effect.fork(h.submit({ key: "a", n: 2 }, 1_000))
      const patient = yield* Effect.fork(h.submit({ key: "a", n: 3 }))
      const later = yield* Effect.fork(h.submit({ key: "b", n: 4 }, 5_000))
      yield* TestClock.adjust("999 millis")
      expect(inFlight.unsafePoll()).toBeNull()
      yield* TestClock.adjust("101 millis")
      expect(yield* Effect.flip(Fiber.join(inFlight))).toBe("item 1 timed out after 1000 ms")
      expect(yield* Effect.flip(Fiber.join(queued))).toBe("item 2 timed out after 1000 ms")
      expect(patient.unsafePoll()).toBeNull()
      yield* h.release
      expect(yield* Fiber.join(patient)).toBe(30)
      expect(yield* Fiber.join(later)).toBe(40)
      expect(h.batches).toEqual([[1], [3, 4]])
    }))

  it.scoped("gives an item more time while the database answers others, up to the overload ceiling; a quiet one fails it at its timeout", () =>
    Effect.gen(function*() {
      const liveness = new Overload.Liveness()
      const h = yield* harness({ patience: liveness })
      /** The database answering other statements of the store, every 400 ms, for `ms`. */
      const busy = (ms: number) =>
        Effect.forEach(
          Array.from({ length: ms / 400 }),
          () => Effect.zipRight(TestClock.adjust("400 millis"), Effect.sync(() => liveness.answered())),
          { discard: true }
        )
      yield* h.holdNext
      const blocker = yield* Effect.fork(h.submit({ key: "a", n: 1 }))
      yield* h.inFlight
      // Queued behind a batch that takes long, with 1 s to go: busy for 4 s, it waits on and is written.
      const queued = yield* Effect.fork(h.submit({ key: "a", n: 2 }, 1_000))
      yield* busy(4_000)
      expect(queued.unsafePoll()).toBeNull()
      yield* h.release
      expect(yield* Fiber.join(blocker)).toBe(10)
      expect(yield* Fiber.join(queued)).toBe(20)

      // However busy, the wait is bounded: six timeouts.
      yield* h.holdNext
      const held = yield* Effect.fork(h.submit({ key: "a", n: 3 }))
      yield* h.inFlight
      const flooded = yield* Effect.fork(h.submit({ key: "a", n: 4 }, 1_000))
      yield* busy(5_600)
      expect(flooded.unsafePoll()).toBeNull()
      yield* busy(800)
      expect(yield* Effect.flip(Fiber.join(flooded))).toBe("item 4 timed out after 6000 ms")

      // A database that went quiet: the item fails at its own timeout, as without patience.
      const quiet = yield* Effect.fork(h.submit({ key: "a", n: 5 }, 1_000))
      yield* TestClock.adjust("999 millis")
      expect(quiet.unsafePoll()).toBeNull()
      yield* TestClock.adjust("101 millis")
      expect(yield* Effect.flip(Fiber.join(quiet))).toBe("item 5 timed out after 1000 ms")
      yield* h.release
      expect(yield* Fiber.join(held)).toBe(30)
      expect(h.batches).toEqual([[1], [2], [3]])
    }))
})
