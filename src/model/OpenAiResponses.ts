/**
 * OpenAiResponses — the OpenAI Responses API (`POST {baseUrl}/responses`) over `HttpClient`: OpenAI's API for its
 * reasoning models (`gpt-5*`, `o3`, `o4-mini`…), and the one over which their reasoning survives tool turns.
 *
 * Stateless: every request is `store: false` and carries the whole conversation as `input` items, so nothing
 * depends on OpenAI keeping a response (zero-data-retention organisations cannot store at all), and a session
 * replays, prunes and fails over as with any other adapter. The wire rules the mapping obeys:
 * - The system prompt is `instructions`; user turns and notices are `user` messages of `input_text` (`Render`).
 * - Reasoning travels back as the model's own `reasoning` items, FIRST in the assistant turn they came with and
 *   before its message and `function_call`s, because a reasoning item must be followed by the items it led to
 *   ("Item 'rs_…' of type 'reasoning' was provided without its required following item"): so an assistant turn with
 *   neither text nor calls is left out whole. With `store: false` the API reads a reasoning item only from its
 *   `encrypted_content` (an id alone is refused: "Item with id 'rs_…' not found. Items are not persisted when
 *   `store` is set to false"), so a part without it is not sent. Only this provider's parts go back
 *   (`Reasoning.ownParts`), verbatim: the API verifies the encrypted content.
 * - `include: ["reasoning.encrypted_content"]` is sent when `reasoning` is configured, the case in which reasoning
 *   items are asked for; a model that reasons without it still returns items, which are sent back only when they
 *   carry their encrypted content.
 * - `function_call` items go back WITHOUT their `fc_…` item `id`. The API pairs a call with its output by `call_id`;
 *   a function_call carrying an item id is refused unless the reasoning item issued with it immediately precedes it
 *   ("Item 'fc_…' of type 'function_call' was provided without its required 'reasoning' item: 'rs_…'"), which a
 *   failover or a reasoning part left out (no encrypted content) would break. OpenAI's own stateless client
 *   (Codex) sends reasoning, messages and function calls without item ids in the same way, so the API accepts it.
 * - All of a turn's `function_call`s come before all of its `function_call_output`s (the transcript's order), the
 *   grouping the API expects after a reasoning item; every output answers a call sent in the same request.
 * - Tool outputs are `function_call_output` items; the images tools returned go in the output as `input_image`
 *   parts (`attachments: "send"`, the default); audio, which a function output cannot carry, stays described.
 * - Finalize asks for JSON with `text.format` `json_schema` (`strict: false`: strict mode refuses schemas that do not
 *   list every property as required). The API has no stop sequences (`stop` is an unknown parameter): none are
 *   sent and the caller cuts. `max_output_tokens` (reasoning included) is the lower of `maxOutputTokens` and the
 *   request's own cap, and at least 16, the API's minimum. `prompt_cache_key` is the session (`request.cacheKey`)
 *   unless `promptCacheKey: false`.
 *
 * Replies: `reasoning` items → reasoning parts (provider = `options.name`); `output_text` → text; a `refusal` →
 * finish `refused`; `function_call`s → tool calls (`call_id` as the id); `status: "incomplete"` → `length`
 * (`max_output_tokens`) or `filtered` (`content_filter`); `status: "failed"` → its `error`, classified. Usage:
 * cached input tokens → `cacheReadTokens`, reasoning tokens → `reasoningTokens` (inside `outputTokens`).
 *
 * Streaming (`onDelta`): `stream: true`; `response.output_text.delta` goes to `onDelta` as it arrives; the reply is
 * assembled from the completed items (`response.output_item.done`, or the terminal event's `response.output`),
 * which are authoritative — the `encrypted_content` of an `added` item may be partial. A stream ended by
 * `response.failed` or an `error` event fails classified; one that ends without `response.completed` /
 * `response.incomplete` fails `server`, never with half a reply.
 */
