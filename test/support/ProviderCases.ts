/**
 * The classification table both adapter suites run, row by row, over real HTTP to the fake provider, streaming
 * and not: what the provider does → the `ProviderError` the adapter must fail with. One table so the two adapters
 * cannot drift apart on what a 429 with a billing message means.
 */
import type { HttpClient } from "@effect/platform"
import { expect } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect, Either } from "effect"
import type { ErrorKind } from "../../src/domain/ErrorKind.js"
import type { ModelProvider, ModelRequest } from "../../src/model/ModelProvider.js"
import type { Behaviour, Wire } from "./FakeProvider.js"
import * as Fake from "./FakeProvider.js"

/** One row: the behaviour (per wire format) and what the adapter must report. */
export interface Row {
  readonly name: string
  readonly behaviour: (wire: Wire) => Behaviour
  readonly kind: ErrorKind
  /** The status the error must keep (undefined: not checked). */
  readonly status?: number
  /** The Retry-After the error must carry, as [min, max] milliseconds (undefined: must be absent). */
  readonly retryAfterMs?: readonly [number, number]
  /** Input tokens the error must still charge. */
  readonly usageInput?: number
}

const openAiError = (message: string, type: string, code: string | null = null) => ({
  error: { message, type, param: null, code }
})
const anthropicError = (type: string, message: string) => ({ type: "error", error: { type, message } })
const errorBody = (wire: Wire, type: string, message: string, code: string | null = null) =>
  wire === "anthropic" ? anthropicError(type, message) : openAiError(message, type, code)

const thirtySecondsFromNow = () => new Date(Date.now() + 30_000)

