import { describe, expect, it } from "@effect/vitest"
import type { FinishReason, ModelReply, ToolCall } from "../../src/domain/Message.js"
import { Usage } from "../../src/domain/Usage.js"
import { defaults } from "../../src/rails/Limits.js"
import * as ReplyPolicy from "../../src/rails/ReplyPolicy.js"

const call: ToolCall = { id: "c1", name: "search", arguments: "{\"q\":\"err" }

const reply = (finishReason: FinishReason, text: string, toolCalls: ReadonlyArray<ToolCall> = []): ModelReply => ({
  text,
  toolCalls,
  finishReason,
  usage: Usage.zero,
  model: "test-model"
})

describe("ReplyPolicy", () => {
  it("exits on a filtered reply even when it carries text and calls", () => {
    expect(ReplyPolicy.classify(reply("filtered", "partial", [call]))).toEqual({ _tag: "Filtered" })
  })

  it("exits on a refusal", () => {
    expect(ReplyPolicy.classify(reply("refused", "I can't help with that"))).toEqual({ _tag: "Refused" })
  })

  it("drops every tool call of a reply cut at the output limit", () => {
    expect(ReplyPolicy.classify(reply("length", "", [call, call]))).toEqual({ _tag: "Truncated", droppedCalls: 2 })
  })

  it("nudges a reply cut at the output limit even without tool calls", () => {
    expect(ReplyPolicy.classify(reply("length", "The root cause is"))).toEqual({ _tag: "Truncated", droppedCalls: 0 })
  })

  it("treats whitespace-only text with no calls as empty", () => {
    expect(ReplyPolicy.classify(reply("stop", " \n\t "))).toEqual({ _tag: "Empty" })
  })

  it("runs the tool calls of a reply that has them, whatever its text", () => {
    expect(ReplyPolicy.classify(reply("tool_calls", "", [call]))).toEqual({ _tag: "ToolCalls", calls: [call] })
    expect(ReplyPolicy.classify(reply("stop", "checking", [call]))).toEqual({ _tag: "ToolCalls", calls: [call] })
  })

  it("completes on text with no tool calls", () => {
    expect(ReplyPolicy.classify(reply("stop", "The disk is full."))).toEqual({
      _tag: "Final",
      text: "The disk is full."
    })
    expect(ReplyPolicy.classify(reply("unknown", "done"))).toEqual({ _tag: "Final", text: "done" })
  })

  it("tells the model a cut reply lost its calls and to re-issue them shorter, one at a time", () => {
    expect(ReplyPolicy.lengthNudge).toContain("output token limit")
    expect(ReplyPolicy.lengthNudge).toContain("dropped")
    expect(ReplyPolicy.lengthNudge).toContain("one at a time")
  })

  it("tells the model an empty reply must continue or answer", () => {
    expect(ReplyPolicy.emptyNudge).toContain("empty")
    expect(ReplyPolicy.emptyNudge).toContain("Continue")
    expect(ReplyPolicy.emptyNudge).toContain("final answer")
  })

  it("nudges the first two empty replies and exits on the third", () => {
    expect([1, 2, 3].map((n) => ReplyPolicy.emptyExhausted(n, defaults))).toEqual([false, false, true])
  })

  it("exits on the second empty reply when an agent allows one nudge", () => {
    expect([1, 2].map((n) => ReplyPolicy.emptyExhausted(n, { ...defaults, emptyNudges: 1 }))).toEqual([false, true])
  })
})
