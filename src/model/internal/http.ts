/**
 * The HTTP edge both adapters share: send one JSON request, read a bounded body, and turn EVERY way the wire can
 * fail into a classified `ProviderError`, here and only here. A slow first byte and a silent stream surface as
 * `timeout` on their own (the chain's per-attempt timeout is the outer bound; these are tighter so a stalled
 * connection is noticed before the whole attempt budget is gone); a dropped connection is `timeout` too; a reply
 * that is not JSON or does not decode is `server` (retried: the next reply is usually fine); a reply larger than
 * `maxResponseBytes` is cut off and `server`, so a misbehaving proxy cannot fill the heap.
 */
import type { HttpClient, HttpClientError, HttpClientResponse } from "@effect/platform"
import { HttpClientRequest } from "@effect/platform"
import { Clock, Effect, Either, ParseResult, Schema } from "effect"
import type { Redacted } from "effect"
import type { ErrorKind } from "../../domain/ErrorKind.js"
import type { ModelReply } from "../../domain/Message.js"
import type { Usage } from "../../domain/Usage.js"
import * as BoundedWait from "../../internal/boundedWait.js"
import * as Spans from "../../telemetry/Spans.js"
import type { ModelProvider, ModelRequest } from "../ModelProvider.js"
import { defaultAttempt } from "../ModelProvider.js"
import { classifyStatus, parseRetryAfter, ProviderError } from "../ProviderError.js"
import * as ReadBody from "./readBody.js"
import * as Sse from "./sse.js"
import * as WireUsage from "./usage.js"

/** What the edge needs to know about one provider. */
/** What every HTTP adapter takes; each adds its own fields (base URL rules, output limits, JSON mode). */
export interface CommonOptions {
  /** The provider's name in logs, trajectories and errors. */
  readonly name: string
  readonly model: string
  /** The API key; omit for servers (or gateways) that authenticate otherwise. */
  readonly apiKey?: Redacted.Redacted<string> | undefined
  /** Extra headers on every request (a gateway's routing header, `anthropic-beta`, OpenRouter's `HTTP-Referer`…). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** Per-attempt timeout applied by the chain (default 120 s). */
  readonly timeoutMs?: number | undefined
  /** Attempts before failing over (default 3). */
  readonly maxAttempts?: number | undefined
  /** Response headers must arrive within this (default: `timeoutMs`). */
  readonly firstByteTimeoutMs?: number | undefined
  /** A stream or body silent for longer fails `timeout` (default: `timeoutMs`). */
  readonly idleTimeoutMs?: number | undefined
  /** Replies larger than this fail `server` (default 8 MiB). */
  readonly maxResponseBytes?: number | undefined
  /** Extra body fields on every request (`temperature`, `metadata`, a server's own knobs…). */
  readonly extraBody?: Readonly<Record<string, unknown>> | undefined
}

export interface Transport {
  readonly provider: string
  readonly client: HttpClient.HttpClient
  /** Response headers must arrive within this many milliseconds. */
  readonly firstByteTimeoutMs: number
  /** The body must make progress at least this often (milliseconds between chunks). */
  readonly idleTimeoutMs: number
  /** Bodies larger than this many bytes are cut off and fail `server`. */
  readonly maxResponseBytes: number
}

/** The transport of an adapter made with `options`: its bounds default to the attempt's timeout. */
export const transport = (options: CommonOptions, client: HttpClient.HttpClient, timeoutMs: number): Transport => ({
  provider: options.name,
  client,
  firstByteTimeoutMs: options.firstByteTimeoutMs ?? timeoutMs,
  idleTimeoutMs: options.idleTimeoutMs ?? timeoutMs,
  maxResponseBytes: options.maxResponseBytes ?? defaults(timeoutMs).maxResponseBytes
})

/**
 * The `ModelProvider` of an adapter: its name, model and vendor, the chain's per-attempt rules, and `complete`, which
 * streams (`streamed`) when the request takes deltas and asks for the whole reply (`once`) otherwise.
 */
export const provider = (
  options: CommonOptions,
  vendor: string,
  timeoutMs: number,
  once: (request: ModelRequest) => Effect.Effect<ModelReply, ProviderError>,
  streamed: (request: ModelRequest, onDelta: (text: string) => void) => Effect.Effect<ModelReply, ProviderError>
): ModelProvider => ({
  name: options.name,
  model: options.model,
  vendor,
  timeoutMs,
  maxAttempts: options.maxAttempts ?? defaultAttempt.maxAttempts,
  complete: (request) => {
    const onDelta = request.onDelta
    return onDelta === undefined ? once(request) : streamed(request, onDelta)
  }
})

