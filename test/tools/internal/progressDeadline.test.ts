import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Option, Queue, TestClock } from "effect"
import * as Deadline from "../../../src/tools/internal/progressDeadline.js"

/** Forks the deadline of a call with a 1 s window and a 5 s cap, and hands over its progress queue. */
const started = Effect.gen(function*() {
  const progressed = yield* Queue.sliding<void>(1)
  const fiber = yield* Effect.fork(Deadline.run(1000, 5000, progressed))
  yield* Effect.yieldNow()
  return { fiber, progress: Queue.offer(progressed, undefined).pipe(Effect.zipLeft(Effect.yieldNow())) }
})

const passed = (fiber: Fiber.Fiber<Deadline.Expiry>) => Effect.map(Fiber.poll(fiber), Option.isSome)

describe("progressDeadline", () => {
  it.effect("ends a call that stays silent for one window", () =>
    Effect.gen(function*() {
      const { fiber } = yield* started
      yield* TestClock.adjust(999)
      expect(yield* passed(fiber)).toBe(false)
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(fiber)).toBe("quiet")
    }))

  it.effect("restarts the window at each progress notification", () =>
    Effect.gen(function*() {
      const { fiber, progress } = yield* started
      // Progress every 800 ms carries the call to 3.2 s, well past its 1 s window.
      for (let i = 0; i < 4; i++) {
        yield* TestClock.adjust(800)
        yield* progress
      }
      yield* TestClock.adjust(999)
      expect(yield* passed(fiber)).toBe(false)
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(fiber)).toBe("quiet")
    }))

  it.effect("never extends a call past the hard cap, however often it reports progress", () =>
    Effect.gen(function*() {
      const { fiber, progress } = yield* started
      for (let i = 0; i < 12; i++) {
        yield* TestClock.adjust(400)
        expect(yield* passed(fiber)).toBe(false)
        yield* progress
      }
      // 4.8 s in, progress just came: the window would reach 5.8 s, the cap stops it at 5 s.
      yield* TestClock.adjust(199)
      expect(yield* passed(fiber)).toBe(false)
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(fiber)).toBe("cap")
    }))

  it("puts the cap at five windows", () => {
    expect(Deadline.PROGRESS_CAP_FACTOR).toBe(5)
  })
})
