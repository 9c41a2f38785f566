import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import { Usage } from "../../src/domain/Usage.js"
import * as Budget from "../../src/rails/Budget.js"
import { defaults } from "../../src/rails/Limits.js"

const usage = (inputTokens: number, outputTokens: number) =>
  new Usage({ inputTokens, outputTokens, cacheReadTokens: 0, cacheWriteTokens: 0 })

describe("Budget", () => {
  it("claims one tool-call unit while the budget has room", () => {
    expect(Budget.claimTool({ toolCalls: 49, tokens: 7 }, defaults)).toEqual(Option.some({ toolCalls: 50, tokens: 7 }))
  })

  it("refuses the claim once 50 tool calls have been made", () => {
    expect(Budget.claimTool({ toolCalls: 50, tokens: 0 }, defaults)).toEqual(Option.none())
  })

  it("refuses at an agent's tighter tool-call budget", () => {
    const limits = { ...defaults, toolCalls: 2 }
    const first = Budget.claimTool(Budget.empty, limits)
    const second = Option.flatMap(first, (b) => Budget.claimTool(b, limits))
    const third = Option.flatMap(second, (b) => Budget.claimTool(b, limits))
    expect(Option.map(second, (b) => b.toolCalls)).toEqual(Option.some(2))
    expect(third).toEqual(Option.none())
  })

  it("charges input plus output tokens of every response", () => {
    const charged = Budget.chargeTokens(Budget.chargeTokens(Budget.empty, usage(100, 20)), usage(5, 0))
    expect(charged).toEqual({ toolCalls: 0, tokens: 125 })
  })

  it("does not count cache tokens against the budget", () => {
    const withCache = new Usage({ inputTokens: 10, outputTokens: 1, cacheReadTokens: 500, cacheWriteTokens: 500 })
    expect(Budget.chargeTokens(Budget.empty, withCache).tokens).toBe(11)
  })

  it("tells the model the call was not executed and to answer with what it has", () => {
    expect(Budget.budgetNotice("search_logs", 50)).toBe(
      "tool-call budget of 50 calls for this session is spent; the call to search_logs was not executed. " +
        "Answer with what you have."
    )
  })
})