/** Defaults for the edge timeouts and the size cap, given the provider's per-attempt timeout. */
export const defaults = (timeoutMs: number) => ({
  firstByteTimeoutMs: Math.min(timeoutMs, 60_000),
  idleTimeoutMs: Math.min(timeoutMs, 60_000),
  maxResponseBytes: 8 * 1024 * 1024
})

// Error bodies are read for classification only: a bounded prefix is plenty and a huge one must not be buffered.
const errorBodyBytes = 64 * 1024

/** A `ProviderError` for `provider`. */
export const fail = (
  transport: Transport,
  kind: ErrorKind,
  message: string,
  extra: { readonly status?: number; readonly retryAfterMs?: number; readonly usage?: Usage } = {}
): ProviderError =>
  new ProviderError({
    kind,
    message,
    provider: transport.provider,
    ...(extra.status !== undefined ? { status: extra.status } : {}),
    ...(extra.retryAfterMs !== undefined ? { retryAfterMs: extra.retryAfterMs } : {}),
    ...(extra.usage !== undefined && extra.usage.total > 0 ? { usage: extra.usage } : {})
  })

const causeText = (cause: unknown): string => {
  if (cause instanceof Error) {
    const inner = cause.cause instanceof Error ? `: ${cause.cause.message}` : ""
    return `${cause.message}${inner}`
  }
  return String(cause)
}

const requestFailed = (transport: Transport, error: HttpClientError.HttpClientError): ProviderError => {
  if (error._tag === "RequestError" && error.reason !== "Transport") {
    return fail(transport, "bad_request", `could not send the request (${error.reason}): ${causeText(error.cause)}`)
  }
  // Refused, reset, DNS, TLS: the request may never have reached the model; transient, like a timeout.
  return fail(transport, "timeout", `connection to ${transport.provider} failed: ${causeText(error.cause)}`)
}

// A pooled keep-alive connection that the server closed while it sat idle fails the NEXT request with a reset
// before any byte of the response: that request was never processed, and the provider is not at fault. It is
// retried at once, at most twice, so a stale pool is not reported (nor counted by the storm guard) as a failure.
const staleConnectionRetries = 2
const staleConnection = (error: HttpClientError.HttpClientError): boolean =>
  error._tag === "RequestError" && error.reason === "Transport" &&
  /ECONNRESET|EPIPE|UND_ERR_SOCKET|other side closed|socket hang up/i.test(describeCause(error.cause))

const describeCause = (cause: unknown): string => {
  if (!(cause instanceof Error)) return String(cause)
  const code = "code" in cause ? String(cause.code) : ""
  return `${code} ${cause.message} ${cause.cause === undefined ? "" : describeCause(cause.cause)}`
}

const dropped = (transport: Transport, status: number, cause: unknown): ProviderError =>
  fail(transport, "timeout", `connection dropped while reading the reply: ${causeText(cause)}`, { status })

const stalled = (transport: Transport, status: number): ProviderError =>
  fail(transport, "timeout", `the reply stalled: no data for ${transport.idleTimeoutMs} ms`, { status })

const tooLarge = (transport: Transport, status: number): ProviderError =>
  fail(transport, "server", `the reply exceeded ${transport.maxResponseBytes} bytes; read stopped`, { status })

/**
 * Reads the body of `response` chunk by chunk (`chunk`: `true` reads on, `false` stops, an error fails), failing
 * `timeout` when it stalls for `idleTimeoutMs` or the connection drops, and `server` once more than
 * `maxResponseBytes` have arrived (the read stops there). An interrupted read closes the connection.
 */
export const readBounded = (
  transport: Transport,
  response: HttpClientResponse.HttpClientResponse,
  chunk: (bytes: Uint8Array) => boolean | ProviderError,
  end: () => ProviderError | undefined = () => undefined
): Effect.Effect<void, ProviderError> => {
  let size = 0
  return ReadBody.read(response, {
    idleTimeoutMs: transport.idleTimeoutMs,
    stalled: () => stalled(transport, response.status),
    dropped: (cause) => dropped(transport, response.status, cause),
    chunk: (bytes) => {
      size += bytes.length
      return size > transport.maxResponseBytes ? tooLarge(transport, response.status) : chunk(bytes)
    },
    end
  })
}

