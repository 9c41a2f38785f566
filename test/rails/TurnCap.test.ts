import { describe, expect, it } from "@effect/vitest"
import type { ToolCall } from "../../src/domain/Message.js"
import { defaults } from "../../src/rails/Limits.js"
import * as TurnCap from "../../src/rails/TurnCap.js"

const calls = (n: number): ReadonlyArray<ToolCall> =>
  Array.from({ length: n }, (_, i) => ({ id: `call_${i}`, name: `tool_${i}`, arguments: "{}" }))

describe("TurnCap", () => {
  it("runs every call when the turn has at most eight", () => {
    const turn = calls(8)
    expect(TurnCap.split(turn, defaults)).toEqual({ run: turn, surplus: [] })
  })

  it("runs the first eight calls in order and holds back the rest", () => {
    const turn = calls(11)
    const { run, surplus } = TurnCap.split(turn, defaults)
    expect(run.map((c) => c.id)).toEqual(turn.slice(0, 8).map((c) => c.id))
    expect(surplus.map((c) => c.id)).toEqual(["call_8", "call_9", "call_10"])
  })

  it("honours an agent's tighter per-turn cap", () => {
    const { run, surplus } = TurnCap.split(calls(3), { ...defaults, toolCallsPerTurn: 1 })
    expect([run.length, surplus.length]).toEqual([1, 2])
  })

  it("answers a surplus call with a not-executed error paired to its id", () => {
    const result = TurnCap.surplusResult({ id: "call_9", name: "search_logs", arguments: "{}" }, 8)
    expect(result).toMatchObject({ callId: "call_9", name: "search_logs", isError: true, status: "not_executed" })
    expect(result.content).toContain("at most 8 tool calls are executed per turn")
    expect(result.content).toContain("was not executed")
    expect(result.content).toContain("Re-issue it in a later turn")
  })
})
