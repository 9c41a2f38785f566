import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Either, Redacted } from "effect"
import * as fc from "effect/FastCheck"
import { readFileSync } from "node:fs"
import type { ErrorKind } from "../../src/domain/ErrorKind.js"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import type { ReasoningPart, TurnEntry } from "../../src/domain/Message.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as OpenAiResponses from "../../src/model/OpenAiResponses.js"
import * as Harness from "../../src/testing/Harness.js"
import * as FakeProvider from "../support/FakeProvider.js"
import * as Fake from "../support/FakeResponses.js"
import * as Cases from "../support/ProviderCases.js"
import * as Tools from "../support/tools.js"

const fixture = (name: string): unknown =>
  JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), "utf8"))

const reasoningOn = { effort: "low", summary: "auto" } as const

const makeFor = (fake: Fake.FakeResponses, options: Partial<OpenAiResponses.Options> = {}) =>
  OpenAiResponses.make({
    name: "resp",
    model: "gpt-5",
    baseUrl: fake.baseUrl,
    apiKey: Redacted.make("sk-test-key"),
    ...Cases.edge,
    ...options
  })

const serve = (
  script: ReadonlyArray<Fake.Behaviour>,
  options: Partial<OpenAiResponses.Options> = {},
  fakeOptions: Omit<Fake.StartOptions, "script"> = {}
) =>
  Effect.gen(function*() {
    const fake = yield* Fake.make({ script, ...fakeOptions })
    const provider = yield* makeFor(fake, options)
    return { fake, provider }
  })

const ask: ModelRequest = Cases.request
const streamed = (request: ModelRequest, deltas: Array<string> = []): ModelRequest => ({
  ...request,
  onDelta: (text) => deltas.push(text)
})