/** The whole body as UTF-8 text, bounded by `maxResponseBytes`. Fails `timeout` (stall, drop) or `server` (size). */
export const text = (
  transport: Transport,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<string, ProviderError> =>
  Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    return Effect.map(
      readBounded(transport, response, (bytes) => chunks.push(bytes) > 0),
      () => Buffer.concat(chunks).toString("utf8")
    )
  })

/**
 * Reads an SSE body (bounded like `text`) and hands each event to `handle` as it completes, synchronously: `true`
 * reads on, `false` stops (the rest of the body is discarded), an error fails the read. UTF-8 is decoded across
 * chunk boundaries; an event left without its blank line at the end of the body is still handed over.
 */
export const events = (
  transport: Transport,
  response: HttpClientResponse.HttpClientResponse,
  handle: (event: Sse.SseEvent) => boolean | ProviderError
): Effect.Effect<void, ProviderError> =>
  Effect.suspend(() => {
    const parser = Sse.makeParser()
    const decoder = new TextDecoder("utf-8")
    const dispatch = (events: ReadonlyArray<Sse.SseEvent>): boolean | ProviderError => {
      for (const event of events) {
        const verdict = handle(event)
        if (verdict !== true) return verdict
      }
      return true
    }
    return readBounded(
      transport,
      response,
      (bytes) => dispatch(parser.feed(decoder.decode(bytes, { stream: true }))),
      () => {
        const rest = decoder.decode()
        const verdict = dispatch([...(rest === "" ? [] : parser.feed(rest)), ...parser.end()])
        return typeof verdict === "boolean" ? undefined : verdict
      }
    )
  })

// The first `errorBodyBytes` of an error body; whatever goes wrong while reading it, the status still classifies.
const errorText = (transport: Transport, response: HttpClientResponse.HttpClientResponse): Effect.Effect<string> =>
  Effect.suspend(() => {
    const chunks: Array<Uint8Array> = []
    let size = 0
    return readBounded(transport, response, (bytes) => {
      chunks.push(bytes)
      size += bytes.length
      return size < errorBodyBytes
    }).pipe(
      Effect.map(() => Buffer.concat(chunks).toString("utf8").slice(0, errorBodyBytes)),
      Effect.orElseSucceed(() => "")
    )
  })

const ErrorBody = Schema.Union(
  // OpenAI, Anthropic, vLLM, OpenRouter: `{ error: { message, type, code } }`.
  Schema.Struct({
    error: Schema.Struct({
      message: Schema.optional(Schema.NullOr(Schema.String)),
      type: Schema.optional(Schema.NullOr(Schema.String)),
      code: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Number)))
    })
  }),
  // Ollama, llama.cpp (older): `{ error: "text" }`.
  Schema.Struct({ error: Schema.String }),
  // FastAPI-style servers: `{ detail: "text" }` or `{ message: "text" }`.
  Schema.Struct({ detail: Schema.String }),
  Schema.Struct({ message: Schema.String })
)
const decodeErrorBody = Schema.decodeUnknownOption(ErrorBody)

/** The provider's error type/code and message in a JSON error body (any common shape), if there is one. */
export const errorDetail = (
  json: unknown
): { readonly type: string | number | undefined; readonly message: string } | undefined => {
  const decoded = decodeErrorBody(json)
  if (decoded._tag === "None") return undefined
  const value = decoded.value
  if ("detail" in value) return { type: undefined, message: value.detail }
  if ("message" in value) return { type: undefined, message: value.message }
  if (typeof value.error === "string") return { type: undefined, message: value.error }
  return {
    type: value.error.code ?? value.error.type ?? undefined,
    message: value.error.message ?? ""
  }
}

/** Whether the response declares a JSON body (rather than an event stream). */
export const isJson = (response: HttpClientResponse.HttpClientResponse): boolean =>
  /\bjson\b/i.test(response.headers["content-type"] ?? "")

/** Parses JSON without throwing. */
export const parseJson = (raw: string): Either.Either<unknown, unknown> =>
  Either.try({ try: (): unknown => JSON.parse(raw), catch: (cause) => cause })

