/**
 * OpenAiCompat — the Chat Completions wire format over `HttpClient`, for OpenAI and every server that imitates it
 * (Ollama, vLLM, llama.cpp, LM Studio, OpenRouter, Groq, Together…).
 *
 * Our own rather than a library's because compatible servers differ in what they omit: `message.refusal`, `usage`,
 * `finish_reason` (null), tool call ids, `index` on streamed tool-call fragments. Every wire field is therefore
 * optional here, and a missing one gets the most plausible value (a reply with tool calls and no finish reason
 * asked for tools). Every failure is classified once, in `internal/http` and here, into a `ProviderError` kind.
 *
 * Structured output (the landing's finalize call): `response_format: { type: "json_schema", json_schema: { name,
 * schema, strict: false } }`. That is the one form OpenAI, vLLM, llama.cpp, Ollama (≥ 0.5) and LM Studio all accept
 * (LM Studio rejects `json_object`); `strict: false` because strict mode refuses schemas that do not list every
 * property as required. `responseFormat: "json_object"` or `"none"` switch it for servers that want otherwise.
 *
 * Streaming (when the request has `onDelta`): `stream: true` with `stream_options.include_usage`, every text
 * fragment handed to `onDelta` as it arrives, tool-call argument fragments concatenated per `index`. The reply is
 * returned only once the stream finished (`[DONE]` or a finish reason): a stream broken mid-way fails classified,
 * never with half a reply.
 *
 * Reasoning models (DESIGN §11). OpenAI's reasoning families (`gpt-5*`, `o<digit>*`) refuse `max_tokens` and want
 * `max_completion_tokens` (which counts their reasoning too); every other server knows `max_tokens` only, so the
 * parameter is chosen per model (`tokenParameterFor`) and is overridable. `reasoning` sets `reasoning_effort`.
 * Compatible servers that return their reasoning as text (`reasoning_content`: DeepSeek, vLLM; `reasoning`:
 * OpenRouter, Ollama) have it kept as `reasoning_text` parts, with the field it came in; it goes back, in that
 * field, on the assistant message that carried it only when `replayReasoning` is set, because some servers need it
 * back within a tool cycle and others refuse it with a 400. Other providers' parts are never sent.
 *
 * Prompt caching: OpenAI caches prefixes on its own; `prompt_cache_key` (the session id) routes one session's calls
 * to the same cache. Sent by default to api.openai.com only: compatible servers may refuse an unknown field.
 */
import type { HttpClientResponse } from "@effect/platform"
import { HttpClient } from "@effect/platform"
import { Effect, Either, Redacted as R } from "effect"
import type { Layer } from "effect"
import type { ErrorKind } from "../domain/ErrorKind.js"
import type { FinishReason, ModelReply, ReasoningPart, ToolCall, ToolResult, TurnEntry } from "../domain/Message.js"
import type { Usage } from "../domain/Usage.js"
import * as Http from "./internal/http.js"
import { Chunk, Completion, type ContentValue, type WireToolCall } from "./internal/openAiWire.js"
import type * as Sse from "./internal/sse.js"
import * as WireUsage from "./internal/usage.js"
import type { ModelProvider, ModelRequest } from "./ModelProvider.js"
import { defaultAttempt, defaultTier, Providers } from "./ModelProvider.js"
import type { ProviderError } from "./ProviderError.js"
import { classifyErrorType } from "./ProviderError.js"
import * as Reasoning from "./Reasoning.js"
import * as Render from "./Render.js"

/** How to reach one model on one OpenAI-compatible server. */
export interface Options extends Http.CommonOptions {
  /** The API root including its version segment, e.g. `https://api.openai.com/v1`, `http://localhost:11434/v1`. */
  readonly baseUrl: string
  /** How the finalize call asks for JSON (default `json_schema`; see the module comment). */
  readonly responseFormat?: "json_schema" | "json_object" | "none" | undefined
  /**
   * Whether images and audio tools returned are sent (`send`, the default: a `user` message after the turn's tool
   * messages, images as `image_url` data URLs, WAV and MP3 audio as `input_audio`; other audio is described) or
   * left to their text description (`describe`, for models without vision or audio input).
   */
  readonly attachments?: "send" | "describe" | undefined
  /** `reasoning_effort` for a reasoning model (default: none sent, the model's own). */
  readonly reasoning?: { readonly effort: "minimal" | "low" | "medium" | "high" } | undefined
  /** A cap on every reply's length in tokens (default: none); a sample's own cap applies when smaller. */
  readonly maxOutputTokens?: number | undefined
  /** The name the cap is sent under (default: `tokenParameterFor` the model). */
  readonly tokenParameter?: "max_tokens" | "max_completion_tokens" | undefined
  /** Whether an assistant message carries its own reasoning text back (default false; see the module comment). */
  readonly replayReasoning?: boolean | undefined
  /** Whether to send `prompt_cache_key` (default: only when the base URL's host is api.openai.com). */
  readonly promptCacheKey?: boolean | undefined
}