import type { HttpClientResponse } from "@effect/platform"
import { HttpClient } from "@effect/platform"
import { Effect, Either, Redacted as R } from "effect"
import type { Layer } from "effect"
import type { ErrorKind } from "../domain/ErrorKind.js"
import type { FinishReason, ModelReply, ReasoningPart, ToolCall, ToolResult, TurnEntry } from "../domain/Message.js"
import type { Usage } from "../domain/Usage.js"
import * as Http from "./internal/http.js"
import * as Wire from "./internal/responsesWire.js"
import type * as Sse from "./internal/sse.js"
import * as WireUsage from "./internal/usage.js"
import type { ModelProvider, ModelRequest } from "./ModelProvider.js"
import { defaultAttempt, defaultTier, Providers } from "./ModelProvider.js"
import type { ProviderError } from "./ProviderError.js"
import { classifyErrorType } from "./ProviderError.js"
import * as Reasoning from "./Reasoning.js"
import * as Render from "./Render.js"

/** How hard a reasoning model thinks, and whether it returns a summary of its reasoning. */
export interface ReasoningOptions {
  readonly effort: "minimal" | "low" | "medium" | "high"
  readonly summary?: "auto" | "concise" | "detailed" | undefined
}

/** How to reach one model over the Responses API. */
export interface Options extends Http.CommonOptions {
  /** The API root including its version segment (default `https://api.openai.com/v1`). */
  readonly baseUrl?: string | undefined
  /**
   * Whether images tools returned are sent (`send`, the default: `input_image` parts of the call's output) or left
   * to their text description (`describe`, for models without vision).
   */
  readonly attachments?: "send" | "describe" | undefined
  /** `reasoning: { effort, summary }` on every call (reasoning models only); absent: the model's default. */
  readonly reasoning?: ReasoningOptions | undefined
  /** A cap on every call's output, reasoning included (`max_output_tokens`); absent: none but a request's own. */
  readonly maxOutputTokens?: number | undefined
  /** Whether `prompt_cache_key` carries the request's cache key (the session id) — default true. */
  readonly promptCacheKey?: boolean | undefined
}

/** The default API root. */
export const defaultBaseUrl = "https://api.openai.com/v1"

// ---------------------------------------------------------------------------------------------------------------
// Request mapping

type WireOut = Record<string, unknown>

/**
 * The `input` items for `request`, as `provider` (this adapter's configured name) may send them, by the rules of
 * the module comment: only its own reasoning items with their encrypted content, first in their turn; function
 * calls without item ids; an assistant turn with neither text nor calls left out whole. Never fails.
 */
export const toInput = (
  request: Pick<ModelRequest, "messages">,
  provider: string,
  attachments: "send" | "describe" = "send"
): Array<WireOut> => {
  const out: Array<WireOut> = []
  for (const entry of request.messages) out.push(...entryItems(entry, provider, attachments))
  return out
}

const userMessage = (text: string): WireOut => ({ role: "user", content: [{ type: "input_text", text }] })

const reasoningItem = (part: Extract<ReasoningPart, { type: "reasoning" }>): WireOut => ({
  type: "reasoning",
  id: part.id,
  encrypted_content: part.encryptedContent,
  summary: part.summary.map((text) => ({ type: "summary_text", text }))
})

const entryItems = (entry: TurnEntry, provider: string, attachments: "send" | "describe"): Array<WireOut> => {
  switch (entry.kind) {
    case "user":
      return [userMessage(Render.userText(entry))]
    case "notice":
      return [userMessage(Render.noticeText(entry))]
    case "assistant": {
      // A reasoning item with nothing after it is refused, and an empty assistant message tells the model nothing.
      if (entry.text === "" && entry.toolCalls.length === 0) return []
      const items: Array<WireOut> = []
      for (const part of Reasoning.ownParts(entry, provider)) {
        if (part.type === "reasoning" && part.encryptedContent !== undefined && part.encryptedContent !== "") {
          items.push(reasoningItem(part))
        }
      }
      if (entry.text !== "") {
        items.push({ type: "message", role: "assistant", content: [{ type: "output_text", text: entry.text }] })
      }
      for (const call of entry.toolCalls) {
        items.push({ type: "function_call", call_id: call.id, name: call.name, arguments: call.arguments })
      }
      return items
    }
    case "tool_results":
      return entry.results.map((result) => ({
        type: "function_call_output",
        call_id: result.callId,
        output: output(result, attachments)
      }))
  }
}

