import { describe, expect, it } from "@effect/vitest"
import { ToolRegistry } from "corral"
import { Arbitraries, Harness, runScript, ScriptedModel } from "corral/testing"
import { Effect } from "effect"

// Your tool: any Effect. The registry validates arguments against `parameters` before `run` is called.
const lookup = ToolRegistry.define<{ q: string }>({
  name: "lookup",
  description: "Looks up a service's status.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  run: ({ q }) => Effect.succeed(`status of ${q}: degraded`)
})

// Your agent, with your own (tighter) rails.
const agent = Harness.agent({ tools: ["lookup"], limits: { toolCalls: 5, modelCallsPerBurst: 8 } })

describe("my triage agent", () => {
  it.effect("answers after one lookup", () =>
    Effect.gen(function*() {
      const run = yield* runScript({
        spec: agent,
        tools: [lookup],
        script: [
          ScriptedModel.toolCalls([{ name: "lookup", arguments: { q: "checkout" } }]),
          ScriptedModel.text("Checkout is degraded.")
        ]
      })
      expect(run.reason).toBe("completed")
      expect(run.turns.map((t) => t.entry.kind)).toEqual(["user", "assistant", "tool_results", "assistant"])
    }))

  it.effect("retries a 429 after its Retry-After, on the TestClock", () =>
    Effect.gen(function*() {
      const run = yield* runScript({
        spec: agent,
        tools: [lookup],
        script: [ScriptedModel.fault("rate_limit", { retryAfterMs: 7_000 }), ScriptedModel.text("done")]
      })
      expect(run.reason).toBe("completed")
      expect(run.trajectory.modelCalls.map((a) => a.error?.kind ?? "ok")).toEqual(["rate_limit", "ok", "ok"])
    }))

  it.effect.prop(
    "whatever the model and the provider do, one report lands and my rails hold",
    { script: Arbitraries.script(["lookup"]) },
    ({ script }) =>
      Effect.gen(function*() {
        const run = yield* runScript({ spec: agent, tools: [lookup], script })
        expect(run.report.exitReason).toBe(run.reason)
        expect(run.state.toolCalls).toBeLessThanOrEqual(5)
        expect(run.trajectory.budgets.length).toBeLessThanOrEqual(8)
      }),
    { fastCheck: { numRuns: 200, seed: 1 } }
  )
})
