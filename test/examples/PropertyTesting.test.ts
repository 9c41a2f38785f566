import { describe, expect, it } from "@effect/vitest"
import { ExitPolicy, ToolRegistry } from "corral"
// `FastCheck` is the fast-check the arbitraries are built on (3, inside effect): fast-check 4 from npm does not fit.
import { Arbitraries, FastCheck as fc, Harness, replay, runScript, ScriptedModel } from "corral/testing"
import { Effect, Either } from "effect"

// Your tool: any Effect. The registry validates arguments against `parameters` before `run` is called.
const lookup = ToolRegistry.define<{ q: string }>({
  name: "lookup",
  description: "Looks up a service's status.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  run: ({ q }) => Effect.succeed(`status of ${q}: degraded`)
})

// Your agent, with your own (tighter) rails, and an exit check of its own, as data: end the burst after three
// lookups in it. An own check ends a burst earlier, never later: every built-in ceiling is still asked first.
const agent = Harness.agent({
  tools: ["lookup"],
  limits: { toolCalls: 5, modelCallsPerBurst: 8 },
  exitPolicy: {
    checks: [{ name: "three-lookups", at: "after_tools", metric: "toolCallsBurst", atLeast: 3, reason: "tool_budget" }]
  }
})

// A host-wide check in code, composed into Corral's policy and put in force with a layer (`ExitPolicy.layer`):
// stop any burst that has spent 2,000 tokens, and ask it before the built-in ceilings.
const frugal = Either.getOrThrow(
  ExitPolicy.add(
    ExitPolicy.defaults,
    ExitPolicy.check({
      name: "frugal",
      at: "before_model",
      reason: "token_budget",
      fires: (facts) => facts.tokensBurst >= 2_000,
      notice: "this burst spent 2,000 tokens"
    }),
    { before: "burst_limit" }
  )
)

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

  it.effect("my own check ends the burst after three lookups, and says so in the trajectory", () =>
    Effect.gen(function*() {
      const ask = (q: string) => ScriptedModel.toolCalls([{ name: "lookup", arguments: { q } }])
      const run = yield* runScript({ spec: agent, tools: [lookup], script: [ask("a"), ask("b"), ask("c"), ask("d")] })
      expect(run.reason).toBe("tool_budget")
      expect(run.trajectory.decisions?.at(-1)).toMatchObject({ _tag: "exit", check: "three-lookups" })
      // The stored burst replays to the same decisions: the exit was the rails', not luck.
      expect((yield* replay(run))._tag).toBe("Verified")
    }))

  it.effect.prop(
    "whatever the model and the provider do, one report lands and my rails hold",
    // Calls derived from the tool's own schema; `q` pinned to names the tool knows (its invalid calls follow from them).
    {
      script: Arbitraries.script([lookup], {
        overrides: { lookup: fc.record({ q: fc.constantFrom("checkout", "db") }) }
      })
    },
    ({ script }) =>
      Effect.gen(function*() {
        const run = yield* runScript({ spec: agent, tools: [lookup], script }).pipe(
          Effect.provide(ExitPolicy.layer(frugal))
        )
        expect(run.report.exitReason).toBe(run.reason)
        expect(run.state.toolCalls).toBeLessThanOrEqual(5)
        expect(run.trajectory.budgets.length).toBeLessThanOrEqual(8)
        expect((yield* replay(run, { policy: frugal }))._tag).toBe("Verified")
      }),
    // Up to 200 runs, as many as fit in 2.5 s: inside vitest's default 5 s per test on any machine.
    Harness.property({ numRuns: 200, seed: 1 })
  )
})