/** Rows decided by the HTTP status and body: the same for streamed and unstreamed requests. */
export const statusRows: ReadonlyArray<Row> = [
  {
    name: "401 → auth",
    behaviour: (w) => Fake.status(401, errorBody(w, "authentication_error", "invalid x-api-key", "invalid_api_key")),
    kind: "auth",
    status: 401
  },
  { name: "403 → auth", behaviour: () => Fake.status(403, "Forbidden"), kind: "auth", status: 403 },
  {
    name: "429 without Retry-After → rate_limit",
    behaviour: () => Fake.rateLimited(),
    kind: "rate_limit",
    status: 429
  },
  {
    name: "429 with Retry-After in seconds",
    behaviour: () => Fake.rateLimited({ seconds: 2 }),
    kind: "rate_limit",
    status: 429,
    retryAfterMs: [2_000, 2_000]
  },
  {
    name: "429 with Retry-After as an HTTP date",
    behaviour: () => Fake.rateLimited({ date: thirtySecondsFromNow() }),
    kind: "rate_limit",
    status: 429,
    retryAfterMs: [27_000, 31_000]
  },
  {
    name: "429 with retry-after-ms",
    behaviour: () => Fake.rateLimited({ ms: 1_500 }),
    kind: "rate_limit",
    status: 429,
    retryAfterMs: [1_500, 1_500]
  },
  {
    name: "429 with a spend-limit Retry-After beyond the cap (kept uncapped)",
    behaviour: () => Fake.rateLimited({ seconds: 274_579 }),
    kind: "rate_limit",
    status: 429,
    retryAfterMs: [274_579_000, 274_579_000]
  },
  {
    name: "429 insufficient_quota → quota",
    behaviour: (w) =>
      Fake.status(
        429,
        errorBody(
          w,
          "insufficient_quota",
          "You exceeded your current quota, please check your plan and billing details.",
          "insufficient_quota"
        )
      ),
    kind: "quota",
    status: 429
  },
  {
    name: "400 credit balance too low → quota",
    behaviour: (w) =>
      Fake.status(
        400,
        errorBody(w, "invalid_request_error", "Your credit balance is too low to access the Anthropic API.")
      ),
    kind: "quota",
    status: 400
  },
  {
    name: "529 overloaded_error → overloaded",
    behaviour: (w) => Fake.status(529, errorBody(w, "overloaded_error", "Overloaded")),
    kind: "overloaded",
    status: 529
  },
  {
    name: "500 with an overloaded body → overloaded",
    behaviour: () => Fake.status(500, { error: { message: "The engine is currently overloaded" } }),
    kind: "overloaded",
    status: 500
  },
  {
    name: "500 → server",
    behaviour: (w) => Fake.status(500, errorBody(w, "api_error", "Internal server error", "server_error")),
    kind: "server",
    status: 500
  },
  {
    name: "502 with an HTML body → server, status kept",
    behaviour: () =>
      Fake.status(502, "<html><body><h1>502 Bad Gateway</h1></body></html>", { "content-type": "text/html" }),
    kind: "server",
    status: 502
  },
  {
    name: "504 from a gateway → timeout",
    behaviour: () => Fake.status(504, "upstream request timeout"),
    kind: "timeout",
    status: 504
  },
  {
    name: "400 context_length_exceeded (OpenAI) → context_overflow",
    behaviour: () =>
      Fake.status(
        400,
        openAiError(
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
          "invalid_request_error",
          "context_length_exceeded"
        )
      ),
    kind: "context_overflow",
    status: 400
  },
  {
    name: "400 prompt is too long (Anthropic) → context_overflow",
    behaviour: () =>
      Fake.status(400, anthropicError("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")),
    kind: "context_overflow",
    status: 400
  },
  {
    name: "400 llama.cpp exceeds the available context size → context_overflow",
    behaviour: () =>
      Fake.status(400, {
        error: {
          code: 400,
          message: "the request exceeds the available context size, try increasing it",
          type: "exceed_context_size_error"
        }
      }),
    kind: "context_overflow",
    status: 400
  },
  {
    name: "400 vLLM too long to fit into the model → context_overflow",
    behaviour: () =>
      Fake.status(400, {
        object: "error",
        message: "The prompt (total length 9000) is too long to fit into the model (context length 8192).",
        type: "BadRequestError",
        code: 400
      }),
    kind: "context_overflow",
    status: 400
  },
  {
    name: "400 Ollama plain-text context error → context_overflow",
    behaviour: () => Fake.status(400, { error: "input length exceeds maximum context length" }),
    kind: "context_overflow",
    status: 400
  },
  {
    name: "413 request too large → context_overflow",
    behaviour: (w) => Fake.status(413, errorBody(w, "request_too_large", "Request exceeds the maximum allowed size")),
    kind: "context_overflow",
    status: 413
  },
  {
    name: "400 content filter → filtered",
    behaviour: () =>
      Fake.status(
        400,
        openAiError(
          "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
          "invalid_request_error",
          "content_filter"
        )
      ),
    kind: "filtered",
    status: 400
  },
  {
    name: "400 other → bad_request",
    behaviour: (w) =>
      Fake.status(400, errorBody(w, "invalid_request_error", "tools.0.name: String should match pattern")),
    kind: "bad_request",
    status: 400
  },
  {
    name: "404 unknown model → bad_request",
    behaviour: (w) => Fake.status(404, errorBody(w, "not_found_error", "model: gpt-nope", "model_not_found")),
    kind: "bad_request",
    status: 404
  },
  {
    name: "a failure body that reports usage → charged",
    behaviour: (w) =>
      Fake.status(500, {
        ...errorBody(w, "api_error", "stopped mid-generation"),
        usage: w === "anthropic"
          ? { input_tokens: 321, output_tokens: 9 }
          : { prompt_tokens: 321, completion_tokens: 9 }
      }),
    kind: "server",
    status: 500,
    usageInput: 321
  }
]

