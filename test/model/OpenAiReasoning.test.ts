import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { readFileSync } from "node:fs"
import type { ReasoningPart, TurnEntry } from "../../src/domain/Message.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as Fake from "../support/FakeProvider.js"
import * as Cases from "../support/ProviderCases.js"

// Fixtures transcribed from the Chat Completions reference (a reasoning model's completion with
// `completion_tokens_details.reasoning_tokens` and cached prompt tokens) and DeepSeek's reasoning model guide
// (`reasoning_content` beside the content).
const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8"))

const options = (fields: Partial<OpenAiCompat.Options> = {}): OpenAiCompat.Options => ({
  name: "oai",
  model: "gpt-5",
  baseUrl: "http://127.0.0.1:1/v1",
  ...fields
})

const toolTurn = (reasoning?: ReadonlyArray<ReasoningPart>): TurnEntry => ({
  kind: "assistant",
  text: "",
  finishReason: "tool_calls",
  toolCalls: [{ id: "call_1", name: "logs", arguments: "{}" }],
  ...(reasoning !== undefined ? { reasoning } : {})
})
const results: TurnEntry = {
  kind: "tool_results",
  results: [{ callId: "call_1", name: "logs", content: "ok", isError: false, status: "ok" }]
}
const request = (messages: ReadonlyArray<TurnEntry> = [], fields: Partial<ModelRequest> = {}): ModelRequest => ({
  system: "",
  messages: [{ kind: "user", text: "Why?" }, ...messages],
  tools: [],
  ...fields
})

describe("OpenAI Chat Completions reasoning: request mapping", () => {
  it("tokenParameterFor: max_completion_tokens for gpt-5* and o<digit>*, behind a vendor prefix too; overridable", () => {
    const pick = (model: string) => OpenAiCompat.tokenParameterFor(model)
    expect(["gpt-5", "gpt-5-mini", "GPT-5.1", "o1", "o3-mini", "o4-mini", "openai/gpt-5", "openai/o3"].map(pick))
      .toEqual(Array(8).fill("max_completion_tokens"))
    expect(["gpt-4o", "gpt-4.1", "llama3.1", "deepseek-reasoner", "omni-moderation", "ollama"].map(pick))
      .toEqual(Array(6).fill("max_tokens"))
    expect(OpenAiCompat.tokenParameterFor("gpt-5", "max_tokens")).toBe("max_tokens")
    expect(OpenAiCompat.tokenParameterFor("llama", "max_completion_tokens")).toBe("max_completion_tokens")
  })

  it("maxOutputTokens caps every call (a sample's smaller cap wins), under the model's parameter", () => {
    expect(OpenAiCompat.body(options({ maxOutputTokens: 4000 }), request(), false)).toMatchObject({
      max_completion_tokens: 4000
    })
    const sample = OpenAiCompat.body(options({ maxOutputTokens: 4000 }), request([], { maxTokens: 64 }), false)
    expect(sample).toMatchObject({ max_completion_tokens: 64 })
    expect(sample.max_tokens).toBeUndefined()
    const local = OpenAiCompat.body(options({ model: "llama3", maxOutputTokens: 100 }), request(), false)
    expect(local).toMatchObject({ max_tokens: 100 })
    const none = OpenAiCompat.body(options(), request(), false)
    expect([none.max_tokens, none.max_completion_tokens]).toEqual([undefined, undefined])
  })

  it("reasoning effort and prompt_cache_key (default: on api.openai.com only)", () => {
    const keyed = request([], { cacheKey: "ses_1" })
    expect(OpenAiCompat.body(options({ reasoning: { effort: "low" } }), keyed, false)).toMatchObject({
      reasoning_effort: "low"
    })
    expect(OpenAiCompat.body(options(), keyed, false).prompt_cache_key).toBeUndefined()
    expect(OpenAiCompat.body(options({ baseUrl: "https://api.openai.com/v1" }), keyed, false).prompt_cache_key).toBe(
      "ses_1"
    )
    expect(OpenAiCompat.body(options({ promptCacheKey: true }), keyed, false).prompt_cache_key).toBe("ses_1")
    expect(
      OpenAiCompat.body(options({ baseUrl: "https://api.openai.com/v1", promptCacheKey: false }), keyed, false)
        .prompt_cache_key
    ).toBeUndefined()
  })

  it("replayReasoning: own reasoning text goes back in the field it came in; never another provider's; off: none", () => {
    const parts: ReadonlyArray<ReasoningPart> = [
      { type: "reasoning_text", provider: "oai", text: "think ", field: "reasoning_content" },
      { type: "reasoning_text", provider: "oai", text: "more", field: "reasoning_content" },
      { type: "reasoning_text", provider: "other", text: "foreign", field: "reasoning" },
      { type: "thinking", provider: "claude", thinking: "x", signature: "y" }
    ]
    const on = OpenAiCompat.body(options({ replayReasoning: true }), request([toolTurn(parts), results]), false)
    const assistant = (on.messages as ReadonlyArray<Record<string, unknown>>).find((m) => m.role === "assistant")
    expect(assistant).toMatchObject({ reasoning_content: "think more" })
    expect(assistant?.reasoning).toBeUndefined()
    expect(JSON.stringify(on)).not.toContain("foreign")
    const off = OpenAiCompat.body(options(), request([toolTurn(parts), results]), false)
    expect(JSON.stringify(off)).not.toContain("reasoning")
  })
})

