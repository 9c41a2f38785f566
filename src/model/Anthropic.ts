/**
 * Anthropic — the Messages API (`POST /v1/messages`) over `HttpClient`.
 *
 * Our own rather than @effect/ai-anthropic because that one loses the HTTP status when an error body is not
 * Anthropic's (a proxy's HTML 502), and reports no usage on failures. Every failure is classified once, in
 * `internal/http` and here, into a `ProviderError` kind; an `error` event inside a stream is classified by its
 * `error.type` (`overloaded_error` → `overloaded`, …) exactly as the same error would be with its HTTP status.
 *
 * The wire rules that shape the mapping: the system prompt is a top-level field; roles must alternate, so
 * consecutive same-role entries are merged into one message (a notice after tool results joins their user
 * message); all results of one assistant turn go in ONE user message as `tool_result` blocks (with `is_error`),
 * before any text; empty text blocks are rejected by the API and are never sent; `max_tokens` is required.
 *
 * Structured output (the landing's finalize call): a forced tool — `tool_choice: { type: "tool", name:
 * "submit_report" }` with the report schema as its `input_schema` — whose input comes back as the reply text
 * (JSON). Forced tool use is the long-standing, model-independent way to get schema-shaped JSON from the API.
 *
 * Extended thinking (`thinking`, DESIGN §11). A reply's `thinking` blocks (with their `signature`) and
 * `redacted_thinking` blocks become its reasoning parts, in order; a thinking block without a signature (cut by
 * `max_tokens`) cannot be sent back and is not kept. The API's rules, obeyed here:
 * - a turn's own blocks go back verbatim (signature included: the API checks it) at the START of its assistant
 *   message; another provider's never go (its signature cannot verify here);
 * - with thinking on, the assistant message of the open tool-use cycle must start with a thinking block. A cycle
 *   opened without one (another provider made the turn before a failover, or thinking was off then) cannot be given
 *   one, so that request goes without `thinking`: one thinking configuration per assistant turn. Thinking blocks
 *   are only sent when the request thinks (earlier turns' blocks are context the API ignores);
 * - `max_tokens` must exceed `budget_tokens`: a call capped at or below the budget (a sample's `maxTokens`) goes
 *   without thinking;
 * - manual thinking (`type: "enabled"`) refuses a forced tool: its finalize call offers the report tool with
 *   `tool_choice: { type: "auto" }` (adaptive thinking may force).
 *
 * Prompt caching (`promptCache`, default on): the API caches only at `cache_control` breakpoints (at most 4), over
 * the prefix tools → system → messages. Three are set: on the last of the request's tools, on the system prompt
 * (sent as one text block), and on the last block of the newest message (rolling: the next call reads what this one
 * wrote). The tools and system prompt are rendered from the request alone, in its order, so one session's calls
 * send them byte-identical and the prefix stays cached.
 */
import type { HttpClientResponse } from "@effect/platform"
import { HttpClient } from "@effect/platform"
import { Effect, Either, Redacted as R } from "effect"
import type { Layer } from "effect"
import type { FinishReason, ModelReply, ReasoningPart, ToolCall } from "../domain/Message.js"
import type { Usage } from "../domain/Usage.js"
import { body, defaultMaxOutputTokens, reportTool, structured } from "./internal/anthropicRequest.js"
import { Event, Message, type WireBlock } from "./internal/anthropicWire.js"
import * as Http from "./internal/http.js"
import type * as Sse from "./internal/sse.js"
import * as WireUsage from "./internal/usage.js"
import type { ModelProvider, ModelRequest } from "./ModelProvider.js"
import { defaultAttempt, defaultTier, Providers } from "./ModelProvider.js"
import type { ProviderError } from "./ProviderError.js"
import { classifyErrorType } from "./ProviderError.js"

/**
 * Extended thinking: manual (`enabled`, with a token budget, at least 1024 and below `max_tokens`) or `adaptive`
 * (the model decides how much to think; `effort` guides it, where the model offers it).
 */
export type Thinking =
  | { readonly type: "enabled"; readonly budgetTokens: number }
  | { readonly type: "adaptive"; readonly effort?: "low" | "medium" | "high" | "max" | undefined }