/** A call's output: its text, or (with images to send) its text and images as input parts. */
const output = (result: ToolResult, attachments: "send" | "describe"): string | Array<WireOut> => {
  const images = attachments === "send" ? (result.attachments ?? []).filter((a) => a.type === "image") : []
  if (images.length === 0) return result.content
  return [
    { type: "input_text", text: result.content },
    ...images.map((image) => ({ type: "input_image", image_url: `data:${image.mimeType};base64,${image.data}` }))
  ]
}

// The API refuses a `max_output_tokens` below 16 ("integer below minimum value"); a smaller cap asks for 16.
const minOutputTokens = 16

const body = (options: Options, request: ModelRequest, stream: boolean): WireOut => {
  const payload: WireOut = {
    ...options.extraBody,
    model: options.model,
    input: toInput(request, options.name, options.attachments ?? "send"),
    store: false
  }
  if (request.system !== "") payload.instructions = request.system
  if (request.tools.length > 0) {
    payload.tools = request.tools.map((tool) => ({
      type: "function",
      name: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      strict: false
    }))
  }
  if (options.reasoning !== undefined) {
    payload.reasoning = {
      effort: options.reasoning.effort,
      ...(options.reasoning.summary !== undefined ? { summary: options.reasoning.summary } : {})
    }
    payload.include = ["reasoning.encrypted_content"]
  }
  const caps = [options.maxOutputTokens, request.maxTokens].filter((n): n is number => n !== undefined)
  if (caps.length > 0) payload.max_output_tokens = Math.max(minOutputTokens, Math.min(...caps))
  if ((options.promptCacheKey ?? true) && request.cacheKey !== undefined) payload.prompt_cache_key = request.cacheKey
  if (request.responseSchema !== undefined) {
    payload.text = { format: { type: "json_schema", name: "report", schema: request.responseSchema, strict: false } }
  }
  if (stream) payload.stream = true
  return payload
}

// ---------------------------------------------------------------------------------------------------------------
// Reply mapping

/** What a response's output items say, in their order. */
interface Assembled {
  readonly text: string
  readonly refusal: string
  readonly toolCalls: ReadonlyArray<ToolCall>
  readonly reasoning: ReadonlyArray<ReasoningPart>
}

const assemble = (items: ReadonlyArray<Wire.OutputItem>, provider: string): Assembled => {
  const text: Array<string> = []
  const refusal: Array<string> = []
  const toolCalls: Array<ToolCall> = []
  const reasoning: Array<ReasoningPart> = []
  for (const item of items) {
    switch (item.type) {
      case "message":
        for (const part of item.content ?? []) {
          if (part.type === "output_text") text.push(part.text ?? "")
          else if (part.type === "refusal") refusal.push(part.refusal ?? "")
        }
        break
      case "function_call":
        toolCalls.push({ id: item.call_id ?? item.id ?? "", name: item.name ?? "", arguments: item.arguments ?? "" })
        break
      case "reasoning":
        if (item.id === null || item.id === undefined) break
        reasoning.push({
          type: "reasoning",
          provider,
          id: item.id,
          ...(item.encrypted_content !== null && item.encrypted_content !== undefined
            ? { encryptedContent: item.encrypted_content }
            : {}),
          summary: (item.summary ?? []).map((part) => part.text ?? "")
        })
        break
    }
  }
  return { text: text.join(""), refusal: refusal.join(""), toolCalls, reasoning }
}

