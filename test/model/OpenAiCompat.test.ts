import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, Redacted, Ref } from "effect"
import { readFileSync } from "node:fs"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as ProviderChain from "../../src/model/ProviderChain.js"
import * as Limits from "../../src/rails/Limits.js"
import * as Fake from "../support/FakeProvider.js"
import * as Cases from "../support/ProviderCases.js"

const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8"))

const makeFor = (fake: Fake.FakeProvider, options: Partial<OpenAiCompat.Options> = {}) =>
  OpenAiCompat.make({
    name: "oai",
    model: "gpt-test",
    baseUrl: fake.openAiBaseUrl,
    apiKey: Redacted.make("sk-test-key"),
    ...Cases.edge,
    ...options
  })

const serve = (script: ReadonlyArray<Fake.Behaviour>, options: Partial<OpenAiCompat.Options> = {}) =>
  Effect.gen(function*() {
    const fake = yield* Fake.make({ script })
    const provider = yield* makeFor(fake, options)
    return { fake, provider }
  })

const ask: ModelRequest = Cases.request

/** Writes `text` as one chunk every `size` characters: SSE events and UTF-8 characters split anywhere. */
const chopped = (text: string, size: number): Array<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out
}

const sseBody = (chunks: ReadonlyArray<unknown>): string =>
  chunks.map((chunk) => `data: ${typeof chunk === "string" ? chunk : JSON.stringify(chunk)}\n\n`).join("")

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("OpenAiCompat", (it) => {
  describe("classifies every failure at the boundary", () => {
    for (const stream of [false, true]) {
      const mode = stream ? "streamed" : "unstreamed"
      for (const row of [...Cases.statusRows, ...Cases.transportRows(stream)]) {
        it.scoped(`${mode}: ${row.name}`, () => Cases.checkRow("openai", row, stream, (fake) => makeFor(fake)))
      }
    }
  })

  describe("request mapping", () => {
    it.scoped("a sample's maxTokens and stopSequences (MCP sampling) go on the wire", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([Fake.text("ok")])
        yield* provider.complete(Cases.sampleRequest)
        expect(fake.requests[0]?.body).toMatchObject(Cases.sampleOnWire.openai)
      }))

    it.scoped("maps system, user context, tool calls, one tool message per result, notices and tools", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([Fake.text("ok")])
        yield* provider.complete({
          system: "You investigate.",
          messages: [
            { kind: "user", text: "Why is checkout failing?", context: "runbook: restart the db" },
            {
              kind: "assistant",
              text: "",
              finishReason: "tool_calls",
              toolCalls: [
                { id: "call_a", name: "logs", arguments: "{\"q\":\"api\"}" },
                { id: "call_b", name: "status", arguments: "{\"q\":\"db\"}" }
              ]
            },
            {
              kind: "tool_results",
              results: [
                { callId: "call_a", name: "logs", content: "500s since 10:02", isError: false, status: "ok" },
                { callId: "call_b", name: "status", content: "unknown tool", isError: true, status: "error" }
              ]
            },
            { kind: "notice", rail: "RepeatGuard", text: "you repeated yourself" },
            { kind: "assistant", text: "", finishReason: "stop", toolCalls: [] }
          ],
          tools: [{ name: "logs", description: "Fetches logs.", parameters: { type: "object" } }]
        })
        const sent = fake.requests[0]
        expect(sent?.path).toBe("/v1/chat/completions")
        expect(sent?.headers.authorization).toBe("Bearer sk-test-key")
        expect(sent?.body.model).toBe("gpt-test")
        expect(sent?.body.stream).toBeUndefined()
        expect(sent?.body.messages).toEqual([
          { role: "system", content: "You investigate." },
          { role: "user", content: "<context>\nrunbook: restart the db\n</context>\n\nWhy is checkout failing?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: "call_a", type: "function", function: { name: "logs", arguments: "{\"q\":\"api\"}" } },
              { id: "call_b", type: "function", function: { name: "status", arguments: "{\"q\":\"db\"}" } }
            ]
          },
          { role: "tool", tool_call_id: "call_a", content: "500s since 10:02" },
          { role: "tool", tool_call_id: "call_b", content: "unknown tool" },
          { role: "user", content: "[RepeatGuard] you repeated yourself" }
        ])
        expect(sent?.body.tools).toEqual([
          { type: "function", function: { name: "logs", description: "Fetches logs.", parameters: { type: "object" } } }
        ])
      }))

    it.scoped("asks for JSON with response_format json_schema (or json_object when configured)", () =>
      Effect.gen(function*() {
        const schema = { type: "object", properties: { summary: { type: "string" } } }
        const { fake, provider } = yield* serve([Fake.text("{}"), Fake.text("{}")])
        yield* provider.complete({ ...ask, responseSchema: schema })
        expect(fake.requests[0]?.body.response_format).toEqual({
          type: "json_schema",
          json_schema: { name: "report", schema, strict: false }
        })
        expect(fake.requests[0]?.body.tools).toBeUndefined()
        const objectOnly = yield* makeFor(fake, { responseFormat: "json_object", extraBody: { temperature: 0 } })
        yield* objectOnly.complete({ ...ask, responseSchema: schema })
        expect(fake.requests[1]?.body.response_format).toEqual({ type: "json_object" })
        expect(fake.requests[1]?.body.temperature).toBe(0)
      }))

    it.scoped("sends no Authorization header without a key (local servers)", () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({ script: [Fake.text("ok")] })
        const provider = yield* OpenAiCompat.make({
          name: "ollama",
          model: "llama3.1",
          baseUrl: `${fake.openAiBaseUrl}/`
        })
        const reply = yield* provider.complete(ask)
        expect(reply.text).toBe("ok")
        expect(fake.requests[0]?.headers.authorization).toBeUndefined()
        expect(fake.requests[0]?.path).toBe("/v1/chat/completions")
      }))
  })

  describe("decodes the public wire format", () => {
    it.scoped("a completion with two tool calls, usage with cached tokens", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([Fake.raw(JSON.stringify(fixture("openai-chat-tool-calls.json")))])
        const reply = yield* provider.complete(ask)
        expect(reply).toMatchObject({
          text: "",
          finishReason: "tool_calls",
          model: "gpt-4o-2024-08-06",
          toolCalls: [
            { id: "call_12345xyz", name: "get_weather", arguments: "{\"location\":\"Paris, France\"}" },
            { id: "call_67890abc", name: "get_weather", arguments: "{\"location\":\"Bogotá, Colombia\"}" }
          ]
        })
        expect(reply.usage).toMatchObject({
          inputTokens: 1117,
          outputTokens: 46,
          cacheReadTokens: 1024,
          cacheWriteTokens: 0
        })
        expect(reply.raw).toEqual(fixture("openai-chat-tool-calls.json"))
      }))

    it.scoped("a refusal → finish reason refused, the refusal as text", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([Fake.raw(JSON.stringify(fixture("openai-chat-refusal.json")))])
        const reply = yield* provider.complete(ask)
        expect(reply).toMatchObject({
          text: "I'm sorry, I cannot assist with that request.",
          finishReason: "refused",
          toolCalls: []
        })
      }))

    it.scoped("finish reasons: content_filter → filtered, length → length, tool calls under stop → tool_calls", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([
          Fake.reply({ text: "", finish: "content_filter" }),
          Fake.reply({ text: "cut", finish: "length" }),
          Fake.reply({ toolCalls: [{ name: "logs", arguments: { q: "x" } }], finish: "stop" })
        ])
        expect((yield* provider.complete(ask)).finishReason).toBe("filtered")
        expect((yield* provider.complete(ask)).finishReason).toBe("length")
        expect((yield* provider.complete(ask)).finishReason).toBe("tool_calls")
      }))

    it.scoped("tolerates what compatible servers omit: usage, ids, refusal, model, a null finish reason", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([
          Fake.raw(JSON.stringify({ choices: [{ message: { content: "hi" }, finish_reason: null }] })),
          Fake.raw(JSON.stringify({
            choices: [{
              message: {
                content: [{ type: "text", text: "parts " }, { type: "text", text: "joined" }],
                tool_calls: [{ function: { name: "logs", arguments: { q: "api" } } }]
              }
            }]
          }))
        ])
        const plain = yield* provider.complete(ask)
        expect(plain).toMatchObject({ text: "hi", finishReason: "stop", model: "gpt-test", toolCalls: [] })
        expect(plain.usage.total).toBe(0)
        const odd = yield* provider.complete(ask)
        expect(odd.text).toBe("parts joined")
        expect(odd.finishReason).toBe("tool_calls")
        expect(odd.toolCalls[0]?.arguments).toBe("{\"q\":\"api\"}")
        expect(odd.toolCalls[0]?.id).toMatch(/^call_\d+$/)
      }))

    it.scoped("an error object inside a 200 reply is classified", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([
          Fake.raw(JSON.stringify({ error: { message: "Rate limit exceeded: free-models-per-min", code: 429 } }))
        ])
        const error = yield* Effect.flip(provider.complete(ask))
        expect(error).toMatchObject({ kind: "rate_limit", status: 200 })
      }))

    it.scoped("a streamed completion split at arbitrary byte boundaries", () =>
      Effect.gen(function*() {
        const body = sseBody(fixture("openai-chat-stream.json") as ReadonlyArray<unknown>)
        const { provider } = yield* serve([
          Fake.raw(chopped(body, 7), { headers: { "content-type": "text/event-stream" } })
        ])
        const deltas: Array<string> = []
        const reply = yield* provider.complete({ ...ask, onDelta: (text) => deltas.push(text) })
        expect(deltas).toEqual(["Checking the ", "weather in Paris."])
        expect(reply).toMatchObject({
          text: "Checking the weather in Paris.",
          finishReason: "tool_calls",
          model: "gpt-4o-mini",
          toolCalls: [
            { id: "call_DdmO9pD3xa9XTPNJ32zg2hcA", name: "get_weather", arguments: "{\"location\": \"Paris\"}" },
            { id: "call_8ZdOb8bGm3Lh2Ryf2qZ1sT5k", name: "get_time", arguments: "{\"tz\": \"Europe/Paris\"}" }
          ]
        })
        expect(reply.usage).toMatchObject({ inputTokens: 180, outputTokens: 42, cacheReadTokens: 128 })
      }))
  })

  describe("streaming", () => {
    it.scoped("asks for a stream with usage and hands each delta to onDelta before the reply completes", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([
          Fake.reply({ text: "The database is down.", toolCalls: [{ name: "logs", arguments: { q: "db" } }] }, {
            holdAfter: 2
          })
        ])
        const first = yield* Deferred.make<string>()
        const deltas: Array<string> = []
        const fiber = yield* Effect.fork(provider.complete({
          ...ask,
          onDelta: (text) => {
            deltas.push(text)
            Deferred.unsafeDone(first, Effect.succeed(text))
          }
        }))
        expect(yield* Deferred.await(first)).toBe("The dat")
        // The server holds the rest of the stream: the reply cannot be complete yet.
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        fake.release()
        const reply = yield* Fiber.join(fiber)
        expect(deltas.join("")).toBe("The database is down.")
        expect(reply).toMatchObject({
          text: "The database is down.",
          finishReason: "tool_calls",
          toolCalls: [{ name: "logs", arguments: "{\"q\":\"db\"}" }]
        })
        expect(reply.usage).toMatchObject({ inputTokens: 12, outputTokens: 7 })
        expect(fake.requests[0]?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } })
        expect(fake.requests[0]?.headers.accept).toBe("text/event-stream")
      }))

    it.scoped("a streamed refusal → finish reason refused; a gateway that ignores stream: true is taken whole", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([
          Fake.reply({ refusal: "I can't help with that." }),
          Fake.raw(JSON.stringify(fixture("openai-chat-tool-calls.json")))
        ])
        const deltas: Array<string> = []
        const refused = yield* provider.complete({ ...ask, onDelta: (text) => deltas.push(text) })
        expect(refused).toMatchObject({ text: "I can't help with that.", finishReason: "refused" })
        expect(deltas).toEqual([])
        const whole = yield* provider.complete({ ...ask, onDelta: (text) => deltas.push(text) })
        expect(whole.toolCalls).toHaveLength(2)
        expect(whole.usage.cacheReadTokens).toBe(1024)
      }))

    it.scoped("a stream broken mid-way: deltas already published, classified, retried by the chain; the final reply is the retry's", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([
          Fake.breakStream({ text: "Half of a reply that never ends" }, 2),
          Fake.text("A whole reply.")
        ])
        const deltas: Array<string> = []
        const attempts: Array<ProviderChain.AttemptRecord> = []
        const state = yield* Ref.make(ProviderChain.initialState)
        const result = yield* ProviderChain.callModel({
          providers: [provider],
          state,
          request: { ...ask, onDelta: (text) => deltas.push(text) },
          onAttempt: (record) => Effect.sync(() => attempts.push(record))
        }).pipe(Effect.provideService(Limits.Limits, { ...Limits.defaults, retryAfterCapMs: 20 }))
        expect(deltas[0]).toBe("Half of a r")
        expect(attempts.map((a) => a.error?.kind ?? "ok")).toEqual(["timeout", "ok"])
        expect(result.reply.text).toBe("A whole reply.")
        expect(fake.requests).toHaveLength(2)
      }))
  })
})
