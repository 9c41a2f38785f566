import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { Usage } from "../../src/domain/Usage.js"
import * as Cost from "../../src/rails/Cost.js"
import * as Limits from "../../src/rails/Limits.js"

const usage = (
  fields: Partial<{ input: number; output: number; cacheRead: number; cacheWrite: number; reasoning: number }>
) =>
  new Usage({
    inputTokens: fields.input ?? 0,
    outputTokens: fields.output ?? 0,
    cacheReadTokens: fields.cacheRead ?? 0,
    cacheWriteTokens: fields.cacheWrite ?? 0,
    reasoningTokens: fields.reasoning ?? 0
  })

// Claude Sonnet's published prices at the time of writing: $3 in, $15 out, $0.30 cache read, $3.75 cache write.
const sonnet = Cost.fromUsd({ inputPerMTok: 3, outputPerMTok: 15, cacheReadPerMTok: 0.3, cacheWritePerMTok: 3.75 })

describe("Cost", () => {
  it("keeps prices exact in picodollars per token, six decimals of USD per million tokens included", () => {
    expect(sonnet).toEqual({
      input: 3_000_000,
      output: 15_000_000,
      cacheRead: 300_000,
      cacheWrite: 3_750_000,
      reasoning: 15_000_000
    })
    expect(Cost.fromUsd({ inputPerMTok: 0.075, outputPerMTok: 0.000001 })).toMatchObject({ input: 75_000, output: 1 })
    expect(Cost.exactPrice(0.075)).toBe(true)
    expect(Cost.exactPrice(0.0000001)).toBe(false)
    expect(Cost.exactPrice(-1)).toBe(false)
  })

  it("prices each part of the usage once: cache reads and writes inside the input, reasoning inside the output", () => {
    // 10,000 input of which 8,000 read from the cache and 1,000 written; 2,000 output of which 500 reasoning.
    const u = usage({ input: 10_000, cacheRead: 8_000, cacheWrite: 1_000, output: 2_000, reasoning: 500 })
    // 1,000 × $3 + 8,000 × $0.30 + 1,000 × $3.75 + 1,500 × $15 + 500 × $15, per million: $0.03915 = 39,150 µ$
    expect(Cost.micros(sonnet, u)).toBe(39_150)
    const cheaperReasoning = Cost.fromUsd({ inputPerMTok: 3, outputPerMTok: 15, reasoningPerMTok: 5 })
    expect(Cost.micros(cheaperReasoning, usage({ output: 1_000, reasoning: 1_000 }))).toBe(5_000)
  })

  it("rounds an attempt up to a whole micro-dollar, never down", () => {
    expect(Cost.micros(Cost.fromUsd({ inputPerMTok: 0.1, outputPerMTok: 0.1 }), usage({ input: 1 }))).toBe(1)
    expect(Cost.micros(Cost.fromUsd({ inputPerMTok: 0, outputPerMTok: 0 }), usage({ input: 9, output: 9 }))).toBe(0)
  })

  it.effect.prop(
    "a ledger of integers: the cost of a sum of usages never exceeds the sum of the costs by more than rounding",
    {
      us: fc.array(
        fc.record({ input: fc.nat(200_000), output: fc.nat(50_000), read: fc.nat(100), write: fc.nat(100) }),
        { minLength: 1, maxLength: 20 }
      )
    },
    ({ us }) =>
      Effect.sync(() => {
        const parts = us.map((u) =>
          usage({ input: u.input, output: u.output, cacheRead: Math.min(u.read, u.input), cacheWrite: 0 })
        )
        const each = parts.map((u) => Cost.micros(sonnet, u))
        each.forEach((m) => expect(Number.isInteger(m)).toBe(true))
        const total = each.reduce((a, b) => a + b, 0)
        const whole = Cost.micros(sonnet, parts.reduce((a, b) => Usage.add(a, b), Usage.zero))
        expect(total).toBeGreaterThanOrEqual(whole)
        expect(total - whole).toBeLessThan(parts.length)
      })
  )

  it("fits the next call in what is left: lowers its output cap, or refuses it when its input alone crosses", () => {
    // $0.01 left; 1,000 input tokens at $3/M = 3,000 µ$; 7,000 µ$ left for output at $15/M = 466 tokens.
    expect(Cost.fit([sonnet], 10_000, 1_000, undefined)).toEqual({ _tag: "Fits", maxTokens: 466 })
    expect(Cost.fit([sonnet], 10_000, 1_000, 100)).toEqual({ _tag: "Fits", maxTokens: 100 })
    expect(Cost.fit([sonnet], 3_000, 1_000, undefined)).toEqual({ _tag: "None" })
    // The highest prices of the providers the call may still reach (a failover may land on the dearer one).
    const dear = Cost.fromUsd({ inputPerMTok: 3, outputPerMTok: 75 })
    expect(Cost.fit([sonnet, dear], 10_000, 1_000, undefined)).toEqual({ _tag: "Fits", maxTokens: 93 })
    expect(Cost.fit([sonnet], Cost.unlimited, 1_000_000, 7)).toEqual({ _tag: "Fits", maxTokens: 7 })
  })

  it("a cost budget only ever tightens, like every ceiling", () => {
    const host = { ...Limits.defaults, costPerSession: 50_000 }
    expect(Limits.tighten(host, { costPerSession: 60_000 })._tag).toBe("Left")
    expect(Limits.effective(host, { costPerSession: 60_000 }).costPerSession).toBe(50_000)
    expect(Limits.effective(host, { costPerSession: 10_000 }).costPerSession).toBe(10_000)
    expect(Cost.bounded(Limits.defaults)).toBe(false)
    expect(Cost.bounded(host)).toBe(true)
  })
})
