import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Replay from "../../src/session/Replay.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Tools from "../support/tools.js"

const spec = (fields: Parameters<typeof Harness.agent>[0] = {}) => Harness.agent({ tools: Tools.names, ...fields })

const recordAndReplay = (
  providers: ReadonlyArray<ModelProvider>,
  agent = spec()
) =>
  Effect.gen(function*() {
    const landed = yield* Harness.drive(
      Harness.runBurst({ spec: agent }).pipe(Effect.provide(Harness.layer({ providers, tools: Tools.all })))
    )
    const result = yield* Replay.verifyBurst({
      spec: agent,
      session: landed.session,
      turns: landed.turns,
      trajectory: landed.trajectory,
      last: true
    })
    return { landed, result }
  })

const echo = (q: string) => Scripted.toolCalls([{ name: "echo", arguments: { q } }])

describe("Replay", () => {
  it.effect("verifies a burst with tools, a retry and a failover", () =>
    Effect.gen(function*() {
      const a = Scripted.make({
        name: "a",
        script: [echo("x"), Scripted.fault("rate_limit"), Scripted.fault("server"), Scripted.fault("server")]
      })
      const b = Scripted.make({ name: "b", script: [Scripted.text("done")] })
      const { landed, result } = yield* recordAndReplay([a, b])
      expect(landed.trajectory.decisions?.map((d) => d._tag)).toContain("failover")
      expect(result).toMatchObject({ _tag: "Verified", exitReason: "completed", prefix: false })
    }))

  it.effect("verifies truncation and a repeat halt", () =>
    Effect.gen(function*() {
      const status = Scripted.toolCalls([{ name: "status", arguments: { q: "a" } }])
      const model = Scripted.make({
        script: [Scripted.toolCalls([{ name: "logs", arguments: { q: "api" } }]), status, status, status, status]
      })
      const { landed, result } = yield* recordAndReplay([model])
      expect(landed.reason).toBe("repeat_call_halt")
      expect(result).toMatchObject({ _tag: "Verified", exitReason: "repeat_call_halt" })
    }))

  it.effect("a changed rail diverges with the path of the first difference", () =>
    Effect.gen(function*() {
      const status = Scripted.toolCalls([{ name: "status", arguments: { q: "a" } }])
      const model = Scripted.make({ script: [status, status, status, status] })
      const agent = spec()
      const { landed } = yield* recordAndReplay([model], agent)
      const record = landed.trajectory.replay!
      const changed = { ...landed.trajectory, replay: { ...record, limits: { ...record.limits, repeatWarnAt: 3 } } }
      const result = yield* Replay.verifyBurst({
        spec: agent,
        session: landed.session,
        turns: landed.turns,
        trajectory: changed
      })
      expect(result._tag).toBe("Diverged")
      if (result._tag !== "Diverged") return
      expect(result.divergence.path).toMatch(/^turns\[/)
    }))
})