/** How to reach one Claude model. */
export interface Options extends Http.CommonOptions {
  /** The API root, e.g. `https://api.anthropic.com` (a trailing `/v1` is tolerated). */
  readonly baseUrl?: string | undefined
  /** `max_tokens`, required by the API (default 8192). */
  readonly maxOutputTokens?: number | undefined
  /**
   * Whether images tools returned are sent as `image` blocks inside their `tool_result` (`send`, the default) or left
   * to their text description (`describe`). Audio is always described: the Messages API takes no audio input.
   */
  readonly attachments?: "send" | "describe" | undefined
  /** Extended thinking (default: off). Validate a manual budget with `thinkingIssue`. */
  readonly thinking?: Thinking | undefined
  /** Whether to set prompt-cache breakpoints (default true; see the module comment). */
  readonly promptCache?: boolean | undefined
}

/** The smallest manual thinking budget the API accepts. */
export const minThinkingBudget = 1024

/**
 * What is wrong with `thinking` for a provider whose `max_tokens` is `maxOutputTokens` (default
 * `defaultMaxOutputTokens`): a manual budget must be an integer of at least 1024 and below `max_tokens`, as the API
 * requires. `undefined` when it is fine (or absent). Never fails.
 */
export const thinkingIssue = (
  thinking: Thinking | undefined,
  maxOutputTokens: number = defaultMaxOutputTokens
): string | undefined => {
  if (thinking === undefined || thinking.type !== "enabled") return undefined
  const budget = thinking.budgetTokens
  if (!Number.isInteger(budget) || budget < minThinkingBudget) {
    return `thinking.budgetTokens must be an integer of at least ${minThinkingBudget} (got ${budget})`
  }
  if (budget >= maxOutputTokens) {
    return `thinking.budgetTokens (${budget}) must be less than maxOutputTokens (${maxOutputTokens})`
  }
  return undefined
}

// The request mapping (`body`, `toMessages`, `thinkingFor`) lives in internal/anthropicRequest; these are public.
export { body, defaultMaxOutputTokens, reportTool, thinkingFor, toMessages } from "./internal/anthropicRequest.js"

/** The API version this adapter speaks. */
export const apiVersion = "2023-06-01"

// ---------------------------------------------------------------------------------------------------------------
// Reply mapping

/** The normalised finish reason for a wire `stop_reason`. */
export const finishReason = (wire: string | null | undefined, toolCalls: number): FinishReason => {
  switch (wire) {
    case "end_turn":
    case "stop_sequence":
      return toolCalls > 0 ? "tool_calls" : "stop"
    case "tool_use":
      return "tool_calls"
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "refusal":
      return "refused"
    case null:
    case undefined:
      return toolCalls > 0 ? "tool_calls" : "stop"
    default:
      return "unknown"
  }
}

interface Assembled {
  readonly texts: ReadonlyArray<string>
  readonly calls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: string }>
  readonly reasoning: ReadonlyArray<ReasoningPart>
}

/** A reply block as reasoning, if it is one that can be sent back (a thinking block with its signature). */
const reasoningPart = (
  provider: string,
  block: { readonly type: string; readonly thinking: string; readonly signature: string; readonly data: string }
): Array<ReasoningPart> =>
  block.type === "thinking" && block.signature !== ""
    ? [{ type: "thinking", provider, thinking: block.thinking, signature: block.signature }]
    : block.type === "redacted_thinking" && block.data !== ""
    ? [{ type: "redacted_thinking", provider, data: block.data }]
    : []

// A structured reply's JSON travels as the forced tool's input: it becomes the text, and no tool call is made.
const toReply = (
  request: ModelRequest,
  parts: Assembled,
  stopReason: string | null | undefined,
  usage: Usage,
  model: string,
  raw: unknown
): ModelReply => {
  const reasoning = parts.reasoning.length > 0 ? { reasoning: parts.reasoning } : {}
  const report = structured(request) ? parts.calls.find((call) => call.name === reportTool) : undefined
  if (report !== undefined) {
    return { text: report.arguments, toolCalls: [], finishReason: "stop", ...reasoning, usage, model, raw }
  }
  const toolCalls: Array<ToolCall> = parts.calls.map((call) => ({ ...call }))
  return {
    text: parts.texts.join(""),
    toolCalls,
    finishReason: finishReason(stopReason, toolCalls.length),
    ...reasoning,
    usage,
    model,
    raw
  }
}

const embeddedError = (transport: Http.Transport, error: unknown, usage: Usage, status: number): ProviderError => {
  const detail = Http.errorDetail({ error })
  const message = detail?.message ?? JSON.stringify(error)
  return Http.fail(transport, classifyErrorType(detail?.type, message), `error in the reply: ${message}`, {
    status,
    usage
  })
}

const definedCounts = (usage: WireUsage.AnthropicUsage): WireUsage.AnthropicUsage =>
  Object.fromEntries(Object.entries(usage).filter(([, value]) => value !== null && value !== undefined))