/** The normalised finish reason for a response's status, given what its output carried. */
export const finishReason = (
  status: string | null | undefined,
  incomplete: string | null | undefined,
  reply: { readonly toolCalls: number; readonly refusal: boolean }
): FinishReason => {
  if (reply.refusal) return "refused"
  switch (status) {
    case "incomplete":
      return incomplete === "content_filter" ? "filtered" : incomplete === "max_output_tokens" ? "length" : "unknown"
    case "completed":
    case null:
    case undefined:
      return reply.toolCalls > 0 ? "tool_calls" : "stop"
    default:
      return "unknown"
  }
}

// `response.error.code`s that describe the request (its prompt, its images), not the service: they would fail
// again on a retry, so they classify like a 400 with the same message.
const requestCodes = /^(invalid_prompt|bio_policy|data_residency_mismatch|.*image.*)$/

/** A failed response's (or an `error` event's) error, classified like an HTTP error carrying it. */
const responseError = (
  transport: Http.Transport,
  error: Wire.ResponseError | null | undefined,
  usage: Usage | undefined,
  status: number
): ProviderError => {
  const code = error?.code ?? error?.type ?? undefined
  const message = error?.message ?? "the response failed without an error"
  const kind: ErrorKind = typeof code === "string" && requestCodes.test(code)
    ? classifyErrorType(400, `${code} ${message}`)
    : classifyErrorType(code ?? undefined, message)
  return Http.fail(transport, kind, `the response failed: ${code !== undefined ? `${code}: ` : ""}${message}`, {
    status,
    ...(usage !== undefined ? { usage } : {})
  })
}

// ---------------------------------------------------------------------------------------------------------------
// The adapter

/**
 * A Responses API provider. Needs an `HttpClient` once, here; `complete` then needs nothing. `complete` fails only
 * with a classified `ProviderError`: HTTP statuses per `classifyStatus` (status and Retry-After kept: a 429 is
 * `rate_limit`, or `quota` with `insufficient_quota`; `context_length_exceeded` is `context_overflow`), a slow first
 * byte, a stalled or dropped body → `timeout`, malformed or oversized replies and a stream without its terminal
 * event → `server`, a `failed` response or an `error` event → classified by its code. An incomplete response, a
 * refusal or a content filter is a reply with finish reason `length` / `refused` / `filtered`, not an error.
 */