/**
 * The parameter an output cap is sent under for `model`: `override` when given, else `max_completion_tokens` for
 * OpenAI's reasoning families (`gpt-5*`, `o<digit>*`, also behind a vendor prefix such as `openai/`), which refuse
 * `max_tokens`, and `max_tokens` for every other model. Never fails.
 */
export const tokenParameterFor = (
  model: string,
  override?: "max_tokens" | "max_completion_tokens"
): "max_tokens" | "max_completion_tokens" => {
  if (override !== undefined) return override
  const bare = model.slice(model.lastIndexOf("/") + 1)
  return /^(gpt-5|o\d)/i.test(bare) ? "max_completion_tokens" : "max_tokens"
}

/** Whether `baseUrl` is OpenAI's own API (where `prompt_cache_key` is known). Never fails. */
export const isOpenAi = (baseUrl: string): boolean => {
  try {
    return new URL(baseUrl).hostname === "api.openai.com"
  } catch {
    return false
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Request mapping

type WireOut = Record<string, unknown>

/**
 * The `messages` array for `request`: system first, then user → `user` (context block first, `Render.userText`),
 * assistant → `assistant` with `tool_calls` (and, when `replayOf` names the provider, its own reasoning text in the
 * field it came in), one `role: "tool"` message per tool result, notice → `user` (`Render.noticeText`). An
 * assistant entry with neither text nor calls is left out: several servers reject an empty assistant message, and
 * the model gains nothing from seeing it.
 */
export const toMessages = (
  request: Pick<ModelRequest, "system" | "messages">,
  attachments: "send" | "describe" = "send",
  replayOf?: string
): Array<WireOut> => {
  const out: Array<WireOut> = []
  if (request.system !== "") out.push({ role: "system", content: request.system })
  for (const entry of request.messages) {
    out.push(...entryMessages(entry, replayOf))
    if (entry.kind === "tool_results" && attachments === "send") out.push(...attachmentMessage(entry.results))
  }
  return out
}

const AUDIO_FORMATS: Readonly<Record<string, string>> = {
  "audio/wav": "wav",
  "audio/x-wav": "wav",
  "audio/wave": "wav",
  "audio/mpeg": "mp3",
  "audio/mp3": "mp3"
}

/**
 * The images and audio of a turn's tool results, as ONE `user` message after its tool messages (a `tool` message
 * carries text only): each part introduced by the call it belongs to. None when nothing can be sent.
 */
const attachmentMessage = (results: ReadonlyArray<ToolResult>): Array<WireOut> => {
  const parts: Array<WireOut> = []
  for (const result of results) {
    const sendable = (result.attachments ?? []).flatMap((a): Array<WireOut> => {
      if (a.type === "image") return [{ type: "image_url", image_url: { url: `data:${a.mimeType};base64,${a.data}` } }]
      const format = AUDIO_FORMATS[a.mimeType.toLowerCase()]
      return format === undefined ? [] : [{ type: "input_audio", input_audio: { data: a.data, format } }]
    })
    if (sendable.length === 0) continue
    parts.push({ type: "text", text: `Attachments of tool result ${result.callId} (${result.name}):` }, ...sendable)
  }
  return parts.length === 0 ? [] : [{ role: "user", content: parts }]
}

/** An assistant turn's own reasoning text, per field it came in (joined in order). */
const reasoningFields = (parts: ReadonlyArray<ReasoningPart>): WireOut => {
  const fields: Record<string, string> = {}
  for (const part of parts) {
    if (part.type === "reasoning_text") fields[part.field] = (fields[part.field] ?? "") + part.text
  }
  return fields
}

const entryMessages = (entry: TurnEntry, replayOf: string | undefined): Array<WireOut> => {
  switch (entry.kind) {
    case "user":
      return [{ role: "user", content: Render.userText(entry) }]
    case "notice":
      return [{ role: "user", content: Render.noticeText(entry) }]
    case "assistant": {
      if (entry.text === "" && entry.toolCalls.length === 0) return []
      const reasoning = replayOf === undefined ? {} : reasoningFields(Reasoning.ownParts(entry, replayOf))
      if (entry.toolCalls.length === 0) return [{ role: "assistant", content: entry.text, ...reasoning }]
      return [{
        role: "assistant",
        content: entry.text === "" ? null : entry.text,
        ...reasoning,
        tool_calls: entry.toolCalls.map((call) => ({
          id: call.id,
          type: "function",
          function: { name: call.name, arguments: call.arguments }
        }))
      }]
    }
    case "tool_results":
      return entry.results.map((result) => ({ role: "tool", tool_call_id: result.callId, content: result.content }))
  }
}

/** The request body for `request` (see the module comment for the rules it obeys). Never fails. */
export const body = (options: Options, request: ModelRequest, stream: boolean): WireOut => {
  const payload: WireOut = {
    ...options.extraBody,
    model: options.model,
    messages: toMessages(
      request,
      options.attachments ?? "send",
      options.replayReasoning === true ? options.name : undefined
    )
  }
  if (request.tools.length > 0) {
    payload.tools = request.tools.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: tool.parameters }
    }))
  }
  const format = options.responseFormat ?? "json_schema"
  if (request.responseSchema !== undefined && format !== "none") {
    payload.response_format = format === "json_object"
      ? { type: "json_object" }
      : { type: "json_schema", json_schema: { name: "report", schema: request.responseSchema, strict: false } }
  }
  // The provider's cap, or a sample's own (MCP sampling) when smaller; and a sample's stop texts.
  const cap = Math.min(options.maxOutputTokens ?? Infinity, request.maxTokens ?? Infinity)
  if (Number.isFinite(cap)) payload[tokenParameterFor(options.model, options.tokenParameter)] = cap
  if (options.reasoning !== undefined) payload.reasoning_effort = options.reasoning.effort
  if (request.cacheKey !== undefined && (options.promptCacheKey ?? isOpenAi(options.baseUrl))) {
    payload.prompt_cache_key = request.cacheKey
  }
  if (request.stopSequences !== undefined && request.stopSequences.length > 0) payload.stop = request.stopSequences
  if (stream) {
    payload.stream = true
    payload.stream_options = { include_usage: true }
  }
  return payload
}