/**
 * A streamed message's content blocks by index. `input` is a tool_use block's whole input when the start event carried
 * a non-empty one (fragments win); `text` collects a text block's text, a tool_use block's input fragments and a
 * thinking block's thinking.
 */
type Blocks = Map<
  number,
  { type: string; id: string; name: string; text: Array<string>; input: string; signature: string; data: string }
>

/** A `content_block_start` event: the block opened (a text block's first text sent on as a delta). */
const startBlock = (blocks: Blocks, data: typeof Event.Type, onDelta: (text: string) => void): void => {
  const block = data.content_block
  if (block === null || block === undefined) return
  const initial = block.type === "text" ? block.text ?? "" : ""
  const thought = block.type === "thinking" ? block.thinking ?? "" : ""
  blocks.set(data.index ?? blocks.size, {
    type: block.type,
    id: block.id ?? "",
    name: block.name ?? "",
    text: initial !== "" ? [initial] : thought !== "" ? [thought] : [],
    input: block.type === "tool_use" && block.input !== undefined ? JSON.stringify(block.input) : "{}",
    signature: block.signature ?? "",
    // A redacted block arrives whole here.
    data: block.data ?? ""
  })
  if (initial !== "") onDelta(initial)
}

/** A `content_block_delta` event: text (sent on), a tool call's input, thinking or its signature, added to its block. */
const addDelta = (blocks: Blocks, data: typeof Event.Type, onDelta: (text: string) => void): void => {
  const block = blocks.get(data.index ?? blocks.size - 1)
  const delta = data.delta
  if (block === undefined || delta === null || delta === undefined) return
  if (delta.type === "text_delta" && block.type === "text") {
    const piece = delta.text ?? ""
    if (piece !== "") {
      block.text.push(piece)
      onDelta(piece)
    }
  } else if (delta.type === "input_json_delta" && block.type === "tool_use") {
    block.text.push(delta.partial_json ?? "")
  } else if (delta.type === "thinking_delta" && block.type === "thinking") {
    block.text.push(delta.thinking ?? "")
  } else if (delta.type === "signature_delta" && block.type === "thinking") {
    block.signature += delta.signature ?? ""
  }
}

