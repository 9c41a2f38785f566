import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, Redacted } from "effect"
import { readFileSync } from "node:fs"
import * as Anthropic from "../../src/model/Anthropic.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as Fake from "../support/FakeProvider.js"
import * as Cases from "../support/ProviderCases.js"

const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8"))

const makeFor = (fake: Fake.FakeProvider, options: Partial<Anthropic.Options> = {}) =>
  Anthropic.make({
    name: "claude",
    model: "claude-test",
    baseUrl: fake.anthropicBaseUrl,
    apiKey: Redacted.make("sk-ant-test"),
    ...Cases.edge,
    ...options
  })

const serve = (script: ReadonlyArray<Fake.Behaviour>, options: Partial<Anthropic.Options> = {}) =>
  Effect.gen(function*() {
    const fake = yield* Fake.make({ script })
    const provider = yield* makeFor(fake, options)
    return { fake, provider }
  })

const ask: ModelRequest = Cases.request

/** Anthropic's event stream for `events` ({ event, data } objects), split every `size` characters. */
const eventStream = (events: ReadonlyArray<{ readonly event: string; readonly data: unknown }>, size: number) => {
  const text = events.map((e) => `event: ${e.event}\r\ndata: ${JSON.stringify(e.data)}\r\n\r\n`).join("")
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return Fake.raw(out, { headers: { "content-type": "text/event-stream" } })
}

