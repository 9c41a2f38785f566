/**
 * Money as a rail in the loop: every attempt is priced (failed ones too), the ledger adds up, a cost budget ends a
 * burst with `cost_budget`, the gate lowers a call's output cap to fit what is left or makes no call, and the
 * overspend never exceeds the stated bound of one call. Every session here is replayed after the file
 * (test/support/replayEverySession), so the cost decisions replay too.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Layer } from "effect"
import type { LimitsOverride } from "../../src/domain/Limits.js"
import type { ModelReply } from "../../src/domain/Message.js"
import { Usage } from "../../src/domain/Usage.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Cost from "../../src/rails/Cost.js"
import * as Limits from "../../src/rails/Limits.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Tools from "../support/tools.js"

// $3 / $15 per million tokens, cache reads at $0.30: one 1,000-in / 100-out reply costs 4,500 µ$.
const prices = { inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3 }

const reply = (
  finishReason: ModelReply["finishReason"],
  usage: { input: number; output: number; cacheRead?: number; reasoning?: number },
  calls = 0
): Scripted.Step => ({
  _tag: "Reply",
  reply: {
    text: calls > 0 ? "" : "done",
    toolCalls: Array.from({ length: calls }, () => ({ id: "", name: "echo", arguments: "{\"q\":\"x\"}" })),
    finishReason,
    usage: new Usage({
      inputTokens: usage.input,
      outputTokens: usage.output,
      cacheReadTokens: usage.cacheRead ?? 0,
      cacheWriteTokens: 0,
      reasoningTokens: usage.reasoning ?? 0
    }),
    model: ""
  }
})
const call = (input = 1_000, output = 100) => reply("tool_calls", { input, output }, 1)

const run = (
  providers: ReadonlyArray<Scripted.Scripted>,
  limits: LimitsOverride = {},
  prompt?: string
) =>
  Harness.drive(
    Harness.runBurst({ spec: Harness.agent({ tools: Tools.names }), ...(prompt === undefined ? {} : { prompt }) }).pipe(
      Effect.provide(Layer.merge(
        Harness.layer({ providers, tools: Tools.all }),
        Limits.layer(limits)
      ))
    )
  )

describe("Cost budgets", () => {
  it.effect("prices every attempt, failed and retried ones included, and the ledger adds up to the session's", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        pricing: prices,
        script: [
          call(),
          Scripted.fault("rate_limit", { usage: { input: 2_000, output: 0 } }),
          reply("tool_calls", { input: 1_000, output: 100, cacheRead: 800 }, 1),
          reply("stop", { input: 1_000, output: 100 })
        ]
      })
      const landed = yield* run([model])
      const costs = landed.trajectory.modelCalls.map((a) => a.costMicros)
      // 4,500; the refused attempt's 2,000 input: 6,000; 200 × $3 + 800 × $0.30 + 100 × $15 = 2,340; 4,500; the
      // finalize call (the scripted report: 10 in / 5 out) 105.
      expect(costs).toEqual([4_500, 6_000, 2_340, 4_500, 105])
      const sum = costs.reduce((a, b) => (a ?? 0) + (b ?? 0), 0)
      expect(landed.trajectory.costMicros).toBe(sum)
      expect(landed.state.costMicros).toBe(sum)
    }))

  it.effect("ends the burst with cost_budget once the session's budget is reached, and no finalize is paid for", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ pricing: prices, script: Array.from({ length: 10 }, () => call()) })
      const landed = yield* run([model], { costPerSession: 10_000 })
      expect(landed.reason).toBe("cost_budget")
      // Two calls spent 9,000; the third was sent with its output cap lowered to fit 1,000 µ$ (the cut reply) and the
      // budget was then spent: the gate ends the burst before a fourth call.
      const decisions = landed.trajectory.decisions ?? []
      expect(decisions.filter((d) => d._tag === "cost_cap").length).toBeGreaterThan(0)
      expect(decisions.at(-1)).toMatchObject({ _tag: "exit", check: "cost_budget", reason: "cost_budget" })
      expect(landed.report.source).toBe("fallback")
      expect(landed.state.costMicros).toBeLessThanOrEqual(10_000 + 4_500)
    }))

  it.effect("makes no call whose input alone would cross what is left", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ pricing: prices, script: [call()] })
      // 10 µ$ buys ~3,300 input tokens at $3/M: the opening request is small enough, but 1 µ$ is not.
      const landed = yield* run([model], { costPerBurst: 1 }, "x".repeat(30_000))
      expect(landed.reason).toBe("cost_budget")
      expect(landed.trajectory.modelCalls).toEqual([])
      expect(model.requests).toEqual([])
      expect(landed.trajectory.decisions?.at(-1)).toMatchObject({ check: "cost_budget" })
    }))

  it.effect.prop(
    "with random usage, faults and failovers: the ledger is the sum of the priced attempts, and no session spends more " +
      "than its budget plus one call",
    {
      scripts: fc.array(
        fc.array(
          fc.oneof(
            fc.record({ input: fc.integer({ min: 1, max: 4_000 }), output: fc.integer({ min: 0, max: 800 }) }).map((
              u
            ) => call(u.input, u.output)),
            fc.record({ input: fc.integer({ min: 1, max: 4_000 }), read: fc.nat(4_000), reasoning: fc.nat(400) }).map((
              u
            ) =>
              reply("tool_calls", {
                input: u.input,
                output: 400,
                cacheRead: Math.min(u.read, u.input),
                reasoning: u.reasoning
              }, 1)
            ),
            fc.integer({ min: 0, max: 3_000 }).map((input) =>
              Scripted.fault("rate_limit", { usage: { input, output: 0 } })
            ),
            fc.constant(Scripted.fault("auth"))
          ),
          { minLength: 1, maxLength: 12 }
        ),
        { minLength: 1, maxLength: 3 }
      ),
      budget: fc.integer({ min: 1, max: 60_000 })
    },
    ({ budget, scripts }) =>
      Effect.gen(function*() {
        const route = scripts.map((script, i) =>
          Scripted.make({
            name: `p${i}`,
            pricing: i === 1 ? { inputPerMTok: 6, outputPerMTok: 30 } : prices,
            script,
            maxAttempts: 2,
            whenDone: reply("stop", { input: 500, output: 50 })
          })
        )
        const landed = yield* run(route, { costPerSession: budget })
        const attempts = landed.trajectory.modelCalls
        const dearest = { ...Cost.fromUsd({ inputPerMTok: 6, outputPerMTok: 30 }) }
        for (const a of attempts) {
          const provider = route.find((p) => p.name === a.provider)!
          expect(a.costMicros).toBe(Cost.micros(provider.pricing!, a.usage))
        }
        const ledger = attempts.reduce((sum, a) => sum + (a.costMicros ?? 0), 0)
        // The gate let no call start once the budget was spent: every call began below it.
        for (const snap of landed.trajectory.budgets) expect(snap.costMicros).toBeLessThan(budget)
        expect(landed.state.costMicros).toBe(ledger)
        // One call past the budget at most: its attempts (2 per provider, every provider) at the largest usage a
        // script can bill (4,000 in + 800 out) at the dearest prices.
        const oneCall = 2 * route.length * Cost.micros(dearest, new Usage({ inputTokens: 4_000, outputTokens: 800 }))
        expect(ledger).toBeLessThanOrEqual(budget + oneCall)
      }),
    { fastCheck: { numRuns: 40 } }
  )
})