// ---------------------------------------------------------------------------------------------------------------
// Reply mapping

/** The normalised finish reason for a wire `finish_reason`, given what the reply carried. */
export const finishReason = (
  wire: string | null | undefined,
  reply: { readonly toolCalls: number; readonly refusal: boolean }
): FinishReason => {
  if (reply.refusal) return "refused"
  switch (wire) {
    case "stop":
    case "eos":
    case "end_turn":
      // Ollama and some llama.cpp builds say "stop" even when the reply asks for tools.
      return reply.toolCalls > 0 ? "tool_calls" : "stop"
    case "tool_calls":
    case "function_call":
      return "tool_calls"
    case "length":
    case "max_tokens":
      return "length"
    case "content_filter":
      return "filtered"
    case "refusal":
      return "refused"
    case null:
    case undefined:
    case "":
      return reply.toolCalls > 0 ? "tool_calls" : "stop"
    default:
      return "unknown"
  }
}

const argumentsText = (value: unknown): string =>
  value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value)

/** The reasoning text a message or delta carries, as parts (`reasoning_content` first, then `reasoning`). */
const reasoningTexts = (
  provider: string,
  wire: { readonly reasoning_content?: unknown; readonly reasoning?: unknown }
): Array<ReasoningPart> => {
  const parts: Array<ReasoningPart> = []
  for (const field of ["reasoning_content", "reasoning"] as const) {
    const text = wire[field]
    if (typeof text === "string" && text !== "") {
      parts.push({ type: "reasoning_text", provider, text, field })
    }
  }
  return parts
}

const contentText = (content: typeof ContentValue.Type | undefined): string =>
  content === null || content === undefined
    ? ""
    : typeof content === "string"
    ? content
    : content.map((part) => part.text ?? "").join("")

/** The error a 2xx body (or a stream chunk) carries in an `error` field, classified. */
const embeddedError = (transport: Http.Transport, error: unknown, usage: Usage | undefined, status: number) => {
  const detail = Http.errorDetail({ error })
  const message = detail?.message ?? JSON.stringify(error)
  const kind: ErrorKind = classifyErrorType(detail?.type, message)
  return Http.fail(transport, kind, `error in the reply: ${message}`, {
    status,
    ...(usage !== undefined ? { usage } : {})
  })
}