/** Rows about the transport: the same for both modes except where the body is a stream. */
export const transportRows = (stream: boolean): ReadonlyArray<Row> => [
  {
    name: "a slow first byte → timeout",
    behaviour: () => Fake.slowFirstByte(60_000),
    kind: "timeout"
  },
  {
    name: "an oversized reply → server",
    behaviour: () => Fake.oversized(2 * 1024 * 1024),
    kind: "server",
    status: 200
  },
  ...(stream
    ? [
      {
        name: "a stream broken mid-way (connection dropped) → timeout",
        behaviour: () => Fake.breakStream({ text: "Hello there, this is cut" }, 3),
        kind: "timeout",
        status: 200
      } as const,
      {
        name: "a stream ended early without its end marker → server",
        behaviour: () => Fake.breakStream({ text: "Hello there, this is cut" }, 3, true),
        kind: "server",
        status: 200
      } as const,
      {
        name: "an overloaded error event mid-stream → overloaded",
        behaviour: (w: Wire) =>
          Fake.streamError({ text: "Hello there" }, 2, {
            type: w === "anthropic" ? "overloaded_error" : "server_error",
            message: "Overloaded"
          }),
        kind: "overloaded",
        status: 200
      } as const,
      {
        name: "a rate-limit error event mid-stream → rate_limit",
        behaviour: (w: Wire) =>
          Fake.streamError({ text: "Hello there" }, 2, {
            type: w === "anthropic" ? "rate_limit_error" : "rate_limit_exceeded",
            message: "Rate limited"
          }),
        kind: "rate_limit",
        status: 200
      } as const
    ]
    : [
      {
        name: "a connection dropped mid-body → timeout",
        behaviour: () => Fake.dropMidBody(),
        kind: "timeout",
        status: 200
      } as const,
      {
        name: "malformed JSON → server",
        behaviour: () => Fake.malformedJson(),
        kind: "server",
        status: 200
      } as const
    ])
]

/** The request every row sends. */
/** A sample's request (MCP sampling): its maxTokens and stopSequences must reach the wire as `sampleOnWire` says. */
export const sampleRequest: ModelRequest = {
  system: "",
  messages: [{ kind: "user", text: "summarise" }],
  tools: [],
  maxTokens: 64,
  stopSequences: ["END"]
}

/** `sampleRequest`'s bounds as each wire format names them (Anthropic's max_tokens is the lower of its own and the sample's). */
export const sampleOnWire: Record<Wire, Record<string, unknown>> = {
  openai: { max_tokens: 64, stop: ["END"] },
  anthropic: { max_tokens: 64, stop_sequences: ["END"] }
}

export const request: ModelRequest = {
  system: "You are a test.",
  messages: [{ kind: "user", text: "What broke?" }],
  tools: []
}

/** Edge settings for row tests: a short first-byte wait, a small size cap. */
export const edge = { firstByteTimeoutMs: 250, idleTimeoutMs: 5_000, maxResponseBytes: 1024 * 1024 } as const

/**
 * Plays `row` against a fresh fake server through the adapter `make` builds, streamed or not, and checks the
 * classified error: kind, status, Retry-After, usage. For streams, also that no reply came back.
 */
export const checkRow = (
  wire: Wire,
  row: Row,
  stream: boolean,
  make: (fake: Fake.FakeProvider) => Effect.Effect<ModelProvider, never, HttpClient.HttpClient>
): Effect.Effect<void, never, HttpClient.HttpClient | Scope.Scope> =>
  Effect.gen(function*() {
    const fake = yield* Fake.make({ script: [row.behaviour(wire)] })
    const provider = yield* make(fake)
    const deltas: Array<string> = []
    const outcome = yield* Effect.either(
      provider.complete(stream ? { ...request, onDelta: (text) => deltas.push(text) } : request)
    )
    if (Either.isRight(outcome)) return expect.fail(`expected ${row.kind}, got a reply: ${outcome.right.text}`)
    const error = outcome.left
    expect({ kind: error.kind, provider: error.provider }).toEqual({ kind: row.kind, provider: provider.name })
    if (row.status !== undefined) expect(error.status).toBe(row.status)
    if (row.retryAfterMs === undefined) expect(error.retryAfterMs).toBeUndefined()
    else {
      expect(error.retryAfterMs).toBeGreaterThanOrEqual(row.retryAfterMs[0])
      expect(error.retryAfterMs).toBeLessThanOrEqual(row.retryAfterMs[1])
    }
    if (row.usageInput !== undefined) expect(error.usage?.inputTokens).toBe(row.usageInput)
    expect(fake.requests).toHaveLength(1)
    expect(fake.requests[0]?.stream).toBe(stream)
  })