const makeFor = (fake: Fake.FakeProvider, fields: Partial<OpenAiCompat.Options> = {}) =>
  OpenAiCompat.make({
    ...options(fields),
    baseUrl: fake.openAiBaseUrl,
    apiKey: Redacted.make("sk-test"),
    ...Cases.edge,
    ...fields
  })

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("OpenAI reasoning over HTTP", (it) => {
  it.scoped("usage: reasoning_tokens apart (within the output), cached_tokens as cache reads", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({
        script: [Fake.raw(JSON.stringify(fixture("openai-chat-reasoning-tokens.json")))]
      })
      const reply = yield* (yield* makeFor(fake)).complete(Cases.request)
      expect(reply.usage).toMatchObject({
        inputTokens: 1117,
        outputTokens: 238,
        reasoningTokens: 192,
        cacheReadTokens: 1024
      })
      expect(reply.usage.total).toBe(1117 + 238)
      expect(reply.toolCalls).toEqual([{
        id: "call_DdmO9pD3xa9XTPNJ32zg2hcA",
        name: "get_weather",
        arguments: "{\"location\":\"Paris, France\"}"
      }])
      expect(reply.reasoning).toBeUndefined()
    }))

  it.scoped("a compatible server's reasoning_content becomes a reasoning_text part", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({
        script: [Fake.raw(JSON.stringify(fixture("openai-compat-reasoning-content.json")))]
      })
      const reply = yield* (yield* makeFor(fake, { model: "deepseek-reasoner" })).complete(Cases.request)
      expect(reply.text).toBe("9.11 is smaller than 9.8.")
      expect(reply.reasoning).toEqual([{
        type: "reasoning_text",
        provider: "oai",
        text: expect.stringMatching(/^Okay, so I need to figure out/),
        field: "reasoning_content"
      }])
      expect(reply.usage).toMatchObject({ outputTokens: 281, reasoningTokens: 244 })
    }))

  it.scoped("a reasoning field that is not text (an object) is ignored, not a decoding failure", () =>
    Effect.gen(function*() {
      const completion = {
        choices: [{ message: { content: "ok", reasoning: { effort: "low", summary: null } }, finish_reason: "stop" }]
      }
      const chunk = { choices: [{ delta: { content: "ok", reasoning: { text: "x" } }, finish_reason: "stop" }] }
      const fake = yield* Fake.make({
        script: [
          Fake.raw(JSON.stringify(completion)),
          Fake.raw([`data: ${JSON.stringify(chunk)}\n\n`, "data: [DONE]\n\n"], {
            headers: { "content-type": "text/event-stream" }
          })
        ]
      })
      const provider = yield* makeFor(fake)
      const whole = yield* provider.complete(Cases.request)
      const streamed = yield* provider.complete({ ...Cases.request, onDelta: () => undefined })
      expect([whole.text, whole.reasoning, streamed.text, streamed.reasoning]).toEqual([
        "ok",
        undefined,
        "ok",
        undefined
      ])
    }))

  it.scoped("streamed reasoning deltas (either field) are joined; only content reaches onDelta", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({
        script: [
          Fake.reply({ text: "Answer.", reasoningText: "Step one. Step two.", usage: { reasoning: 5 } }),
          Fake.reply({ text: "Answer.", reasoningText: "Via reasoning.", reasoningField: "reasoning" })
        ]
      })
      const provider = yield* makeFor(fake, { model: "qwen3" })
      const deltas: Array<string> = []
      const first = yield* provider.complete({ ...Cases.request, onDelta: (t) => deltas.push(t) })
      expect(deltas.join("")).toBe("Answer.")
      expect(first.reasoning).toEqual([
        { type: "reasoning_text", provider: "oai", text: "Step one. Step two.", field: "reasoning_content" }
      ])
      expect(first.usage.reasoningTokens).toBe(5)
      const second = yield* provider.complete({ ...Cases.request, onDelta: () => undefined })
      expect(second.reasoning).toEqual([
        { type: "reasoning_text", provider: "oai", text: "Via reasoning.", field: "reasoning" }
      ])
    }))

  it.scoped("a server that refuses reasoning_content back is never sent it with replayReasoning off", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({
        refuseReasoningContent: true,
        script: [
          Fake.reply({ reasoningText: "hm", toolCalls: [{ id: "call_1", name: "logs", arguments: {} }] }),
          Fake.text("done")
        ]
      })
      const provider = yield* makeFor(fake, { model: "deepseek-reasoner" })
      const first = yield* provider.complete(Cases.request)
      const turn: TurnEntry = {
        kind: "assistant",
        text: first.text,
        toolCalls: first.toolCalls,
        finishReason: first.finishReason,
        ...(first.reasoning !== undefined ? { reasoning: first.reasoning } : {})
      }
      expect(turn.kind === "assistant" && turn.reasoning?.length).toBe(1)
      const second = yield* provider.complete(request([turn, results]))
      expect(second.text).toBe("done")
      expect(fake.refusals).toEqual([])
    }))

  it.scoped("prompt_cache_key: not sent to another host by default, sent when asked", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({ script: [Fake.text("a"), Fake.text("b")] })
      const keyed = { ...Cases.request, cacheKey: "ses_42" }
      yield* (yield* makeFor(fake)).complete(keyed)
      yield* (yield* makeFor(fake, { promptCacheKey: true })).complete(keyed)
      expect(fake.requests.map((r) => r.body.prompt_cache_key)).toEqual([undefined, "ses_42"])
    }))

  it.scoped("a gpt-5 provider with a cap and an effort is accepted by the strict fake", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make({ script: [Fake.text("ok")] })
      const provider = yield* makeFor(fake, { maxOutputTokens: 2000, reasoning: { effort: "minimal" } })
      expect((yield* provider.complete(Cases.sampleRequest)).text).toBe("ok")
      expect(fake.requests[0]?.body).toMatchObject({ max_completion_tokens: 64, reasoning_effort: "minimal" })
      expect(fake.refusals).toEqual([])
    }))
})