/** What a streamed reply has gathered so far. */
interface StreamState {
  readonly text: Array<string>
  readonly refusal: Array<string>
  readonly reasoning: { readonly reasoning_content: Array<string>; readonly reasoning: Array<string> }
  readonly calls: Array<{ index: number; id: string; name: string; args: Array<string> }>
  finish: string | undefined
  usage: Usage | undefined
  id: string | undefined
  model: string | undefined
  done: boolean
}

const streamState = (): StreamState => ({
  text: [],
  refusal: [],
  reasoning: { reasoning_content: [], reasoning: [] },
  calls: [],
  finish: undefined,
  usage: undefined,
  id: undefined,
  model: undefined,
  done: false
})

/** A streamed tool call's fragment, added to its call. */
const addFragment = (state: StreamState, wire: WireToolCall): void => {
  const index = wire.index ?? undefined
  const fresh = wire.id !== null && wire.id !== undefined && wire.id !== ""
  // Without an index, a fragment with a new id starts a call and one without continues the last.
  let slot = index !== undefined
    ? state.calls.find((call) => call.index === index)
    : fresh
    ? state.calls.find((call) => call.id === wire.id)
    : state.calls.at(-1)
  if (slot === undefined) {
    slot = { index: index ?? state.calls.length, id: "", name: "", args: [] }
    state.calls.push(slot)
  }
  if (fresh && slot.id === "") slot.id = wire.id ?? ""
  const name = wire.function?.name
  if (name !== null && name !== undefined && name !== "") slot.name = name
  const args = argumentsText(wire.function?.arguments)
  if (args !== "") slot.args.push(args)
}

