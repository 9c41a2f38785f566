/**
 * Property: whatever the transcript — turns made by this Claude with or without thinking, by another Claude (whose
 * signatures cannot verify here), by an OpenAI model with reasoning text; cycles open or closed; truncated turns,
 * notices, a sample's small cap, the finalize call — and whatever valid thinking configuration, the request the
 * Anthropic adapter builds keeps every rule the strict fake enforces (`ProviderRules.checkAnthropic`).
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import type { ReasoningPart, TurnEntry } from "../../src/domain/Message.js"
import * as Anthropic from "../../src/model/Anthropic.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as Rules from "../support/ProviderRules.js"

const issued: Rules.Issued = { secret: "this-claude", redacted: new Set() }
const elsewhere = "another-claude"

interface Step {
  readonly maker: "claude" | "other" | "openai"
  readonly thought: boolean
  readonly redacted: boolean
  readonly calls: number
  readonly after: "results" | "results+notice" | "user" | "notice" | "none"
  readonly truncated: boolean
}

const step: fc.Arbitrary<Step> = fc.record({
  maker: fc.constantFrom("claude", "other", "openai"),
  thought: fc.boolean(),
  redacted: fc.boolean(),
  calls: fc.integer({ min: 0, max: 2 }),
  after: fc.constantFrom("results", "results+notice", "user", "notice", "none"),
  truncated: fc.boolean()
})

let counter = 0
const reasoningOf = (s: Step): Array<ReasoningPart> => {
  const text = `thought ${++counter}`
  if (s.maker === "openai") {
    return s.thought
      ? [{ type: "reasoning_text", provider: "openai", text, field: "reasoning" }]
      : []
  }
  const provider = s.maker === "claude" ? "claude" : "other-claude"
  const secret = s.maker === "claude" ? issued.secret : elsewhere
  const parts: Array<ReasoningPart> = []
  if (s.thought) parts.push({ type: "thinking", provider, thinking: text, signature: Rules.sign(secret, text) })
  if (s.thought && s.redacted) {
    const data = `data-${counter}-${provider}`
    if (s.maker === "claude") issued.redacted.add(data)
    parts.push({ type: "redacted_thinking", provider, data })
  }
  return parts
}

/** A transcript as the loop builds it: every tool-calling turn is followed by its results (the pairing invariant). */
const transcript = (steps: ReadonlyArray<Step>): Array<TurnEntry> => {
  const out: Array<TurnEntry> = [{ kind: "user", text: "Why is checkout failing?" }]
  for (const [i, s] of steps.entries()) {
    const calls = s.truncated ? 0 : s.calls
    const toolCalls = Array.from({ length: calls }, (_, j) => ({ id: `call_${i}_${j}`, name: "logs", arguments: "{}" }))
    const reasoning = reasoningOf(s)
    out.push({
      kind: "assistant",
      text: s.truncated ? "cut sh" : calls > 0 && i % 2 === 0 ? "" : `Turn ${i}.`,
      toolCalls,
      finishReason: s.truncated ? "length" : calls > 0 ? "tool_calls" : "stop",
      ...(reasoning.length > 0 ? { reasoning } : {})
    })
    if (calls > 0) {
      out.push({
        kind: "tool_results",
        results: toolCalls.map((c) => ({ callId: c.id, name: c.name, content: "ok", isError: false, status: "ok" }))
      })
    }
    if (s.after === "results+notice" || s.after === "notice" || s.truncated) {
      out.push({ kind: "notice", rail: "ReplyPolicy", text: "continue" })
    }
    // The loop asks the model again only after results or a notice; a person's message ends a burst's tail.
    if (s.after === "user" || (calls === 0 && !s.truncated && s.after !== "notice")) {
      out.push({ kind: "user", text: `Next question ${i}.` })
    }
  }
  return out
}

const thinkingConfig: fc.Arbitrary<{ thinking: Anthropic.Thinking | undefined; maxOutputTokens: number | undefined }> =
  fc.record({
    thinking: fc.oneof(
      fc.constant(undefined),
      fc.record({ type: fc.constant("enabled" as const), budgetTokens: fc.integer({ min: 1024, max: 20_000 }) }),
      fc.record({
        type: fc.constant("adaptive" as const),
        effort: fc.constantFrom(undefined, "low" as const, "high" as const, "max" as const)
      })
    ),
    maxOutputTokens: fc.constantFrom(undefined, 4096, 16_000, 32_000)
  }).filter(({ maxOutputTokens, thinking }) => Anthropic.thinkingIssue(thinking, maxOutputTokens) === undefined)

describe("Anthropic requests keep the provider's rules", () => {
  it.prop(
    "for any transcript, thinking configuration, cap and call kind, the strict fake accepts the request",
    {
      steps: fc.array(step, { maxLength: 8 }),
      config: thinkingConfig,
      cap: fc.constantFrom(undefined, 256, 2048, 8000),
      finalize: fc.boolean(),
      promptCache: fc.boolean()
    },
    ({ cap, config, finalize, promptCache, steps }) => {
      const messages = transcript(steps)
      const request: ModelRequest = {
        system: "You investigate.",
        messages: finalize ? [...messages, { kind: "user", text: "Report now." }] : messages,
        tools: finalize ? [] : [{ name: "logs", description: "Fetches logs.", parameters: { type: "object" } }],
        ...(finalize ? { responseSchema: { type: "object", properties: {} } } : {}),
        ...(cap !== undefined ? { maxTokens: cap } : {})
      }
      const body = Anthropic.body(
        { name: "claude", model: "claude-test", promptCache, ...config },
        request,
        false
      )
      expect(Rules.checkAnthropic(body, issued)).toBeUndefined()
      // Only this provider's parts ever travel.
      expect(JSON.stringify(body)).not.toContain("other-claude")
      expect(JSON.stringify(body)).not.toContain("\"reasoning\"")
    },
    { fastCheck: { numRuns: 500 } }
  )
})
