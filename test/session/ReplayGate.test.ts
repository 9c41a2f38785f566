/**
 * A wait at a provider's storm gate is in the burst's record (a `storm_wait` decision, for the viewer's waterfall), but it
 * belongs to the process, not to the session's rails: a replay, which runs without the gate, still verifies.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Scripted from "../../src/model/Scripted.js"
import * as StormGuard from "../../src/model/StormGuard.js"
import * as Replay from "../../src/session/Replay.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Tools from "../support/tools.js"

describe("Replay and the storm gate", () => {
  it.effect("a burst whose attempt waited at the gate records the wait and replays to Verified", () =>
    Effect.gen(function*() {
      const agent = Harness.agent({ tools: Tools.names })
      const guard = StormGuard.wrap(
        Scripted.make({
          name: "a",
          script: [Scripted.fault("rate_limit", { retryAfterMs: 2_000 }), Scripted.text("done")]
        }),
        { jitterMs: 0 }
      )
      // Another session's throttle closes the gate for 2 s just before this burst starts.
      yield* Effect.either(guard.complete({ system: "", messages: [{ kind: "user", text: "x" }], tools: [] }))
      const landed = yield* Harness.drive(
        Harness.runBurst({ spec: agent }).pipe(Effect.provide(Harness.layer({ providers: [guard], tools: Tools.all })))
      )
      expect(landed.reason).toBe("completed")
      // The first call waits out the gate; the next one leaves at the paced rate after it (1 / 20 s).
      expect(landed.trajectory.decisions?.filter((d) => d._tag === "storm_wait")).toEqual([
        { _tag: "storm_wait", at: 2_000, provider: "a", waitMs: 2_000 },
        { _tag: "storm_wait", at: 2_050, provider: "a", waitMs: 50 }
      ])
      const result = yield* Replay.verifyBurst({
        spec: agent,
        session: landed.session,
        turns: landed.turns,
        trajectory: landed.trajectory,
        last: true
      })
      expect(result).toMatchObject({ _tag: "Verified", exitReason: "completed" })
    }))
})
