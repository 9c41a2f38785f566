import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { readFileSync } from "node:fs"
import type { ReasoningPart, TurnEntry } from "../../src/domain/Message.js"
import * as Anthropic from "../../src/model/Anthropic.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as Fake from "../support/FakeProvider.js"
import * as Cases from "../support/ProviderCases.js"

// Fixtures transcribed from Anthropic's extended-thinking guide and streaming reference: a thinking + tool_use
// reply with its signature, a reply with a redacted_thinking block, and a streamed thinking block
// (thinking_delta, then signature_delta).
const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8"))

type Events = ReadonlyArray<{ readonly event: string; readonly data: unknown }>
const eventStream = (events: Events) =>
  Fake.raw(events.map((e) => `event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`), {
    headers: { "content-type": "text/event-stream" }
  })

const manual = { type: "enabled", budgetTokens: 2048 } as const

const options = (fields: Partial<Anthropic.Options> = {}): Anthropic.Options => ({
  name: "claude",
  model: "claude-test",
  ...fields
})

const thinking = (provider: string, text: string): ReasoningPart => ({
  type: "thinking",
  provider,
  thinking: text,
  signature: `sig-${text}`
})

const toolTurn = (id: string, reasoning?: ReadonlyArray<ReasoningPart>): TurnEntry => ({
  kind: "assistant",
  text: "Looking.",
  finishReason: "tool_calls",
  toolCalls: [{ id, name: "logs", arguments: "{\"q\":\"api\"}" }],
  ...(reasoning !== undefined ? { reasoning } : {})
})

const results = (id: string): TurnEntry => ({
  kind: "tool_results",
  results: [{ callId: id, name: "logs", content: "500s", isError: false, status: "ok" }]
})

const request = (messages: ReadonlyArray<TurnEntry>, fields: Partial<ModelRequest> = {}): ModelRequest => ({
  system: "You investigate.",
  messages: [{ kind: "user", text: "Why?" }, ...messages],
  tools: [
    { name: "logs", description: "Fetches logs.", parameters: { type: "object" } },
    { name: "status", description: "Reads status.", parameters: { type: "object" } }
  ],
  ...fields
})

type Json = Record<string, unknown>
const messagesOf = (body: Json) => body.messages as ReadonlyArray<{ role: string; content: ReadonlyArray<Json> }>