/** A finished stream's blocks, in order, as the reply's texts, calls and reasoning. */
const assembled = (blocks: Blocks, provider: string, callId: (wire: string) => string): Assembled => {
  const ordered = [...blocks.entries()].sort(([a], [b]) => a - b).map(([, block]) => block)
  return {
    texts: ordered.flatMap((block) => block.type === "text" ? [block.text.join("")] : []),
    calls: ordered.flatMap((block) => {
      if (block.type !== "tool_use") return []
      const joined = block.text.join("")
      return [{ id: callId(block.id), name: block.name, arguments: joined === "" ? block.input : joined }]
    }),
    reasoning: ordered.flatMap((block) =>
      reasoningPart(provider, {
        type: block.type,
        thinking: block.text.join(""),
        signature: block.signature,
        data: block.data
      })
    )
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The adapter

/**
 * An Anthropic Messages provider. Needs an `HttpClient` once, here; `complete` then needs nothing. `complete`
 * fails only with a classified `ProviderError`: HTTP statuses per `classifyStatus` (status and Retry-After kept),
 * a slow first byte, a stalled or dropped body → `timeout`, malformed or oversized replies and streams that end
 * without `message_stop` → `server`, an `error` event → classified by `error.type` (with the usage so far).
 * A refusal is a reply with finish reason `refused`, not an error.
 */
export const make = (options: Options): Effect.Effect<ModelProvider, never, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const timeoutMs = options.timeoutMs ?? defaultAttempt.timeoutMs
    const transport = Http.transport(options, client, timeoutMs)
    const root = (options.baseUrl ?? "https://api.anthropic.com").replace(/\/+$/, "").replace(/\/v1$/, "")
    const url = `${root}/v1/messages`
    let minted = 0
    // A gateway may drop tool_use ids; the pairing of calls and results needs one per call.
    const callId = (wire: string): string => wire !== "" ? wire : `toolu_corral_${++minted}`
    const headers = (stream: boolean): Record<string, string> => ({
      ...options.headers,
      "anthropic-version": apiVersion,
      accept: stream ? "text/event-stream" : "application/json",
      ...(options.apiKey !== undefined ? { "x-api-key": R.value(options.apiKey) } : {})
    })

    const once = (request: ModelRequest): Effect.Effect<ModelReply, ProviderError> =>
      Effect.flatMap(
        Http.post(transport, url, headers(false), body(options, request, false)),
        (response) => whole(request, response)
      )

    // Generator functions made once per provider (`fnUntraced`), not per request: see session/Loop's `iteration`.
    const whole: (
      request: ModelRequest,
      response: HttpClientResponse.HttpClientResponse
    ) => Effect.Effect<ModelReply, ProviderError> = Effect.fnUntraced(function*(
      request: ModelRequest,
      response: HttpClientResponse.HttpClientResponse
    ) {
      const raw = yield* Http.text(transport, response)
      const wire = yield* Http.decodeJson(transport, Message, raw, response.status)
      const usage = WireUsage.fromAnthropic(wire.usage)
      if (wire.type === "error" || (wire.content === undefined && wire.error !== undefined)) {
        return yield* Effect.fail(embeddedError(transport, wire.error, usage, response.status))
      }
      const blocks: ReadonlyArray<WireBlock> = wire.content ?? []
      const parts: Assembled = {
        texts: blocks.flatMap((block) => block.type === "text" ? [block.text ?? ""] : []),
        calls: blocks.flatMap((block) =>
          block.type === "tool_use"
            ? [{ id: callId(block.id ?? ""), name: block.name ?? "", arguments: JSON.stringify(block.input ?? {}) }]
            : []
        ),
        reasoning: blocks.flatMap((block) =>
          reasoningPart(options.name, {
            type: block.type,
            thinking: block.thinking ?? "",
            signature: block.signature ?? "",
            data: block.data ?? ""
          })
        )
      }
      return toReply(
        request,
        parts,
        wire.stop_reason,
        usage,
        wire.model ?? options.model,
        Either.getOrUndefined(Http.parseJson(raw))
      )
    })

    const streamed = Effect.fnUntraced(function*(request: ModelRequest, onDelta: (text: string) => void) {
      const response = yield* Http.post(transport, url, headers(true), body(options, request, true))
      // Some gateways ignore `stream: true` and answer with one JSON body: take it whole, one delta.
      if (Http.isJson(response)) {
        const reply = yield* whole(request, response)
        if (reply.text !== "") onDelta(reply.text)
        return reply
      }
      const blocks: Blocks = new Map()
      const state = {
        usage: {} as WireUsage.AnthropicUsage,
        stop: undefined as string | undefined,
        id: undefined as string | undefined,
        model: undefined as string | undefined,
        done: false
      }
      const usage = () => WireUsage.fromAnthropic(state.usage)
      // Synchronous: it runs as each chunk arrives, with no effect per event.
      const handle = (event: Sse.SseEvent): boolean | ProviderError => {
        if (event.data.trim() === "") return true
        const decoded = Http.decodeJsonEither(transport, Event, event.data, response.status)
        if (Either.isLeft(decoded)) return decoded.left
        const data = decoded.right
        switch (data.type) {
          case "message_start":
            state.id = data.message?.id ?? undefined
            state.model = data.message?.model ?? undefined
            state.usage = { ...state.usage, ...definedCounts(data.message?.usage ?? {}) }
            return true
          case "content_block_start":
            startBlock(blocks, data, onDelta)
            return true
          case "content_block_delta":
            addDelta(blocks, data, onDelta)
            return true
          case "message_delta":
            state.stop = data.delta?.stop_reason ?? state.stop
            state.usage = { ...state.usage, ...definedCounts(data.usage ?? {}) }
            return true
          case "message_stop":
            state.done = true
            return false
          case "error":
            return embeddedError(transport, data.error, usage(), response.status)
          default:
            // ping, content_block_stop, and event types added after this adapter was written.
            return true
        }
      }
      yield* Http.events(transport, response, handle)
      if (!state.done) {
        return yield* Effect.fail(
          Http.fail(transport, "server", "the stream ended before message_stop", {
            status: response.status,
            usage: usage()
          })
        )
      }
      return toReply(
        request,
        assembled(blocks, options.name, callId),
        state.stop,
        usage(),
        state.model ?? options.model,
        {
          streamed: true,
          id: state.id,
          stop_reason: state.stop ?? null
        }
      )
    })

    return Http.provider(options, "anthropic", timeoutMs, once, streamed)
  })

/**
 * An Anthropic provider as the only route: the `default` tier (`defaultTier`) is this one model. For several tiers or a
 * failover order, list `make(...)` effects in `Providers.layer`. Needs an `HttpClient` (`NodeHttpClient.layerUndici`,
 * re-exported by `corral/providers` as `layerHttpClient`); never fails.
 */
export const layer = (options: Options): Layer.Layer<Providers, never, HttpClient.HttpClient> =>
  Providers.layer({ [defaultTier]: [make(options)] })