const own = (id: string, encryptedContent?: string): ReasoningPart => ({
  type: "reasoning",
  provider: "resp",
  id,
  ...(encryptedContent !== undefined ? { encryptedContent } : {}),
  summary: [`summary of ${id}`]
})

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("OpenAiResponses", (it) => {
  describe("request mapping", () => {
    it.scoped("maps instructions, user context, own reasoning before its message and calls, outputs, notices", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([Fake.text("ok")], {
          reasoning: { effort: "high", summary: "detailed" },
          maxOutputTokens: 4_000
        }, { strict: false })
        const messages: ReadonlyArray<TurnEntry> = [
          { kind: "user", text: "Why is checkout failing?", context: "runbook: restart the db" },
          {
            kind: "assistant",
            text: "Let me look.",
            finishReason: "tool_calls",
            reasoning: [
              own("rs_1", "enc-1"),
              { type: "thinking", provider: "claude", thinking: "hmm", signature: "sig" },
              { ...own("rs_foreign", "enc-x"), provider: "other-openai" },
              own("rs_no_content")
            ],
            toolCalls: [
              { id: "call_a", name: "logs", arguments: "{\"q\":\"api\"}" },
              { id: "call_b", name: "status", arguments: "{\"q\":\"db\"}" }
            ]
          },
          {
            kind: "tool_results",
            results: [
              {
                callId: "call_a",
                name: "logs",
                content: "500s since 10:02",
                isError: false,
                status: "ok",
                attachments: [
                  { type: "image", mimeType: "image/png", data: "iVBORw0KGgo=" },
                  { type: "audio", mimeType: "audio/wav", data: "UklGRg==" }
                ]
              },
              { callId: "call_b", name: "status", content: "unknown tool", isError: true, status: "error" }
            ]
          },
          { kind: "notice", rail: "RepeatGuard", text: "you repeated yourself" },
          // Neither text nor calls: left out whole, its reasoning too (nothing would follow it).
          { kind: "assistant", text: "", finishReason: "length", toolCalls: [], reasoning: [own("rs_2", "enc-2")] }
        ]
        yield* provider.complete({
          system: "You investigate.",
          messages,
          tools: [{ name: "logs", description: "Fetches logs.", parameters: { type: "object" } }],
          maxTokens: 512,
          stopSequences: ["END"],
          cacheKey: "ses_1"
        })
        const sent = fake.requests[0]
        expect(sent?.path).toBe("/v1/responses")
        expect(sent?.headers.authorization).toBe("Bearer sk-test-key")
        expect(sent?.body).toEqual({
          model: "gpt-5",
          instructions: "You investigate.",
          store: false,
          include: ["reasoning.encrypted_content"],
          reasoning: { effort: "high", summary: "detailed" },
          max_output_tokens: 512,
          prompt_cache_key: "ses_1",
          tools: [{
            type: "function",
            name: "logs",
            description: "Fetches logs.",
            parameters: { type: "object" },
            strict: false
          }],
          input: [
            {
              role: "user",
              content: [{
                type: "input_text",
                text: "<context>\nrunbook: restart the db\n</context>\n\nWhy is checkout failing?"
              }]
            },
            {
              type: "reasoning",
              id: "rs_1",
              encrypted_content: "enc-1",
              summary: [{ type: "summary_text", text: "summary of rs_1" }]
            },
            { type: "message", role: "assistant", content: [{ type: "output_text", text: "Let me look." }] },
            { type: "function_call", call_id: "call_a", name: "logs", arguments: "{\"q\":\"api\"}" },
            { type: "function_call", call_id: "call_b", name: "status", arguments: "{\"q\":\"db\"}" },
            {
              type: "function_call_output",
              call_id: "call_a",
              output: [
                { type: "input_text", text: "500s since 10:02" },
                { type: "input_image", image_url: "data:image/png;base64,iVBORw0KGgo=" }
              ]
            },
            { type: "function_call_output", call_id: "call_b", output: "unknown tool" },
            { role: "user", content: [{ type: "input_text", text: "[RepeatGuard] you repeated yourself" }] }
          ]
        })
      }))

    it.scoped("without reasoning configured: no reasoning, no include; the output cap and cache key are optional", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([Fake.text("ok"), Fake.text("ok")], {
          maxOutputTokens: 300,
          promptCacheKey: false,
          attachments: "describe",
          extraBody: { temperature: 0 }
        })
        yield* provider.complete({ ...ask, cacheKey: "ses_1" })
        const body = fake.requests[0]?.body
        expect(body?.reasoning).toBeUndefined()
        expect(body?.include).toBeUndefined()
        expect(body?.max_output_tokens).toBe(300)
        expect(body?.prompt_cache_key).toBeUndefined()
        expect(body?.temperature).toBe(0)
        const plain = yield* makeFor(fake)
        yield* plain.complete({ ...ask, messages: [], system: "" })
        expect(fake.requests[1]?.body).toEqual({ model: "gpt-5", input: [], store: false })
        expect(fake.refusals).toEqual([])
      }))

    it.scoped("a sample's cap goes out as max_output_tokens (at least the API's 16); stop sequences are not sent", () =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([Fake.text("ok"), Fake.text("ok")], { maxOutputTokens: 1_000 })
        yield* provider.complete(Cases.sampleRequest)
        expect(fake.requests[0]?.body.max_output_tokens).toBe(64)
        expect(fake.requests[0]?.body.stop).toBeUndefined()
        yield* provider.complete({ ...Cases.sampleRequest, maxTokens: 8 })
        expect(fake.requests[1]?.body.max_output_tokens).toBe(16)
        expect(fake.refusals).toEqual([])
      }))

    it.scoped("asks for JSON with text.format json_schema, and streams with stream: true", () =>
      Effect.gen(function*() {
        const schema = { type: "object", properties: { summary: { type: "string" } } }
        const { fake, provider } = yield* serve([Fake.text("{}"), Fake.text("hi")])
        yield* provider.complete({ ...ask, responseSchema: schema })
        expect(fake.requests[0]?.body.text).toEqual({
          format: { type: "json_schema", name: "report", schema, strict: false }
        })
        expect(fake.requests[0]?.body.tools).toBeUndefined()
        yield* provider.complete(streamed(ask))
        expect(fake.requests[1]?.body.stream).toBe(true)
        expect(fake.requests[1]?.headers.accept).toBe("text/event-stream")
        expect(fake.refusals).toEqual([])
      }))
  })

  describe("decodes the public wire format", () => {
    it.scoped("a reasoning item round trip: its encrypted content goes back verbatim before its function call", () =>
      Effect.gen(function*() {
        const recorded = fixture("responses-reasoning-round-trip.json") as {
          readonly response: Record<string, unknown>
          readonly nextInput: ReadonlyArray<unknown>
        }
        const { fake, provider } = yield* serve(
          [Fake.raw(JSON.stringify(recorded.response)), Fake.text("14°C")],
          { reasoning: reasoningOn },
          { strict: false }
        )
        const question = { kind: "user", text: "What is the weather like in Paris today?" } as const
        const reply = yield* provider.complete({ ...ask, messages: [question] })
        const rs = (recorded.response.output as ReadonlyArray<Record<string, unknown>>)[0]!
        expect(reply).toMatchObject({
          text: "",
          finishReason: "tool_calls",
          model: "o4-mini-2025-04-16",
          toolCalls: [{ id: "call_12345xyz", name: "get_weather", arguments: "{\"location\":\"Paris, France\"}" }],
          reasoning: [{
            type: "reasoning",
            provider: "resp",
            id: rs.id,
            encryptedContent: rs.encrypted_content,
            summary: [
              "**Checking the weather**\n\nThe user wants the weather in Paris; the get_weather tool answers that."
            ]
          }]
        })
        expect(reply.usage).toMatchObject({
          inputTokens: 2168,
          outputTokens: 211,
          cacheReadTokens: 1920,
          reasoningTokens: 192
        })
        expect(reply.raw).toEqual(recorded.response)
        yield* provider.complete({
          ...ask,
          messages: [
            question,
            {
              kind: "assistant",
              text: reply.text,
              toolCalls: reply.toolCalls,
              finishReason: reply.finishReason,
              ...(reply.reasoning !== undefined ? { reasoning: reply.reasoning } : {})
            },
            {
              kind: "tool_results",
              results: [{
                callId: "call_12345xyz",
                name: "get_weather",
                content: "14°C, light rain",
                isError: false,
                status: "ok"
              }]
            }
          ]
        })
        expect(fake.requests[1]?.body.input).toEqual(recorded.nextInput)
      }))

    it.scoped("the streaming event sequence: text deltas to onDelta, the reply from the done items", () =>
      Effect.gen(function*() {
        const events = fixture("responses-stream-events.json") as ReadonlyArray<Record<string, unknown>>
        const { provider } = yield* serve([
          Fake.raw(Fake.sseBody(events), { headers: { "content-type": "text/event-stream" } })
        ], { reasoning: reasoningOn })
        const deltas: Array<string> = []
        const reply = yield* provider.complete(streamed(ask, deltas))
        expect(deltas).toEqual(["Let me ", "check the", " logs."])
        const done = events.at(-1)?.response as Record<string, unknown>
        const rs = (done.output as ReadonlyArray<Record<string, unknown>>)[0]!
        expect(reply).toMatchObject({
          text: "Let me check the logs.",
          finishReason: "tool_calls",
          model: "gpt-5-2025-08-07",
          toolCalls: [{ id: "call_Qx7yH2nKcP4mW9sT", name: "logs", arguments: "{\"q\":\"checkout errors\"}" }],
          reasoning: [{
            type: "reasoning",
            provider: "resp",
            id: rs.id,
            encryptedContent: rs.encrypted_content,
            summary: ["**Looking for the cause**\n\nI should check the logs first."]
          }]
        })
        expect(reply.usage).toMatchObject({
          inputTokens: 1538,
          outputTokens: 148,
          cacheReadTokens: 1280,
          reasoningTokens: 128
        })
      }))

    it.scoped("the done items decide when the terminal event carries no output", () =>
      Effect.gen(function*() {
        const events = (fixture("responses-stream-events.json") as ReadonlyArray<Record<string, unknown>>).map((e) =>
          e.type === "response.completed" ? { ...e, response: { ...(e.response as object), output: [] } } : e
        )
        const { provider } = yield* serve([
          Fake.raw(Fake.sseBody(events), { headers: { "content-type": "text/event-stream" } })
        ])
        const reply = yield* provider.complete(streamed(ask))
        expect(reply.text).toBe("Let me check the logs.")
        expect(reply.toolCalls).toHaveLength(1)
        expect(reply.reasoning).toHaveLength(1)
      }))

    for (const stream of [false, true]) {
      const mode = stream ? "streamed" : "unstreamed"
      it.scoped(`${mode}: a refusal → refused, incomplete → length or filtered, usage with cached tokens`, () =>
        Effect.gen(function*() {
          const { provider } = yield* serve([
            Fake.reply({ refusal: "I can't help with that." }),
            Fake.reply({ text: "cut sho", incomplete: "max_output_tokens" }),
            Fake.reply({ text: "", incomplete: "content_filter" }),
            Fake.text("same key again")
          ], { reasoning: reasoningOn })
          const request = (r: ModelRequest) => stream ? streamed(r) : r
          const keyed = { ...ask, cacheKey: "ses_cached" }
          expect(yield* provider.complete(request(keyed))).toMatchObject({
            text: "I can't help with that.",
            finishReason: "refused"
          })
          expect(yield* provider.complete(request(keyed))).toMatchObject({ text: "cut sho", finishReason: "length" })
          expect((yield* provider.complete(request(keyed))).finishReason).toBe("filtered")
          const again = yield* provider.complete(request(keyed))
          expect(again.usage.cacheReadTokens).toBeGreaterThan(0)
          expect(again.usage.reasoningTokens).toBe(64)
          expect(again.usage.outputTokens).toBe(71)
        }))
    }
  })

  describe("classifies every failure at the boundary", () => {
    const check = (behaviour: Fake.Behaviour, stream: boolean, expected: {
      readonly kind: ErrorKind
      readonly status?: number
      readonly retryAfterMs?: readonly [number, number]
    }) =>
      Effect.gen(function*() {
        const { fake, provider } = yield* serve([behaviour])
        const outcome = yield* Effect.either(provider.complete(stream ? streamed(ask) : ask))
        if (Either.isRight(outcome)) return expect.fail(`expected ${expected.kind}, got a reply`)
        const error = outcome.left
        expect({ kind: error.kind, provider: error.provider }).toEqual({ kind: expected.kind, provider: "resp" })
        if (expected.status !== undefined) expect(error.status).toBe(expected.status)
        if (expected.retryAfterMs === undefined) expect(error.retryAfterMs).toBeUndefined()
        else {
          expect(error.retryAfterMs).toBeGreaterThanOrEqual(expected.retryAfterMs[0])
          expect(error.retryAfterMs).toBeLessThanOrEqual(expected.retryAfterMs[1])
        }
        expect(fake.requests).toHaveLength(1)
      })

    for (const stream of [false, true]) {
      const mode = stream ? "streamed" : "unstreamed"
      // The shared table's rows are statuses with bodies: the Responses API answers them the same way.
      for (const row of Cases.statusRows) {
        it.scoped(`${mode}: ${row.name}`, () =>
          check(row.behaviour("openai") as Fake.Behaviour, stream, {
            kind: row.kind,
            ...(row.status !== undefined ? { status: row.status } : {}),
            ...(row.retryAfterMs !== undefined ? { retryAfterMs: row.retryAfterMs } : {})
          }))
      }
      it.scoped(`${mode}: a 429 with Retry-After from this API's own body → rate_limit, wait kept`, () =>
        check(Fake.rateLimited({ seconds: 3 }), stream, {
          kind: "rate_limit",
          status: 429,
          retryAfterMs: [3_000, 3_000]
        }))
      it.scoped(`${mode}: 400 context_length_exceeded in this API's wording → context_overflow`, () =>
        check(
          Fake.status(
            400,
            Fake.apiError(
              "Your input exceeds the context window of this model. Please adjust your input and try again.",
              "invalid_request_error",
              "input",
              "context_length_exceeded"
            )
          ),
          stream,
          { kind: "context_overflow", status: 400 }
        ))
      it.scoped(`${mode}: a failed response with server_error → server`, () =>
        check(Fake.failed("server_error", "The server had an error processing your request."), stream, {
          kind: "server",
          status: 200
        }))
      it.scoped(`${mode}: a failed response with rate_limit_exceeded → rate_limit`, () =>
        check(Fake.failed("rate_limit_exceeded", "Rate limit reached."), stream, { kind: "rate_limit", status: 200 }))
      it.scoped(`${mode}: a failed response with invalid_prompt → bad_request (a retry fails the same)`, () =>
        check(Fake.failed("invalid_prompt", "Invalid prompt: flagged."), stream, { kind: "bad_request", status: 200 }))
    }
    it.scoped("streamed: an error event mid-stream → classified by its code", () =>
      check(Fake.errorEvent({ text: "Hello there" }, 4, "rate_limit_exceeded", "Rate limited"), true, {
        kind: "rate_limit",
        status: 200
      }))
    it.scoped("streamed: an error event about context length → context_overflow", () =>
      check(
        Fake.errorEvent(
          { text: "Hello there" },
          2,
          "context_length_exceeded",
          "Your input exceeds the context window of this model."
        ),
        true,
        { kind: "context_overflow", status: 200 }
      ))
    it.scoped("streamed: a stream ended without its terminal event → server", () =>
      check(Fake.breakStream({ text: "Hello there, this is cut" }, 6, true), true, { kind: "server", status: 200 }))
    it.scoped("streamed: a stream whose connection drops → timeout", () =>
      check(Fake.breakStream({ text: "Hello there, this is cut" }, 6), true, { kind: "timeout", status: 200 }))
    for (const stream of [false, true]) {
      const mode = stream ? "streamed" : "unstreamed"
      it.scoped(`${mode}: a slow first byte → timeout`, () => check(Fake.slow(60_000), stream, { kind: "timeout" }))
      it.scoped(`${mode}: a reply larger than maxResponseBytes → server`, () =>
        check(Fake.raw(`{"id":"resp_huge","padding":"${"x".repeat(2 * 1024 * 1024)}"}`), stream, {
          kind: "server",
          status: 200
        }))
    }
    it.scoped("unstreamed: malformed JSON → server", () =>
      check(Fake.raw("{\"id\": \"resp_broken\", \"output\": ["), false, { kind: "server", status: 200 }))
  })

  describe("the fake refuses what the API refuses", () => {
    const refusal = (body: unknown) =>
      Effect.gen(function*() {
        const fake = yield* Fake.make()
        return yield* Effect.promise(() => fake.post(body))
      })
    const errorOf = (answer: { readonly body: unknown }) => (answer.body as { readonly error: Fake.WireError }).error

    it.scoped("Chat Completions parameters, unknown parameters, an invalid effort, a Chat-shaped tool", () =>
      Effect.gen(function*() {
        const messages = yield* refusal({ model: "gpt-5", messages: [{ role: "user", content: "hi" }] })
        expect(messages.status).toBe(400)
        expect(errorOf(messages)).toMatchObject({ param: "messages", code: "unsupported_parameter" })
        expect(errorOf(messages).message).toContain("has moved to 'input'")
        const maxTokens = yield* refusal({ model: "gpt-5", input: "hi", max_tokens: 64 })
        expect(errorOf(maxTokens)).toMatchObject({ param: "max_tokens", code: "unsupported_parameter" })
        const stop = yield* refusal({ model: "gpt-5", input: "hi", stop: ["END"] })
        expect(errorOf(stop)).toEqual({
          message: "Unknown parameter: 'stop'.",
          type: "invalid_request_error",
          param: "stop",
          code: "unknown_parameter"
        })
        const cap = yield* refusal({ model: "gpt-5", input: "hi", max_output_tokens: 10 })
        expect(errorOf(cap)).toMatchObject({ param: "max_output_tokens", code: "integer_below_min_value" })
        const effort = yield* refusal({ model: "gpt-5", input: "hi", reasoning: { effort: "extreme" } })
        expect(effort.status).toBe(400)
        expect(errorOf(effort)).toMatchObject({ param: "reasoning.effort", code: "invalid_value" })
        const tool = yield* refusal({
          model: "gpt-5",
          input: "hi",
          tools: [{ type: "function", function: { name: "logs", parameters: {} } }]
        })
        expect(errorOf(tool)).toMatchObject({ param: "tools[0].name", code: "missing_required_parameter" })
      }))

    it.scoped("a function_call_output that answers no function call", () =>
      Effect.gen(function*() {
        const answer = yield* refusal({
          model: "gpt-5",
          input: [
            { role: "user", content: "hi" },
            { type: "function_call_output", call_id: "call_nowhere", output: "x" }
          ]
        })
        expect(answer.status).toBe(400)
        expect(errorOf(answer)).toEqual({
          message: "No tool call found for function call output with call_id call_nowhere.",
          type: "invalid_request_error",
          param: "input",
          code: null
        })
      }))

    it.scoped("reasoning items: missing, altered, unfollowed; an id-bearing call without its reasoning item", () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({
          script: [Fake.reply({ toolCalls: [{ name: "logs", arguments: { q: "a" } }] })]
        })
        const first = yield* Effect.promise(() =>
          fake.post({
            model: "gpt-5",
            input: "why?",
            store: false,
            reasoning: { effort: "low" },
            include: ["reasoning.encrypted_content"],
            tools: [{ type: "function", name: "logs", parameters: { type: "object" } }]
          })
        )
        expect(first.status).toBe(200)
        const [rs, fc] = (first.body as { readonly output: ReadonlyArray<Record<string, unknown>> }).output
        expect(rs).toMatchObject({ type: "reasoning" })
        expect(typeof rs?.encrypted_content).toBe("string")
        const user = { role: "user", content: "why?" }
        const out = { type: "function_call_output", call_id: fc?.call_id, output: "logs" }
        const { status: _status, ...call } = fc!
        const post = (input: ReadonlyArray<unknown>) =>
          Effect.promise(() => fake.post({ model: "gpt-5", input, store: false }))

        const withoutReasoning = yield* post([user, call, out])
        expect(withoutReasoning.status).toBe(400)
        expect(errorOf(withoutReasoning)).toEqual({
          message: `Item '${String(fc?.id)}' of type 'function_call' was provided without its required 'reasoning' ` +
            `item: '${String(rs?.id)}'.`,
          type: "invalid_request_error",
          param: "input",
          code: null
        })
        const interleaved = yield* post([user, rs, { ...out, call_id: "call_other" }, call, out])
        expect(interleaved.status).toBe(400)
        const altered = yield* post([
          user,
          { ...rs, encrypted_content: `${String(rs?.encrypted_content).slice(0, -2)}AB` },
          call,
          out
        ])
        expect(altered.status).toBe(400)
        expect(errorOf(altered)).toMatchObject({ code: "invalid_encrypted_content" })
        const idOnly = yield* post([user, { type: "reasoning", id: rs?.id, summary: [] }, call, out])
        expect(idOnly.status).toBe(404)
        expect(errorOf(idOnly).message).toContain("Items are not persisted when `store` is set to false")
        const unfollowed = yield* post([user, rs])
        expect(unfollowed.status).toBe(400)
        expect(errorOf(unfollowed).message).toBe(
          `Item '${String(rs?.id)}' of type 'reasoning' was provided without its required following item.`
        )
        const twice = yield* post([user, rs, call, out, rs, call])
        expect(twice.status).toBe(400)
        expect(errorOf(twice).message).toContain("Duplicate item found with id")
        expect(fake.refusals).toHaveLength(6)

        // What the API accepts: the reasoning item right before its calls, with or without item ids.
        expect((yield* post([user, rs, call, out])).status).toBe(200)
        const { id: _rsId, ...anonymous } = rs!
        const { id: _fcId, ...bare } = call
        expect((yield* post([user, anonymous, bare, out])).status).toBe(200)
        expect((yield* post([user, bare, out])).status).toBe(200)
      }))
  })

  describe("any transcript the loop can build is accepted", () => {
    type Origin = "own" | "own-unencrypted" | "foreign" | "thinking"
    const turn = fc.record({
      text: fc.constantFrom("", "Let me look.", "Done."),
      calls: fc.integer({ min: 0, max: 3 }),
      reasoning: fc.array(fc.constantFrom<Origin>("own", "own-unencrypted", "foreign", "thinking"), { maxLength: 3 }),
      image: fc.boolean(),
      pruned: fc.boolean(),
      after: fc.constantFrom("none", "notice", "user")
    })
    const plans = fc.sample(
      fc.record({
        turns: fc.array(turn, { minLength: 1, maxLength: 6 }),
        stream: fc.boolean(),
        reasoning: fc.boolean()
      }),
      { numRuns: 60, seed: 40 }
    )

    it.scoped("reasoning own and foreign, empty turns, images, prunes, notices: the strict fake refuses none", () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({ fallback: () => Fake.text("ok") })
        // Reasoning items this fake really issued (each with its encrypted content), to stand for this provider's.
        const pool: Array<ReasoningPart> = []
        for (let i = 0; i < 18; i++) {
          fake.enqueue(Fake.reply({ toolCalls: [{ name: "echo", arguments: { q: String(i) } }] }))
          const answer = yield* Effect.promise(() =>
            fake.post({
              model: "gpt-5",
              input: "go",
              store: false,
              reasoning: { effort: "low" },
              include: ["reasoning.encrypted_content"]
            })
          )
          const item = (answer.body as { readonly output: ReadonlyArray<Record<string, unknown>> }).output[0]!
          pool.push(own(String(item.id), String(item.encrypted_content)))
        }
        const before = fake.requests.length
        const provider = yield* makeFor(fake, { reasoning: reasoningOn })
        const providerOff = yield* makeFor(fake)
        for (const plan of plans) {
          let next = 0
          const messages: Array<TurnEntry> = [{ kind: "user", text: "Why is checkout failing?" }]
          plan.turns.forEach((t, k) => {
            const reasoning = t.reasoning.map((origin): ReasoningPart => {
              switch (origin) {
                case "own":
                  return pool[next++]!
                case "own-unencrypted":
                  return own(`rs_unencrypted_${k}`)
                case "foreign":
                  return { ...own(`rs_foreign_${k}`, "not-for-this-provider"), provider: "other-openai" }
                case "thinking":
                  return { type: "thinking", provider: "claude", thinking: "hmm", signature: "sig" }
              }
            })
            const calls = Array.from({ length: t.calls }, (_, j) => ({
              id: `call_${k}_${j}`,
              name: "echo",
              arguments: `{"q":"${k}.${j}"}`
            }))
            messages.push({
              kind: "assistant",
              text: t.text,
              toolCalls: calls,
              finishReason: calls.length > 0 ? "tool_calls" : t.text === "" ? "length" : "stop",
              ...(reasoning.length > 0 ? { reasoning } : {})
            })
            if (calls.length > 0) {
              messages.push({
                kind: "tool_results",
                results: calls.map((call) => ({
                  callId: call.id,
                  name: call.name,
                  content: t.pruned ? "[pruned to fit the context window: 900 bytes]" : `echo:${call.id}`,
                  isError: false,
                  status: "ok" as const,
                  ...(t.image
                    ? { attachments: [{ type: "image" as const, mimeType: "image/png", data: "iVBORw0KGgo=" }] }
                    : {})
                }))
              })
            }
            if (t.after === "notice") messages.push({ kind: "notice", rail: "RepeatGuard", text: "repeated" })
            if (t.after === "user") messages.push({ kind: "user", text: "And now?" })
          })
          const request: ModelRequest = {
            system: "You investigate.",
            messages,
            tools: [{ name: "echo", description: "Echoes.", parameters: { type: "object" } }],
            cacheKey: "ses_prop"
          }
          const chosen = plan.reasoning ? provider : providerOff
          const outcome = yield* Effect.either(chosen.complete(plan.stream ? streamed(request) : request))
          if (Either.isLeft(outcome)) {
            return expect.fail(`refused: ${outcome.left.message}\n${JSON.stringify(fake.requests.at(-1)?.body.input)}`)
          }
        }
        expect(fake.requests.length - before).toBe(plans.length)
        expect(fake.refusals).toEqual([])
      }))
  })

  describe("a tool loop over real HTTP", () => {
    it.scoped("three tool turns with reasoning, a rate limit retried, the finalize call: nothing is refused", () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({
          script: [
            Fake.status(
              429,
              Fake.apiError("Rate limit reached for gpt-5.", "tokens", null, "rate_limit_exceeded"),
              { "retry-after-ms": "5" }
            )
          ],
          fallback: Fake.demo(3)
        })
        const provider = yield* makeFor(fake, { reasoning: reasoningOn, maxOutputTokens: 8_000 })
        const spec = Harness.agent({ tools: ["echo"] })
        const run = yield* Harness.runBurst({ spec, prompt: "Why is checkout failing?" }).pipe(
          Effect.provide(Harness.layer({ providers: [provider], tools: Tools.all }))
        )
        expect(run.reason).toBe<ExitReason>("completed")
        expect(fake.refusals).toEqual([])
        expect(run.trajectory.errors.map((e) => e.code)).toEqual(["provider.rate_limit"])
        const kinds = run.turns.map((t) => t.entry.kind)
        expect(kinds).toEqual([
          "user",
          "assistant",
          "tool_results",
          "assistant",
          "tool_results",
          "assistant",
          "tool_results",
          "assistant"
        ])
        // Every assistant turn kept its reasoning item, with the encrypted content, as this provider's.
        for (const turn of run.turns) {
          if (turn.entry.kind !== "assistant") continue
          expect(turn.entry.reasoning).toEqual([
            expect.objectContaining({ type: "reasoning", provider: "resp", encryptedContent: expect.any(String) })
          ])
        }
        // Each later request sent every earlier reasoning item right before the calls it led to.
        const last = fake.requests.filter((r) => r.body.text === undefined).at(-1)
        const types = (last?.body.input as ReadonlyArray<Record<string, unknown>>).map((i) => i.type ?? i.role)
        expect(types).toEqual([
          "user",
          "reasoning",
          "message",
          "function_call",
          "function_call_output",
          "reasoning",
          "function_call",
          "function_call_output",
          "reasoning",
          "function_call",
          "function_call_output"
        ])
        expect(fake.requests.every((r) => r.body.store === false)).toBe(true)
        // The loop's calls stream (deltas reach subscribers); the finalize call does not.
        expect(fake.requests.map((r) => r.stream)).toEqual([true, true, true, true, true, false])
        expect(fake.requests.every((r) => r.body.prompt_cache_key === run.session.id)).toBe(true)
        // The finalize call asked for the report's JSON schema and got it.
        expect(fake.requests.at(-1)?.body.text).toMatchObject({ format: { type: "json_schema", name: "report" } })
        expect(run.report.source).toBe("model")
        expect(run.report.data).toEqual(FakeProvider.demoReport)
      }))

    it.scoped("after a failover to another Responses provider, the first one's reasoning is not sent to it", () =>
      Effect.gen(function*() {
        // Two fakes: what one issued, the other cannot verify — as another organisation or key could not.
        const primary = yield* Fake.make({
          script: [Fake.reply({ text: "Let me look.", toolCalls: [{ name: "echo", arguments: { q: "turn 1" } }] })],
          fallback: () => Fake.status(500, Fake.apiError("The server had an error.", "server_error"))
        })
        const secondary = yield* Fake.make({ fallback: Fake.demo(3) })
        const first = yield* makeFor(primary, { name: "openai-a", reasoning: reasoningOn, maxAttempts: 1 })
        const second = yield* makeFor(secondary, { name: "openai-b", reasoning: reasoningOn })
        const run = yield* Harness.runBurst({ spec: Harness.agent({ tools: ["echo"] }) }).pipe(
          Effect.provide(Harness.layer({ providers: [first, second], tools: Tools.all }))
        )
        expect(run.reason).toBe<ExitReason>("completed")
        expect(primary.refusals).toEqual([])
        expect(secondary.refusals).toEqual([])
        const makers = run.turns.flatMap((t) =>
          t.entry.kind === "assistant" ? [(t.entry.reasoning ?? []).map((part) => part.provider)] : []
        )
        expect(makers).toEqual([["openai-a"], ["openai-b"], ["openai-b"], ["openai-b"]])
        // The second provider got the first turn's text and call, never its reasoning item.
        const input = secondary.requests[0]?.body.input as ReadonlyArray<Record<string, unknown>>
        expect(input.map((i) => i.type ?? i.role)).toEqual(["user", "message", "function_call", "function_call_output"])
        expect(run.trajectory.decisions).toContainEqual(
          expect.objectContaining({ _tag: "reasoning_dropped", provider: "openai-b", parts: 1 })
        )
      }))
  })
})