const excerpt = (raw: string, max = 300): string => {
  const oneLine = raw.replace(/\s+/g, " ").trim()
  return oneLine.length > max ? `${oneLine.slice(0, max)}…` : oneLine
}

/**
 * The classified error for a non-2xx reply: kind from the status and the body (`classifyStatus`), Retry-After
 * from the headers (uncapped), usage if the body reports it, the status always — even when the body is not JSON.
 */
export const statusError = (
  transport: Transport,
  response: HttpClientResponse.HttpClientResponse
): Effect.Effect<ProviderError> =>
  Effect.gen(function*() {
    const raw = yield* errorText(transport, response)
    const now = yield* Clock.currentTimeMillis
    const json = Either.getOrUndefined(parseJson(raw))
    const detail = errorDetail(json)
    const retryAfterMs = parseRetryAfter(response.headers, now)
    const usage = WireUsage.inErrorBody(json)
    const said = detail !== undefined && detail.message !== "" ? detail.message : excerpt(raw)
    return fail(
      transport,
      classifyStatus(response.status, raw),
      `HTTP ${response.status}${said === "" ? "" : `: ${said}`}`,
      {
        status: response.status,
        ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
        ...(usage !== undefined ? { usage } : {})
      }
    )
  })

/**
 * POSTs `payload` as JSON to `url` and returns the response once its headers arrived with a 2xx status. Fails
 * with the classified error for a non-2xx status (body read, bounded), `timeout` when no headers arrive within
 * `firstByteTimeoutMs` or the connection fails, `bad_request` when the request cannot be built.
 */
export const post = (
  transport: Transport,
  url: string,
  headers: Readonly<Record<string, string>>,
  payload: unknown
): Effect.Effect<HttpClientResponse.HttpClientResponse, ProviderError> =>
  Effect.gen(function*() {
    const request = HttpClientRequest.post(url).pipe(
      HttpClientRequest.setHeaders(headers),
      HttpClientRequest.bodyUnsafeJson(payload)
    )
    // The HTTP client's request span goes under the model attempt that sends it (a leaf span: see Spans).
    const sent = Spans.asParentOfOthers(transport.client.execute(request)).pipe(
      Effect.retry({ times: staleConnectionRetries, while: staleConnection }),
      Effect.mapError((error) => requestFailed(transport, error))
    )
    // One fiber per request, not `timeoutFail`'s two (its race forks the request and the timer): the request runs on
    // a child fiber that the caller awaits under the deadline (internal/boundedWait.ts). As with `timeoutFail`, at
    // the deadline the request is interrupted (aborted) and waited for before the caller fails, and an interrupted
    // caller interrupts it and waits too; being a child, it also ends with a caller interrupted before the wait began.
    const response = yield* Effect.flatMap(Effect.fork(sent), (sending) =>
      BoundedWait.joinWithin(sending, {
        duration: transport.firstByteTimeoutMs,
        onTimeout: () =>
          fail(transport, "timeout", `no response from ${transport.provider} within ${transport.firstByteTimeoutMs} ms`)
      }))
    if (response.status >= 200 && response.status < 300) return response
    return yield* Effect.flip(statusError(transport, response))
  })

/**
 * Decodes `raw` (a 2xx body, or one event's data) as JSON against `schema`, synchronously. Fails `server` when it
 * is not JSON or not the expected shape (the status is kept). `schema` must not be asynchronous.
 */
export const decodeJsonEither = <A, I>(
  transport: Transport,
  schema: Schema.Schema<A, I>,
  raw: string,
  status: number
): Either.Either<A, ProviderError> => {
  const json = parseJson(raw)
  if (Either.isLeft(json)) {
    return Either.left(fail(transport, "server", `the reply was not valid JSON: ${excerpt(raw, 120)}`, { status }))
  }
  return Either.mapLeft(Schema.decodeUnknownEither(schema)(json.right), (error) =>
    fail(
      transport,
      "server",
      `the reply did not have the expected shape: ${excerpt(ParseResult.TreeFormatter.formatErrorSync(error))}`,
      { status }
    ))
}

/** `decodeJsonEither` as an Effect. */
export const decodeJson = <A, I>(
  transport: Transport,
  schema: Schema.Schema<A, I>,
  raw: string,
  status: number
): Effect.Effect<A, ProviderError> => decodeJsonEither(transport, schema, raw, status)