/** The reply a complete stream makes; `callId` gives a call without an id one. */
const streamedReply = (
  state: StreamState,
  options: Options,
  callId: (wire: string | null | undefined) => string
): ModelReply => {
  const refusal = state.refusal.join("")
  const text = state.text.join("")
  const toolCalls = state.calls.map((call): ToolCall => ({
    id: callId(call.id),
    name: call.name,
    arguments: call.args.join("")
  }))
  const reasoning = reasoningTexts(options.name, {
    reasoning_content: state.reasoning.reasoning_content.join(""),
    reasoning: state.reasoning.reasoning.join("")
  })
  return {
    text: refusal !== "" && text === "" ? refusal : text,
    toolCalls,
    finishReason: finishReason(state.finish, { toolCalls: toolCalls.length, refusal: refusal !== "" }),
    ...(reasoning.length > 0 ? { reasoning } : {}),
    usage: state.usage ?? WireUsage.fromOpenAi(undefined),
    model: state.model ?? options.model,
    raw: { streamed: true, id: state.id, finish_reason: state.finish ?? null }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The adapter

/**
 * An OpenAI-compatible provider. Needs an `HttpClient` once, here; `complete` then needs nothing. `complete` fails
 * only with a classified `ProviderError`: HTTP statuses per `classifyStatus` (status and Retry-After kept), a slow
 * first byte, a stalled or dropped body → `timeout`, malformed or oversized replies → `server`, an `error` object
 * inside a 200 reply or a stream → classified by its type/code. A refusal or a content filter is a reply with
 * finish reason `refused` / `filtered` (the loop exits on it), not an error.
 */
export const make = (options: Options): Effect.Effect<ModelProvider, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const timeoutMs = options.timeoutMs ?? defaultAttempt.timeoutMs
    const transport = Http.transport(options, client, timeoutMs)
    const url = `${options.baseUrl.replace(/\/+$/, "")}/chat/completions`
    // The host decides the prompt_cache_key default; it is settled once, here.
    const settled: Options = { ...options, promptCacheKey: options.promptCacheKey ?? isOpenAi(options.baseUrl) }
    let minted = 0
    // Some servers send no ids (or empty ones); the pairing of calls and results needs one per call.
    const callId = (wire: string | null | undefined): string =>
      wire !== null && wire !== undefined && wire !== "" ? wire : `call_${++minted}`

    const headers = (stream: boolean): Record<string, string> => ({
      ...options.headers,
      accept: stream ? "text/event-stream" : "application/json",
      ...(options.apiKey !== undefined ? { authorization: `Bearer ${R.value(options.apiKey)}` } : {})
    })

    const toolCall = (wire: WireToolCall): ToolCall => ({
      id: callId(wire.id),
      name: wire.function?.name ?? "",
      arguments: argumentsText(wire.function?.arguments)
    })

    const once = (request: ModelRequest): Effect.Effect<ModelReply, ProviderError> =>
      Effect.flatMap(Http.post(transport, url, headers(false), body(settled, request, false)), whole)

    // Generator functions made once per provider (`fnUntraced`), not per request: see session/Loop's `iteration`.
    const whole: (response: HttpClientResponse.HttpClientResponse) => Effect.Effect<ModelReply, ProviderError> = Effect
      .fnUntraced(function*(response: HttpClientResponse.HttpClientResponse) {
        const raw = yield* Http.text(transport, response)
        const wire = yield* Http.decodeJson(transport, Completion, raw, response.status)
        const usage = WireUsage.fromOpenAi(wire.usage)
        const choice = wire.choices?.[0]
        if (choice === undefined) {
          if (wire.error !== undefined && wire.error !== null) {
            return yield* Effect.fail(embeddedError(transport, wire.error, usage, response.status))
          }
          return yield* Effect.fail(
            Http.fail(transport, "server", "the reply had no choices", { status: response.status, usage })
          )
        }
        const message = choice.message
        const refusal = message?.refusal ?? ""
        const toolCalls = (message?.tool_calls ?? []).map(toolCall)
        const text = contentText(message?.content)
        const reasoning = message === null || message === undefined ? [] : reasoningTexts(options.name, message)
        return {
          text: refusal !== "" && text === "" ? refusal : text,
          toolCalls,
          finishReason: finishReason(choice.finish_reason, { toolCalls: toolCalls.length, refusal: refusal !== "" }),
          ...(reasoning.length > 0 ? { reasoning } : {}),
          usage,
          model: wire.model ?? options.model,
          raw: Either.getOrUndefined(Http.parseJson(raw))
        }
      })

    const streamed = Effect.fnUntraced(function*(request: ModelRequest, onDelta: (text: string) => void) {
      const response = yield* Http.post(transport, url, headers(true), body(settled, request, true))
      // Some gateways ignore `stream: true` and answer with one JSON body: take it whole, one delta.
      if (Http.isJson(response)) {
        const reply = yield* whole(response)
        if (reply.text !== "") onDelta(reply.text)
        return reply
      }
      const state = streamState()
      // Synchronous: it runs as each chunk arrives, with no effect per event.
      const handle = (event: Sse.SseEvent): boolean | ProviderError => {
        const data = event.data.trim()
        if (data === "[DONE]") {
          state.done = true
          return false
        }
        if (data === "") return true
        const decoded = Http.decodeJsonEither(transport, Chunk, data, response.status)
        if (Either.isLeft(decoded)) return decoded.left
        const chunk = decoded.right
        if (chunk.usage !== null && chunk.usage !== undefined) state.usage = WireUsage.fromOpenAi(chunk.usage)
        if (chunk.error !== undefined && chunk.error !== null) {
          return embeddedError(transport, chunk.error, state.usage, response.status)
        }
        state.id ??= chunk.id ?? undefined
        state.model ??= chunk.model ?? undefined
        const choice = chunk.choices?.[0]
        if (choice === undefined) return true
        const delta = choice.delta
        const text = delta?.content ?? ""
        if (text !== "") {
          state.text.push(text)
          onDelta(text)
        }
        const refusal = delta?.refusal ?? ""
        if (refusal !== "") state.refusal.push(refusal)
        for (const field of ["reasoning_content", "reasoning"] as const) {
          const piece = delta?.[field]
          if (typeof piece === "string" && piece !== "") state.reasoning[field].push(piece)
        }
        for (const call of delta?.tool_calls ?? []) addFragment(state, call)
        if (choice.finish_reason !== null && choice.finish_reason !== undefined) state.finish = choice.finish_reason
        return true
      }
      yield* Http.events(transport, response, handle)
      if (!state.done && state.finish === undefined) {
        return yield* Effect.fail(
          Http.fail(transport, "server", "the stream ended before the reply was complete", {
            status: response.status,
            ...(state.usage !== undefined ? { usage: state.usage } : {})
          })
        )
      }
      return streamedReply(state, options, callId)
    })

    return Http.provider(options, "openai", timeoutMs, once, streamed)
  })

/**
 * An OpenAI-compatible provider as the only route: the `default` tier (`defaultTier`) is this one model. For several tiers or a
 * failover order, list `make(...)` effects in `Providers.layer`. Needs an `HttpClient` (`NodeHttpClient.layerUndici`,
 * re-exported by `corral/providers` as `layerHttpClient`); never fails.
 */
export const layer = (options: Options): Layer.Layer<Providers, never, HttpClient.HttpClient> =>
  Providers.layer({ [defaultTier]: [make(options)] })