describe("Anthropic thinking: request mapping", () => {
  it("sends a turn's own thinking and redacted blocks verbatim at the start of its message, never another provider's", () => {
    const own: ReadonlyArray<ReasoningPart> = [
      thinking("claude", "first"),
      { type: "redacted_thinking", provider: "claude", data: "ENCRYPTED" },
      thinking("other", "not mine")
    ]
    const body = Anthropic.body(
      options({ thinking: manual }),
      request([toolTurn("t1", own), results("t1"), toolTurn("t2", [thinking("claude", "second")]), results("t2")]),
      false
    )
    const assistants = messagesOf(body).filter((m) => m.role === "assistant")
    expect(assistants[0]?.content.map((b) => b.type)).toEqual(["thinking", "redacted_thinking", "text", "tool_use"])
    expect(assistants[0]?.content[0]).toEqual({ type: "thinking", thinking: "first", signature: "sig-first" })
    expect(assistants[0]?.content[1]).toEqual({ type: "redacted_thinking", data: "ENCRYPTED" })
    expect(assistants[1]?.content[0]).toEqual({ type: "thinking", thinking: "second", signature: "sig-second" })
    expect(JSON.stringify(body)).not.toContain("not mine")
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
  })

  it("merged assistant turns keep every thinking block in front", () => {
    const body = Anthropic.body(
      options({ thinking: manual, promptCache: false }),
      request([
        { kind: "assistant", text: "Half an answer.", toolCalls: [], finishReason: "length" },
        toolTurn("t1", [thinking("claude", "mine")]),
        results("t1")
      ]),
      false
    )
    const assistant = messagesOf(body).find((m) => m.role === "assistant")
    expect(assistant?.content.map((b) => b.type)).toEqual(["thinking", "text", "text", "tool_use"])
  })

  it("a tool cycle opened without this provider's thinking (a failover, or thinking off then) goes without thinking", () => {
    const foreign = Anthropic.body(
      options({ thinking: manual }),
      request([
        toolTurn("t1", [{ type: "reasoning_text", provider: "oai", text: "hm", field: "reasoning" }]),
        results("t1")
      ]),
      false
    )
    expect(foreign.thinking).toBeUndefined()
    expect(JSON.stringify(foreign)).not.toContain("\"hm\"")
    const none = Anthropic.body(options({ thinking: manual }), request([toolTurn("t1"), results("t1")]), false)
    expect(none.thinking).toBeUndefined()
    // Closed cycles do not matter: a new user message starts afresh.
    const closed = Anthropic.body(
      options({ thinking: manual }),
      request([
        toolTurn("t1"),
        results("t1"),
        { kind: "assistant", text: "Done.", toolCalls: [], finishReason: "stop" },
        {
          kind: "user",
          text: "And now?"
        }
      ]),
      false
    )
    expect(closed.thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
  })

  it("adaptive thinking with an effort; no thinking field and no blocks when thinking is off", () => {
    const adaptive = Anthropic.body(options({ thinking: { type: "adaptive", effort: "high" } }), request([]), false)
    expect(adaptive).toMatchObject({ thinking: { type: "adaptive" }, output_config: { effort: "high" } })
    const plain = Anthropic.body(options({ thinking: { type: "adaptive" } }), request([]), false)
    expect(plain.output_config).toBeUndefined()
    const off = Anthropic.body(options(), request([toolTurn("t1", [thinking("claude", "x")]), results("t1")]), false)
    expect(off.thinking).toBeUndefined()
    expect(JSON.stringify(off.messages)).not.toContain("\"thinking\"")
  })

  it("the finalize call: manual thinking offers the report tool with tool_choice auto; adaptive may force it", () => {
    const schema = { type: "object", properties: { summary: { type: "string" } } }
    const finalize = request([], { tools: [], responseSchema: schema })
    expect(Anthropic.body(options({ thinking: manual }), finalize, false).tool_choice).toEqual({ type: "auto" })
    expect(Anthropic.body(options({ thinking: { type: "adaptive" } }), finalize, false).tool_choice).toEqual({
      type: "tool",
      name: Anthropic.reportTool
    })
  })

  it("max_tokens must exceed the budget: a sample capped at or below it goes without thinking", () => {
    const capped = Anthropic.body(options({ thinking: manual }), request([], { maxTokens: 512 }), false)
    expect(capped).toMatchObject({ max_tokens: 512 })
    expect(capped.thinking).toBeUndefined()
    expect(Anthropic.body(options({ thinking: manual }), request([]), false)).toMatchObject({ max_tokens: 8192 })
  })

  it("thinkingIssue: a budget of at least 1024 and below max tokens", () => {
    expect(Anthropic.thinkingIssue(undefined)).toBeUndefined()
    expect(Anthropic.thinkingIssue({ type: "adaptive" })).toBeUndefined()
    expect(Anthropic.thinkingIssue({ type: "enabled", budgetTokens: 1024 })).toBeUndefined()
    expect(Anthropic.thinkingIssue({ type: "enabled", budgetTokens: 1023 })).toMatch(/at least 1024/)
    expect(Anthropic.thinkingIssue({ type: "enabled", budgetTokens: 1500.5 })).toMatch(/integer/)
    expect(Anthropic.thinkingIssue({ type: "enabled", budgetTokens: 8192 })).toMatch(
      /less than maxOutputTokens \(8192\)/
    )
    expect(Anthropic.thinkingIssue({ type: "enabled", budgetTokens: 4096 }, 4000)).toMatch(/less than/)
  })
})

describe("Anthropic prompt caching: request mapping", () => {
  const breakpoints = (body: Json): Array<string> => {
    const out: Array<string> = []
    for (const tool of (body.tools ?? []) as ReadonlyArray<Json>) if (tool.cache_control) out.push(`tool ${tool.name}`)
    for (const block of Array.isArray(body.system) ? body.system as ReadonlyArray<Json> : []) {
      if (block.cache_control) out.push("system")
    }
    messagesOf(body).forEach((m, i) =>
      m.content.forEach((b, j) => {
        if (b.cache_control) out.push(`messages.${i}.content.${j}`)
      })
    )
    return out
  }

  it("marks the last tool, the system prompt (one text block) and the newest message's last block", () => {
    const body = Anthropic.body(options(), request([toolTurn("t1"), results("t1")]), false)
    expect(breakpoints(body)).toEqual(["tool status", "system", "messages.2.content.0"])
    expect(body.system).toEqual([{ type: "text", text: "You investigate.", cache_control: { type: "ephemeral" } }])
  })

  it("the finalize call keeps the mark on the request's last tool, not on the report tool; never more than 4", () => {
    const body = Anthropic.body(
      options({ thinking: manual }),
      request([toolTurn("t1", [thinking("claude", "x")]), results("t1")], {
        responseSchema: { type: "object", properties: {} }
      }),
      false
    )
    expect(breakpoints(body)).toEqual(["tool status", "system", "messages.2.content.0"])
  })

  it("tools and system are byte-identical across a session's calls; off sends none", () => {
    const first = Anthropic.body(options(), request([]), false)
    const later = Anthropic.body(options(), request([toolTurn("t1"), results("t1")]), true)
    expect(JSON.stringify(later.tools)).toBe(JSON.stringify(first.tools))
    expect(JSON.stringify(later.system)).toBe(JSON.stringify(first.system))
    const off = Anthropic.body(options({ promptCache: false }), request([toolTurn("t1"), results("t1")]), false)
    expect(breakpoints(off)).toEqual([])
    expect(off.system).toBe("You investigate.")
  })
})

const makeFor = (fake: Fake.FakeProvider, fields: Partial<Anthropic.Options> = {}) =>
  Anthropic.make({
    ...options(fields),
    baseUrl: fake.anthropicBaseUrl,
    apiKey: Redacted.make("sk-ant-test"),
    ...Cases.edge,
    ...fields
  })

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("Anthropic thinking over HTTP", (it) => {
  it.scoped("decodes a thinking + tool_use reply: the signed block becomes a reasoning part", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({ script: [Fake.raw(JSON.stringify(fixture("anthropic-thinking-tool-use.json")))] })
      const reply = yield* (yield* makeFor(fake)).complete(Cases.request)
      expect(reply).toMatchObject({
        text: "I can help you get the current weather information for Paris. Let me check that for you",
        finishReason: "tool_calls",
        toolCalls: [{
          id: "toolu_01CswdEQBMshySk6Y9DFKrfq",
          name: "get_weather",
          arguments: "{\"location\":\"Paris\"}"
        }]
      })
      expect(reply.reasoning).toEqual([{
        type: "thinking",
        provider: "claude",
        thinking: expect.stringMatching(/^The user wants to know the current weather in Paris/),
        signature: expect.stringMatching(/^BDaL4VrbR2Oj0hO4/)
      }])
      expect(reply.usage).toMatchObject({ inputTokens: 421, outputTokens: 156, reasoningTokens: 0 })
    }))

  it.scoped("the documented cycle: the reply's thinking, text and tool_use go back as its assistant message, verbatim", () =>
    Effect.gen(function*() {
      const wire = fixture("anthropic-thinking-tool-use.json") as { content: ReadonlyArray<Json> }
      const fake = yield* Fake.make({ script: [Fake.raw(JSON.stringify(wire))] })
      const reply = yield* (yield* makeFor(fake, { thinking: manual })).complete(Cases.request)
      const turn: TurnEntry = {
        kind: "assistant",
        text: reply.text,
        toolCalls: reply.toolCalls,
        finishReason: reply.finishReason,
        ...(reply.reasoning !== undefined ? { reasoning: reply.reasoning } : {})
      }
      const next = Anthropic.body(
        options({ thinking: manual }),
        request([turn, results(reply.toolCalls[0]!.id)]),
        false
      )
      expect(messagesOf(next)[1]).toEqual({ role: "assistant", content: wire.content })
      expect(next.thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
    }))

  it.scoped("decodes thinking and redacted_thinking in order", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({ script: [Fake.raw(JSON.stringify(fixture("anthropic-redacted-thinking.json")))] })
      const reply = yield* (yield* makeFor(fake)).complete(Cases.request)
      expect(reply.text).toBe("Based on my analysis...")
      expect(reply.reasoning?.map((p) => p.type)).toEqual(["thinking", "redacted_thinking"])
      expect(reply.reasoning?.[1]).toEqual({
        type: "redacted_thinking",
        provider: "claude",
        data: expect.stringMatching(/^EmwKAhgBEgy3va3pzix/)
      })
    }))

  it.scoped("a streamed thinking block: thinking_delta joined, signature_delta kept, only text reaches onDelta", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({
        script: [eventStream(fixture("anthropic-thinking-stream-events.json") as Events)]
      })
      const deltas: Array<string> = []
      const reply = yield* (yield* makeFor(fake)).complete({ ...Cases.request, onDelta: (t) => deltas.push(t) })
      expect(deltas).toEqual(["The greatest common divisor (GCD) of 1071 and 462 is **21**."])
      expect(reply.reasoning).toEqual([{
        type: "thinking",
        provider: "claude",
        thinking:
          "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0\n\nSo GCD(1071, 462) = 21",
        signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
      }])
    }))

  it.scoped("a thinking block without a signature (cut by max_tokens) is not kept", () =>
    Effect.gen(function*() {
      const cut = {
        type: "message",
        role: "assistant",
        model: "claude-test",
        content: [{ type: "thinking", thinking: "Let me think about thi" }],
        stop_reason: "max_tokens",
        usage: { input_tokens: 10, output_tokens: 2048 }
      }
      const fake = yield* Fake.make({ script: [Fake.raw(JSON.stringify(cut))] })
      const reply = yield* (yield* makeFor(fake)).complete(Cases.request)
      expect(reply.finishReason).toBe("length")
      expect(reply.reasoning).toBeUndefined()
    }))

  it.scoped("the fake's signed thinking and redacted blocks, streamed and not, round-trip and are accepted", () =>
    Effect.gen(function*() {
      const spec = {
        thinking: "I should read the logs.",
        redactedThinking: "secret",
        text: "Checking.",
        toolCalls: [{ id: "toolu_1", name: "logs", arguments: { q: "api" } }]
      }
      const fake = yield* Fake.make({ script: [Fake.reply(spec), Fake.reply(spec), Fake.text("done")] })
      const provider = yield* makeFor(fake, { thinking: manual })
      const first = yield* provider.complete(request([]))
      const streamed = yield* provider.complete({ ...request([]), onDelta: () => undefined })
      // The same thinking text signs the same; redacted data is unique per reply.
      expect(streamed.reasoning?.[0]).toEqual(first.reasoning?.[0])
      expect(streamed.reasoning?.[1]?.type).toBe("redacted_thinking")
      expect(first.reasoning?.map((p) => p.type)).toEqual(["thinking", "redacted_thinking"])
      const turn: TurnEntry = {
        kind: "assistant",
        text: first.text,
        toolCalls: first.toolCalls,
        finishReason: first.finishReason,
        ...(first.reasoning !== undefined ? { reasoning: first.reasoning } : {})
      }
      yield* provider.complete(request([turn, results(first.toolCalls[0]!.id)]))
      expect(fake.refusals).toEqual([])
      expect(fake.requests[2]?.body.thinking).toEqual({ type: "enabled", budget_tokens: 2048 })
    }))

  it.scoped("prompt caching: the second call with the same prefix reads what the first wrote", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({ script: [Fake.text("a"), Fake.text("b")] })
      const provider = yield* makeFor(fake)
      const first = yield* provider.complete(request([]))
      const second = yield* provider.complete(
        request([{ kind: "assistant", text: "a", toolCalls: [], finishReason: "stop" }, {
          kind: "user",
          text: "More?"
        }])
      )
      expect(first.usage.cacheReadTokens).toBe(0)
      expect(first.usage.cacheWriteTokens).toBeGreaterThan(0)
      expect(second.usage.cacheReadTokens).toBe(first.usage.cacheWriteTokens)
      expect(second.usage.inputTokens).toBeGreaterThan(second.usage.cacheReadTokens)
      expect(fake.refusals).toEqual([])
    }))
})
