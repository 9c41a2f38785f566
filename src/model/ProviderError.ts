/**
 * Provider failures at the adapter edge. The error types live in `domain/` (they serialise to the store, HTTP and
 * RPC); this module re-exports them with the helpers every adapter uses to classify a failure ONCE, where the wire
 * is still visible: an HTTP status + body → an `ErrorKind`, response headers → a Retry-After in milliseconds.
 * Nothing past the adapter looks at a status code or a header again; the chain decides by `kind` alone.
 */
import type { ErrorKind } from "../domain/ErrorKind.js"
import { ProviderError } from "../domain/Errors.js"
import * as QuotaPatterns from "./QuotaPatterns.js"

export { type Disposition, disposition, ErrorKind } from "../domain/ErrorKind.js"
export { ProviderError, ProviderExhausted } from "../domain/Errors.js"

// Context-length phrasings, one per family of servers: OpenAI / vLLM / DeepSeek / OpenRouter ("maximum context
// length"), Anthropic ("prompt is too long"), vLLM ≥ 0.6 ("too long to fit into the model"), llama.cpp ("exceeds
// the available context size", `exceed_context_size_error`), Ollama ("input length exceeds maximum context length",
// "prompt too long"), Mistral ("too large for model with N maximum context length"), Gemini ("input token count
// ... exceeds the maximum"), Bedrock ("input is too long"), TGI ("`inputs` tokens + `max_new_tokens` must be"),
// Groq ("reduce the length of the messages").
const overflowPattern = new RegExp(
  [
    "context[_ ]length",
    "context[_ ]window",
    "context size",
    "maximum context",
    "exceed_context_size",
    "prompt is too long",
    "prompt too long",
    "input is too long",
    "too long to fit",
    "too many tokens",
    "exceeds? the (available )?context",
    "input length exceeds",
    "input token count.{0,40}exceeds",
    "tokens \\+ `?max_new_tokens`? must be",
    "reduce the length of the messages"
  ].join("|")
)
const filterPattern = /content[_ ]filter|content management policy|responsible ?ai|safety system/
const overloadPattern = /overloaded/

/**
 * Classifies a non-2xx HTTP reply. The body matters because providers reuse statuses: a 429 may be a rate limit
 * (retry) or an exhausted quota (fail over, per `QuotaPatterns`), a 400 may be a context overflow, a content filter or a low credit
 * balance. 401/403 → `auth`; 402 → `quota`; 408/504 → `timeout`; 413 → `context_overflow`; 503/529 or an
 * "overloaded" body → `overloaded`; other 5xx → `server`; other 4xx → `bad_request`; anything else (not an HTTP
 * error status at all) → `server`, which retries. Never throws.
 */
export const classifyStatus = (status: number, body: string): ErrorKind => {
  const text = body.toLowerCase()
  if (status === 401 || status === 403) return "auth"
  if (status === 402) return "quota"
  if (status === 408 || status === 504) return "timeout"
  if (status === 413) return "context_overflow"
  if (status === 429) {
    return QuotaPatterns.matches(text)
      ? "quota"
      : overloadPattern.test(text)
      ? "overloaded"
      : "rate_limit"
  }
  if (status === 503 || status === 529) return "overloaded"
  if (status >= 500 && status < 600) return overloadPattern.test(text) ? "overloaded" : "server"
  if (status >= 400 && status < 500) {
    if (overflowPattern.test(text)) return "context_overflow"
    if (filterPattern.test(text)) return "filtered"
    if (QuotaPatterns.matches(text)) return "quota"
    return "bad_request"
  }
  return "server"
}

// Error types and codes that arrive without an HTTP status (an error event inside a 200 stream), mapped to the
// status the same provider uses for them, so one table — `classifyStatus` — decides for both paths.
const statusByErrorType: Readonly<Record<string, number>> = {
  // Anthropic `error.type`
  authentication_error: 401,
  permission_error: 403,
  billing_error: 402,
  not_found_error: 404,
  request_too_large: 413,
  rate_limit_error: 429,
  api_error: 500,
  timeout_error: 504,
  overloaded_error: 529,
  invalid_request_error: 400,
  // OpenAI `error.code` / `error.type`
  invalid_api_key: 401,
  insufficient_quota: 429,
  rate_limit_exceeded: 429,
  context_length_exceeded: 400,
  server_error: 500,
  content_filter: 400
}

/**
 * Classifies an error reported inside a stream (or a body without a usable status): `type` is the provider's
 * error type or code (`overloaded_error`, `rate_limit_exceeded`, an HTTP-like number as OpenRouter sends…),
 * `message` its text. Unknown types fall back to the message; with no clue at all → `server` (retried). Never throws.
 */
export const classifyErrorType = (type: string | number | undefined, message: string): ErrorKind => {
  const status = typeof type === "number"
    ? type
    : type !== undefined && /^\d{3}$/.test(type)
    ? Number(type)
    : type !== undefined
    ? statusByErrorType[type]
    : undefined
  const text = `${type ?? ""} ${message}`
  if (status !== undefined && status >= 400) return classifyStatus(status, text)
  if (overflowPattern.test(text.toLowerCase())) return "context_overflow"
  return classifyStatus(500, text)
}

/** Response headers as adapters see them (`@effect/platform` Headers is such a record); names match in any case. */
export type HeaderRecord = Readonly<Record<string, string | ReadonlyArray<string> | undefined>>

const header = (headers: HeaderRecord, name: string): string | undefined => {
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name) continue
    return typeof value === "string" ? value : value?.[0]
  }
  return undefined
}

/**
 * The provider's requested wait in whole milliseconds (rounded up), UNCAPPED — the chain applies the cap. Reads
 * `retry-after-ms` (OpenAI, Azure) first, then `retry-after` as delta-seconds or an HTTP date relative to `now`
 * (epoch milliseconds; a date in the past → 0). Absent or unparseable → `undefined` (the chain then backs off).
 */
export const parseRetryAfter = (headers: HeaderRecord, now: number): number | undefined => {
  const millis = header(headers, "retry-after-ms")?.trim()
  if (millis !== undefined && /^\d+(\.\d+)?$/.test(millis)) return Math.ceil(Number(millis))
  const value = header(headers, "retry-after")?.trim()
  if (value === undefined || value === "") return undefined
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000)
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil(date - now))
}

/**
 * `error` with `provider` set to `name` when the adapter left it empty, so trajectories and exhaustion messages
 * always say which provider failed. An error that already names its provider is returned unchanged.
 */
export const withProvider = (error: ProviderError, name: string): ProviderError =>
  error.provider !== undefined ? error : new ProviderError({ ...fieldsOf(error), provider: name })

const fieldsOf = (error: ProviderError): ConstructorParameters<typeof ProviderError>[0] => ({
  kind: error.kind,
  message: error.message,
  ...(error.provider !== undefined ? { provider: error.provider } : {}),
  ...(error.status !== undefined ? { status: error.status } : {}),
  ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}),
  ...(error.usage !== undefined ? { usage: error.usage } : {})
})

/** A one-line description for logs and exhaustion messages: `provider: kind (status): message`. */
export const describe = (error: ProviderError): string =>
  `${error.provider ?? "provider"}: ${error.kind}${
    error.status !== undefined ? ` (${error.status})` : ""
  }: ${error.message}`
