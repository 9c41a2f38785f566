import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import type { ToolResult, TurnEntry } from "../../src/domain/Message.js"
import * as Prune from "../../src/rails/Prune.js"

const result = (callId: string, name: string, content: string, isError = false): ToolResult => ({
  callId,
  name,
  content,
  isError,
  status: isError ? "error" : "ok"
})

const big = "log line\n".repeat(500)

const transcript: ReadonlyArray<TurnEntry> = [
  { kind: "user", text: "why is checkout slow?" },
  { kind: "assistant", text: "", toolCalls: [{ id: "a", name: "logs", arguments: "{}" }], finishReason: "tool_calls" },
  { kind: "tool_results", results: [result("a", "logs", big)] },
  {
    kind: "assistant",
    text: "",
    toolCalls: [{ id: "b", name: "metrics", arguments: "{}" }, { id: "c", name: "ping", arguments: "{}" }],
    finishReason: "tool_calls"
  },
  { kind: "tool_results", results: [result("b", "metrics", big, true), result("c", "ping", "pong")] },
  { kind: "notice", rail: "RepeatGuard", text: "careful" },
  { kind: "assistant", text: "", toolCalls: [{ id: "d", name: "logs", arguments: "{}" }], finishReason: "tool_calls" },
  { kind: "tool_results", results: [result("d", "logs", big)] }
]

const contents = (entries: ReadonlyArray<TurnEntry>): ReadonlyArray<ReadonlyArray<string>> =>
  entries.flatMap((e) => (e.kind === "tool_results" ? [e.results.map((r) => r.content)] : []))

describe("Prune", () => {
  it("keeps the latest tool results whole when turns of other kinds follow them", () => {
    const later: ReadonlyArray<TurnEntry> = [...transcript, { kind: "notice", rail: "ReplyPolicy", text: "continue" }]
    const pruned = Option.getOrThrow(Prune.prune(later))
    expect(contents(pruned).at(-1)).toEqual([big])
  })

  it("keeps a result exactly as long as its placeholder (pruning it would free nothing)", () => {
    // The placeholder of a 3-digit size is as long for every 3-digit size.
    const sized = "y".repeat(Buffer.byteLength(Prune.placeholder("logs", 100)))
    const entries: ReadonlyArray<TurnEntry> = [
      { kind: "tool_results", results: [result("a", "logs", sized)] },
      { kind: "tool_results", results: [result("b", "logs", "last")] }
    ]
    expect(Buffer.byteLength(Prune.placeholder("logs", sized.length))).toBe(sized.length)
    expect(Prune.prune(entries)).toEqual(Option.none())
  })

  it("replaces every older tool result by a placeholder naming its size and tool", () => {
    const pruned = Option.getOrThrow(Prune.prune(transcript))
    expect(contents(pruned)).toEqual([
      [Prune.placeholder("logs", 4500)],
      [Prune.placeholder("metrics", 4500), "pong"],
      [big]
    ])
    expect(Prune.placeholder("logs", 4500)).toBe(
      "[pruned to fit the context window: 4500 bytes of an earlier result of tool logs; " +
        "call it again if you still need it]"
    )
  })

  it("keeps the latest tool results whole", () => {
    const pruned = Option.getOrThrow(Prune.prune(transcript))
    expect(pruned[7]).toBe(transcript[7])
  })

  it("keeps call ids, names, status and error flags so pairing holds", () => {
    const pruned = Option.getOrThrow(Prune.prune(transcript))
    const strip = (entries: ReadonlyArray<TurnEntry>) =>
      entries.map((e) => (e.kind === "tool_results" ? e.results.map(({ content: _, ...meta }) => meta) : e.kind))
    expect(strip(pruned)).toEqual(strip(transcript))
    expect(pruned.filter((e) => e.kind !== "tool_results")).toEqual(transcript.filter((e) => e.kind !== "tool_results"))
  })

  it("finds nothing more to prune the second time", () => {
    const once = Option.getOrThrow(Prune.prune(transcript))
    expect(Prune.prune(once)).toEqual(Option.none())
  })

  it("finds nothing to prune when the only tool results are the latest", () => {
    expect(Prune.prune(transcript.slice(0, 3))).toEqual(Option.none())
    expect(Prune.prune([{ kind: "user", text: "hi" }])).toEqual(Option.none())
  })

  it("leaves results already shorter than the placeholder alone", () => {
    const small: ReadonlyArray<TurnEntry> = [
      { kind: "tool_results", results: [result("a", "ping", "pong")] },
      { kind: "tool_results", results: [result("b", "ping", "pong")] }
    ]
    expect(Prune.prune(small)).toEqual(Option.none())
  })

  it("does not modify the transcript it was given", () => {
    const before = JSON.stringify(transcript)
    Prune.prune(transcript)
    expect(JSON.stringify(transcript)).toBe(before)
  })
})