export const make = (options: Options): Effect.Effect<ModelProvider, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const timeoutMs = options.timeoutMs ?? defaultAttempt.timeoutMs
    const transport = Http.transport(options, client, timeoutMs)
    const url = `${(options.baseUrl ?? defaultBaseUrl).replace(/\/+$/, "")}/responses`

    const headers = (stream: boolean): Record<string, string> => ({
      ...options.headers,
      accept: stream ? "text/event-stream" : "application/json",
      ...(options.apiKey !== undefined ? { authorization: `Bearer ${R.value(options.apiKey)}` } : {})
    })

    /** The reply a finished response makes, or its classified error when it failed. */
    const toReply = (
      response: Wire.Response,
      items: ReadonlyArray<Wire.OutputItem>,
      status: number,
      raw: unknown
    ): Either.Either<ModelReply, ProviderError> => {
      const usage = WireUsage.fromResponses(response.usage)
      if (response.status === "failed" || (response.error !== null && response.error !== undefined)) {
        return Either.left(responseError(transport, response.error, usage, status))
      }
      const out = assemble(items, options.name)
      const refused = out.refusal !== ""
      return Either.right({
        text: refused && out.text === "" ? out.refusal : out.text,
        toolCalls: out.toolCalls,
        finishReason: finishReason(response.status, response.incomplete_details?.reason, {
          toolCalls: out.toolCalls.length,
          refusal: refused
        }),
        ...(out.reasoning.length > 0 ? { reasoning: out.reasoning } : {}),
        usage,
        model: response.model ?? options.model,
        raw
      })
    }

    const once = (request: ModelRequest): Effect.Effect<ModelReply, ProviderError> =>
      Effect.flatMap(Http.post(transport, url, headers(false), body(options, request, false)), whole)

    // Generator functions made once per provider (`fnUntraced`), not per request: see session/Loop's `iteration`.
    const whole: (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<ModelReply, ProviderError> = Effect
      .fnUntraced(function*(response: HttpClientResponse.HttpClientResponse) {
        const raw = yield* Http.text(transport, response)
        const wire = yield* Http.decodeJson(transport, Wire.Response, raw, response.status)
        return yield* toReply(wire, wire.output ?? [], response.status, Either.getOrUndefined(Http.parseJson(raw)))
      })

    const streamed = Effect.fnUntraced(function*(request: ModelRequest, onDelta: (text: string) => void) {
      const response = yield* Http.post(transport, url, headers(true), body(options, request, true))
      // A gateway that ignores `stream: true` answers with one JSON body: take it whole, one delta.
      if (Http.isJson(response)) {
        const reply = yield* whole(response)
        if (reply.text !== "") onDelta(reply.text)
        return reply
      }
      const state = {
        items: [] as Array<Wire.OutputItem | undefined>,
        text: [] as Array<string>,
        id: undefined as string | undefined,
        model: undefined as string | undefined,
        terminal: undefined as Wire.Response | undefined
      }
      // Synchronous: it runs as each chunk arrives, with no effect per event.
      const handle = (event: Sse.SseEvent): boolean | ProviderError => {
        const data = event.data.trim()
        if (data === "" || data === "[DONE]") return true
        const decoded = Http.decodeJsonEither(transport, Wire.StreamEvent, data, response.status)
        if (Either.isLeft(decoded)) return decoded.left
        const wire = decoded.right
        switch (wire.type) {
          case "response.created":
          case "response.in_progress":
            state.id ??= wire.response?.id ?? undefined
            state.model ??= wire.response?.model ?? undefined
            return true
          case "response.output_text.delta": {
            const text = wire.delta ?? ""
            if (text !== "") {
              state.text.push(text)
              onDelta(text)
            }
            return true
          }
          case "response.output_item.done":
            if (wire.item !== null && wire.item !== undefined) {
              state.items[wire.output_index ?? state.items.length] = wire.item
            }
            return true
          case "response.completed":
          case "response.incomplete":
          case "response.failed":
            state.terminal = wire.response ?? { status: wire.type.slice("response.".length) }
            return false
          case "error":
            return responseError(
              transport,
              wire.error ?? { code: wire.code ?? null, message: wire.message ?? null },
              undefined,
              response.status
            )
          default:
            // Added items, argument and summary deltas, content parts: the done items carry all of it, whole.
            return true
        }
      }
      yield* Http.events(transport, response, handle)
      const terminal = state.terminal
      if (terminal === undefined) {
        return yield* Effect.fail(
          Http.fail(transport, "server", "the stream ended before the response completed", {
            status: response.status
          })
        )
      }
      const done = state.items.filter((item): item is Wire.OutputItem => item !== undefined)
      const items = terminal.output !== null && terminal.output !== undefined && terminal.output.length > 0
        ? terminal.output
        : done
      const reply = yield* toReply(
        { ...terminal, model: terminal.model ?? state.model ?? null },
        items,
        response.status,
        { streamed: true, id: terminal.id ?? state.id, status: terminal.status ?? null }
      )
      // Text that streamed in deltas but whose message item never arrived whole is still the model's text.
      if (reply.text === "" && state.text.length > 0 && !items.some((item) => item.type === "message")) {
        return { ...reply, text: state.text.join("") }
      }
      return reply
    })

    return Http.provider(options, "openai", timeoutMs, once, streamed)
  })

/**
 * A Responses API provider as the only route: the `default` tier (`defaultTier`) is this one model. For several
 * tiers or a failover order, list `make(...)` effects in `Providers.layer`. Needs an `HttpClient`; never fails.
 */
export const layer = (options: Options): Layer.Layer<Providers, never, HttpClient.HttpClient> =>
  Providers.layer({ [defaultTier]: [make(options)] })