type Events = ReadonlyArray<{ readonly event: string; readonly data: unknown }>

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("Anthropic", (it) => {
  describe("classifies every failure at the boundary", () => {
    for (const stream of [false, true]) {
      const mode = stream ? "streamed" : "unstreamed"
      for (const row of [...Cases.statusRows, ...Cases.transportRows(stream)]) {
        it.scoped(`${mode}: ${row.name}`, () => Cases.checkRow("anthropic", row, stream, (fake) => makeFor(fake)))
      }
    }
  })

  describe("request mapping", () => {
    it.scoped("a sample's maxTokens and stopSequences (MCP sampling) go on the wire", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([Fake.text("ok")])
        yield* provider.complete(Cases.sampleRequest)
        expect(fake.requests[0]?.body).toMatchObject(Cases.sampleOnWire.anthropic)
      }))

    it.scoped("system on top, tool results in ONE user message with is_error, same-role messages merged", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([Fake.text("ok")], { promptCache: false })
        yield* provider.complete({
          system: "You investigate.",
          messages: [
            { kind: "user", text: "Why is checkout failing?", context: "runbook: restart the db" },
            { kind: "notice", rail: "Prompt", text: "be brief" },
            {
              kind: "assistant",
              text: "Looking.",
              finishReason: "tool_calls",
              toolCalls: [
                { id: "toolu_a", name: "logs", arguments: "{\"q\":\"api\"}" },
                { id: "toolu_b", name: "status", arguments: "{\"q\": " }
              ]
            },
            {
              kind: "tool_results",
              results: [
                { callId: "toolu_a", name: "logs", content: "500s since 10:02", isError: false, status: "ok" },
                { callId: "toolu_b", name: "status", content: "not valid JSON", isError: true, status: "error" }
              ]
            },
            { kind: "notice", rail: "RepeatGuard", text: "you repeated yourself" },
            { kind: "assistant", text: "", finishReason: "stop", toolCalls: [] },
            { kind: "notice", rail: "ReplyPolicy", text: "continue" }
          ],
          tools: [{ name: "logs", description: "Fetches logs.", parameters: { type: "object" } }]
        })
        const sent = fake.requests[0]
        expect(sent?.path).toBe("/v1/messages")
        expect(sent?.headers["x-api-key"]).toBe("sk-ant-test")
        expect(sent?.headers["anthropic-version"]).toBe("2023-06-01")
        expect(sent?.body).toMatchObject({ model: "claude-test", max_tokens: 8192, system: "You investigate." })
        expect(sent?.body.messages).toEqual([
          {
            role: "user",
            content: [
              { type: "text", text: "<context>\nrunbook: restart the db\n</context>\n\nWhy is checkout failing?" },
              { type: "text", text: "[Prompt] be brief" }
            ]
          },
          {
            role: "assistant",
            content: [
              { type: "text", text: "Looking." },
              { type: "tool_use", id: "toolu_a", name: "logs", input: { q: "api" } },
              { type: "tool_use", id: "toolu_b", name: "status", input: { invalid_json: "{\"q\": " } }
            ]
          },
          {
            role: "user",
            content: [
              { type: "tool_result", tool_use_id: "toolu_a", content: "500s since 10:02" },
              { type: "tool_result", tool_use_id: "toolu_b", content: "not valid JSON", is_error: true },
              { type: "text", text: "[RepeatGuard] you repeated yourself" },
              { type: "text", text: "[ReplyPolicy] continue" }
            ]
          }
        ])
        expect(sent?.body.tools).toEqual([
          { name: "logs", description: "Fetches logs.", input_schema: { type: "object" } }
        ])
      }))

    it.scoped("a structured (finalize) call forces the report tool and returns its input as JSON text", () =>
      Effect.gen(function*() {
        const schema = { type: "object", properties: { summary: { type: "string" } }, required: ["summary"] }
        const { fake, provider } = yield* serve([
          Fake.reply({ toolCalls: [{ name: Anthropic.reportTool, arguments: { summary: "db down" } }] }),
          Fake.reply({ toolCalls: [{ name: Anthropic.reportTool, arguments: { summary: "streamed" } }] })
        ])
        const reply = yield* provider.complete({ ...ask, responseSchema: schema })
        expect(fake.requests[0]?.body.tool_choice).toEqual({ type: "tool", name: Anthropic.reportTool })
        expect(fake.requests[0]?.body.tools).toEqual([
          { name: Anthropic.reportTool, description: "Submit the final report.", input_schema: schema }
        ])
        expect(reply).toMatchObject({ text: "{\"summary\":\"db down\"}", toolCalls: [], finishReason: "stop" })
        const streamed = yield* provider.complete({ ...ask, responseSchema: schema, onDelta: () => undefined })
        expect(JSON.parse(streamed.text)).toEqual({ summary: "streamed" })
      }))

    it.scoped("a base URL ending in /v1 is tolerated; no key, no x-api-key", () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({ script: [Fake.text("ok")] })
        const provider = yield* Anthropic.make({ name: "gw", model: "claude-test", baseUrl: `${fake.url}/v1/` })
        expect((yield* provider.complete(ask)).text).toBe("ok")
        expect(fake.requests[0]?.path).toBe("/v1/messages")
        expect(fake.requests[0]?.headers["x-api-key"]).toBeUndefined()
      }))
  })

  describe("decodes the public wire format", () => {
    it.scoped("a message with text and tool_use; usage counts cache reads and writes as input", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([Fake.raw(JSON.stringify(fixture("anthropic-message-tool-use.json")))])
        const reply = yield* provider.complete(ask)
        expect(reply).toMatchObject({
          text: "I'll check the current weather in San Francisco for you.",
          finishReason: "tool_calls",
          model: "claude-sonnet-4-5-20250929",
          toolCalls: [{
            id: "toolu_01A09q90qw90lq917835lq9",
            name: "get_weather",
            arguments: "{\"location\":\"San Francisco, CA\",\"unit\":\"celsius\"}"
          }]
        })
        expect(reply.usage).toMatchObject({
          inputTokens: 472 + 100 + 2048,
          outputTokens: 91,
          cacheReadTokens: 2048,
          cacheWriteTokens: 100
        })
      }))

    it.scoped("stop reasons: end_turn → stop, max_tokens → length, refusal → refused, stop_sequence → stop", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([
          Fake.reply({ text: "done", finish: "end_turn" }),
          Fake.reply({ text: "cut", finish: "max_tokens" }),
          Fake.reply({ text: "", finish: "refusal" }),
          Fake.reply({ text: "halt", finish: "stop_sequence" })
        ])
        const reasons = []
        for (let i = 0; i < 4; i++) reasons.push((yield* provider.complete(ask)).finishReason)
        expect(reasons).toEqual(["stop", "length", "refused", "stop"])
      }))

    it.scoped("a streamed message: text deltas in order, input_json fragments joined, usage merged", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([eventStream(fixture("anthropic-stream-events.json") as Events, 11)])
        const deltas: Array<string> = []
        const reply = yield* provider.complete({ ...ask, onDelta: (text) => deltas.push(text) })
        expect(deltas).toEqual(["Okay, let's check", " the weather for San Francisco, CA:"])
        expect(reply).toMatchObject({
          text: "Okay, let's check the weather for San Francisco, CA:",
          finishReason: "tool_calls",
          toolCalls: [{
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            name: "get_weather",
            arguments: "{\"location\": \"San Francisco, CA\", \"unit\": \"fahrenheit\"}"
          }]
        })
        expect(reply.usage).toMatchObject({ inputTokens: 1472, outputTokens: 89, cacheReadTokens: 1000 })
      }))

    it.scoped("a streamed error event: overloaded, with the usage reported so far, after the deltas", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([eventStream(fixture("anthropic-stream-error.json") as Events, 64)])
        const deltas: Array<string> = []
        const error = yield* Effect.flip(provider.complete({ ...ask, onDelta: (text) => deltas.push(text) }))
        expect(deltas).toEqual(["Let me"])
        expect(error).toMatchObject({ kind: "overloaded", provider: "claude", status: 200 })
        expect(error.usage?.inputTokens).toBe(250)
      }))

    it.scoped("an error body with a 200 status is classified by its type", () =>
      Effect.gen(function*() {
        const { provider } = yield* serve([
          Fake.raw(JSON.stringify({ type: "error", error: { type: "rate_limit_error", message: "slow down" } }))
        ])
        expect(yield* Effect.flip(provider.complete(ask))).toMatchObject({ kind: "rate_limit", status: 200 })
      }))
  })

  describe("streaming", () => {
    it.scoped("hands each text delta to onDelta before the reply completes", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([
          Fake.reply({ text: "Disk is full.", toolCalls: [{ name: "logs", arguments: { q: "disk" } }] }, {
            holdAfter: 3
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
        expect(yield* Deferred.await(first)).toBe("Disk ")
        expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
        fake.release()
        const reply = yield* Fiber.join(fiber)
        expect(deltas.join("")).toBe("Disk is full.")
        expect(reply).toMatchObject({
          text: "Disk is full.",
          finishReason: "tool_calls",
          toolCalls: [{ name: "logs", arguments: "{\"q\":\"disk\"}" }]
        })
        expect(fake.requests[0]?.body.stream).toBe(true)
      }))
  })
})
