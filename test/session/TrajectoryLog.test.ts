import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, TestClock } from "effect"
import type { Trajectory } from "../../src/domain/Trajectory.js"
import * as TrajectoryLog from "../../src/session/internal/trajectoryLog.js"

// A stand-in trajectory: the log only hands what `build` gives to `save`.
const trajectoryOf = (runId: string, turns: number) => ({ runId, turns }) as unknown as Trajectory

describe("TrajectoryLog: provisional saves", () => {
  it.scoped("are capped process-wide: a third burst's save waits for a slot, then writes its latest state", () =>
    Effect.gen(function*() {
      const release = yield* Deferred.make<void>()
      let running = 0
      let peak = 0
      const saved: Array<{ runId: string; turns: number }> = []
      const started: Array<string> = []
      const save = (t: Trajectory) =>
        Effect.gen(function*() {
          started.push(t.runId)
          running += 1
          peak = Math.max(peak, running)
          yield* Deferred.await(release)
          saved.push(t as unknown as { runId: string; turns: number })
          running -= 1
        })
      const turns = new Map<string, number>()
      const logs = yield* Effect.forEach(["a", "b", "c"], (runId) => {
        turns.set(runId, 1)
        return TrajectoryLog.make(
          save,
          Effect.sync(() => trajectoryOf(runId, turns.get(runId)!)),
          () => Effect.void
        )
      })
      yield* Effect.sync(() => logs.forEach((log) => log.touch()))
      yield* TestClock.adjust(TrajectoryLog.spacingMs)
      yield* Effect.yieldNow()
      expect(running).toBe(TrajectoryLog.inFlight)
      // The third waits for a slot and keeps working meanwhile: its save will carry what it has by then.
      const waiting = ["a", "b", "c"].find((id) => !started.includes(id))!
      turns.set(waiting, 7)
      yield* Effect.sync(() => logs[["a", "b", "c"].indexOf(waiting)]!.touch())
      yield* Deferred.succeed(release, undefined)
      for (let i = 0; i < 100 && saved.length < 3; i++) yield* Effect.yieldNow()
      yield* Effect.forEach(logs, (log) => log.close)
      expect(peak).toBe(TrajectoryLog.inFlight)
      expect(saved.find((t) => t.runId === waiting)).toEqual({ runId: waiting, turns: 7 })
    }))

  it.scoped("a burst that closes before its spacing ran saves nothing provisional", () =>
    Effect.gen(function*() {
      let saves = 0
      const log = yield* TrajectoryLog.make(
        () => Effect.sync(() => void saves++),
        Effect.sync(() => trajectoryOf("quick", 1)),
        () => Effect.void
      )
      yield* Effect.sync(() => log.touch())
      yield* log.close
      const after = yield* Effect.fork(TestClock.adjust(TrajectoryLog.spacingMs * 4))
      yield* Fiber.join(after)
      expect(saves).toBe(0)
    }))
})
