/**
 * A fault-injecting fake model provider: a REAL HTTP server on 127.0.0.1 (random port) speaking both wire formats
 * — OpenAI Chat Completions (`POST …/chat/completions`) and Anthropic Messages (`POST …/v1/messages`), streaming
 * and not, tool calls included — so the adapters' HTTP, SSE and classification code runs for real.
 *
 * Each request takes the next behaviour from a scripted queue; when the queue is empty, `fallback` decides (by
 * default: a small demo conversation — call the first tool, then answer, then a valid report). Behaviours cover
 * what real providers do on bad days: any status with any body and headers (Retry-After in all three forms), a
 * slow first byte, a connection dropped mid-body, a stream broken mid-way or ended by an error event, malformed
 * JSON, an oversized reply, and exact raw bytes (recorded fixtures). Every request is recorded.
 *
 * Strict: every request is first held to the providers' documented rules (`ProviderRules`: Anthropic's thinking
 * and cache rules, OpenAI's reasoning-model parameters); one that breaks a rule gets the provider's 400, without
 * taking a behaviour from the queue, and is listed in `refusals`. Replies can carry reasoning: Anthropic thinking
 * blocks signed by this server (and redacted ones), only when the request turned thinking on, as the API does;
 * OpenAI-compatible `reasoning_content` / `reasoning` text and `reasoning_tokens`. Anthropic requests with
 * `cache_control` are charged modelled cache reads and writes (the same prefix again is read).
 *
 * Also runnable on its own: `npm run fake-provider` (scripts/fake-provider.ts).
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as Rules from "./ProviderRules.js"

/** Which wire format a request used. */
export type Wire = "openai" | "anthropic"

/** One request the server received. */
export interface RecordedRequest {
  /** 1-based arrival number. */
  readonly n: number
  readonly wire: Wire | "other"
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  /** The parsed JSON body (or the raw text when it was not JSON). */
  readonly body: Record<string, unknown>
  readonly stream: boolean
  /** Arrival time, `performance.now()` milliseconds. */
  readonly at: number
}

/** A model reply, rendered in whichever wire format the request used. */
export interface ReplySpec {
  readonly text?: string
  readonly toolCalls?: ReadonlyArray<{ readonly id?: string; readonly name: string; readonly arguments: unknown }>
  /** The wire finish/stop reason (default: `tool_calls`/`tool_use` with calls, else `stop`/`end_turn`). */
  readonly finish?: string | null
  /** OpenAI `message.refusal`. */
  readonly refusal?: string
  /** Anthropic: a thinking block (signed by this server) first in the reply, when the request turned thinking on. */
  readonly thinking?: string
  /** Anthropic: a redacted_thinking block (its data issued by this server), when the request turned thinking on. */
  readonly redactedThinking?: string
  /** OpenAI-compatible: reasoning text in `reasoningField` (default `reasoning_content`), streamed as deltas too. */
  readonly reasoningText?: string
  readonly reasoningField?: "reasoning_content" | "reasoning"
  readonly usage?: {
    readonly input?: number
    readonly output?: number
    readonly cacheRead?: number
    readonly cacheWrite?: number
    /** OpenAI `completion_tokens_details.reasoning_tokens`. */
    readonly reasoning?: number
  }
  readonly model?: string
}

/** What the server does with one request. */
export type Behaviour =
  /** A normal reply; streamed when asked. `holdAfter`: stream that many events, then wait for `release()`. */
  | { readonly _tag: "Reply"; readonly reply: ReplySpec; readonly holdAfter?: number }
  | {
    readonly _tag: "Status"
    readonly status: number
    readonly body: string | object
    readonly headers?: Readonly<Record<string, string>>
  }
  /** Sends nothing until `until` settles (a barrier the test controls), then plays `then`. */
  | { readonly _tag: "Await"; readonly until: Promise<unknown>; readonly then: Behaviour }
  /** Sends nothing for `delayMs` (the client gives up first, or the timer is cleared on close), then `then`. */
  | { readonly _tag: "SlowFirstByte"; readonly delayMs: number; readonly then: Behaviour }
  /** Headers and half a JSON body (Content-Length promises the whole), then the socket is destroyed. */
  | { readonly _tag: "DropMidBody"; readonly reply: ReplySpec }
  /** A streamed reply cut after `afterEvents` SSE events by destroying the socket (or ending it cleanly). */
  | { readonly _tag: "BreakStream"; readonly reply: ReplySpec; readonly afterEvents: number; readonly clean?: boolean }
  /** A streamed reply interrupted after `afterEvents` events by an error event. */
  | {
    readonly _tag: "StreamError"
    readonly reply: ReplySpec
    readonly afterEvents: number
    readonly error: { readonly type: string; readonly message: string }
  }
  | { readonly _tag: "MalformedJson" }
  | { readonly _tag: "Oversized"; readonly bytes: number }
  /** Exact bytes: a string, or chunks written one by one. */
  | {
    readonly _tag: "Raw"
    readonly status?: number
    readonly headers?: Readonly<Record<string, string>>
    readonly body: string | ReadonlyArray<string>
  }

/** A normal reply. */
export const reply = (spec: ReplySpec, options: { readonly holdAfter?: number } = {}): Behaviour => ({
  _tag: "Reply",
  reply: spec,
  ...options
})

/** A text reply. */
export const text = (value: string, usage?: ReplySpec["usage"]): Behaviour =>
  reply({ text: value, ...(usage ? { usage } : {}) })

/** Any status with any body (an object is sent as JSON) and headers. */
export const status = (
  code: number,
  body: string | object = "",
  headers: Readonly<Record<string, string>> = {}
): Behaviour => ({ _tag: "Status", status: code, body, headers })

/** The three ways a provider says when to come back. */
export type RetryAfter = { readonly seconds: number } | { readonly date: Date } | { readonly ms: number }

/** The Retry-After header(s) for `retryAfter`. */
export const retryAfterHeaders = (retryAfter: RetryAfter): Record<string, string> =>
  "seconds" in retryAfter
    ? { "retry-after": String(retryAfter.seconds) }
    : "date" in retryAfter
    ? { "retry-after": retryAfter.date.toUTCString() }
    : { "retry-after-ms": String(retryAfter.ms) }

/** A 429 rate limit, with a Retry-After in one of its three forms (or none). */
export const rateLimited = (retryAfter?: RetryAfter, message = "Rate limit reached for requests"): Behaviour =>
  status(429, { error: { message, type: "rate_limit_error", code: "rate_limit_exceeded" } }, {
    ...(retryAfter ? retryAfterHeaders(retryAfter) : {})
  })

/** Waits `delayMs` before answering with `then`. */
export const slowFirstByte = (delayMs: number, then: Behaviour = text("late")): Behaviour => ({
  _tag: "SlowFirstByte",
  delayMs,
  then
})

/** Answers with `then` once `until` settles: e.g. hold a whole wave of requests and answer them at once. */
export const after = (until: Promise<unknown>, then: Behaviour): Behaviour => ({ _tag: "Await", until, then })

/** Drops the connection half-way through a (non-streamed) body. */
export const dropMidBody = (spec: ReplySpec = { text: "this reply never arrives whole" }): Behaviour => ({
  _tag: "DropMidBody",
  reply: spec
})

/** Streams `afterEvents` events of `spec`, then destroys the socket (`clean`: ends the response instead). */
export const breakStream = (spec: ReplySpec, afterEvents: number, clean = false): Behaviour => ({
  _tag: "BreakStream",
  reply: spec,
  afterEvents,
  clean
})

/** Streams `afterEvents` events of `spec`, then an error event. */
export const streamError = (
  spec: ReplySpec,
  afterEvents: number,
  error: { readonly type: string; readonly message: string }
): Behaviour => ({ _tag: "StreamError", reply: spec, afterEvents, error })

/** A 200 whose body is not JSON. */
export const malformedJson = (): Behaviour => ({ _tag: "MalformedJson" })

/** A 200 whose body is `bytes` long. */
export const oversized = (bytes: number): Behaviour => ({ _tag: "Oversized", bytes })

/** Exact bytes. */
export const raw = (
  body: string | ReadonlyArray<string>,
  options: { readonly status?: number; readonly headers?: Readonly<Record<string, string>> } = {}
): Behaviour => ({ _tag: "Raw", body, ...options })

/** A running fake server. */
export interface FakeProvider {
  /** `http://127.0.0.1:<port>` */
  readonly url: string
  /** The OpenAI-compatible base URL (`…/v1`). */
  readonly openAiBaseUrl: string
  /** The Anthropic base URL. */
  readonly anthropicBaseUrl: string
  /** Every request so far, in arrival order. */
  readonly requests: ReadonlyArray<RecordedRequest>
  /** The requests refused for breaking a provider rule (`ProviderRules`), with the refusal's message. */
  readonly refusals: ReadonlyArray<{ readonly n: number; readonly message: string }>
  /** Signs a thinking text as this server does (to build a valid transcript by hand). */
  readonly sign: (thinking: string) => string
  /** How many requests arrived (also when `record` is off). */
  readonly count: () => number
  /** Appends behaviours to the queue. */
  readonly enqueue: (...behaviours: ReadonlyArray<Behaviour>) => void
  /** Lets every held reply (`holdAfter`) finish. */
  readonly release: () => void
  readonly close: () => Promise<void>
}

/** What `start` takes. */
export interface StartOptions {
  readonly script?: ReadonlyArray<Behaviour>
  /** Decides when the queue is empty (default: `demo`). */
  readonly fallback?: (request: RecordedRequest) => Behaviour
  /** 0 (default) = a random free port. */
  readonly port?: number
  /** Split streamed text into at most this many deltas (default 3). */
  readonly textPieces?: number
  /** Keep every request in `requests` (default true); a benchmark turns it off and reads `count`. */
  readonly record?: boolean
  /** Refuse `reasoning_content` in input messages, as DeepSeek's reasoner does (default false). */
  readonly refuseReasoningContent?: boolean
}

// ---------------------------------------------------------------------------------------------------------------
// The demo conversation

const asRecord = (u: unknown): Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? u as Record<string, unknown> : {}
const asArray = (u: unknown): ReadonlyArray<unknown> => Array.isArray(u) ? u : []

/** A report valid against Corral's default report schema. */
export const demoReport = {
  summary: "The fake provider investigated and found nothing wrong.",
  findings: ["The fake provider answered every request."],
  confidence: "low",
  nextSteps: ["Point Corral at a real model."]
}

/** Arguments valid for a tool's JSON Schema: its required properties filled (numbers 1, booleans true, strings "demo"). */
export const sampleArgs = (parameters: unknown): Record<string, unknown> => {
  const schema = asRecord(parameters)
  const properties = asRecord(schema.properties)
  const out: Record<string, unknown> = {}
  for (const name of asArray(schema.required)) {
    if (typeof name !== "string") continue
    const type = asRecord(properties[name]).type
    out[name] = type === "number" || type === "integer" ? 1 : type === "boolean" ? true : "demo"
  }
  return out
}

/** The report tool of an Anthropic finalize call that cannot force it (manual thinking: `tool_choice` auto). */
const reportTool = "submit_report"

/** Whether the request is a structured-output (finalize) call, and the report tool's name for Anthropic. */
const structured = (request: RecordedRequest): { readonly tool?: string } | undefined => {
  if (request.wire === "openai") return request.body.response_format !== undefined ? {} : undefined
  const choice = asRecord(request.body.tool_choice)
  if (choice.type === "tool" && typeof choice.name === "string") return { tool: choice.name }
  const offered = asArray(request.body.tools).some((tool) => asRecord(tool).name === reportTool)
  return offered ? { tool: reportTool } : undefined
}

/** How many tool results the request's conversation holds (either wire format). */
export const toolResults = (request: RecordedRequest): number => {
  let count = 0
  for (const m of asArray(request.body.messages)) {
    const message = asRecord(m)
    if (message.role === "tool") count++
    else for (const block of asArray(message.content)) if (asRecord(block).type === "tool_result") count++
  }
  return count
}

const sawToolResults = (request: RecordedRequest): boolean => toolResults(request) > 0

/** The tools the request offers, with their parameters' JSON Schemas (either wire format). */
export const offeredTools = (
  request: RecordedRequest
): ReadonlyArray<{ readonly name: string; readonly parameters: unknown }> =>
  asArray(request.body.tools).flatMap((entry) => {
    const tool = asRecord(entry)
    if (request.wire === "openai") {
      const fn = asRecord(tool.function)
      return typeof fn.name === "string" ? [{ name: fn.name, parameters: fn.parameters }] : []
    }
    return typeof tool.name === "string" ? [{ name: tool.name, parameters: tool.input_schema }] : []
  })

const firstTool = (request: RecordedRequest): { readonly name: string; readonly parameters: unknown } | undefined =>
  offeredTools(request)[0]

/** Whether the request is a finalize (structured-output) call. */
export const isFinalize = (request: RecordedRequest): boolean => structured(request) !== undefined

/**
 * The default conversation: a finalize call gets `demoReport`; a request offering tools, before any tool result,
 * gets a call of the first tool (required string arguments filled with "demo"); anything else gets a short answer.
 */
export const demo = (request: RecordedRequest): Behaviour => {
  const finalize = structured(request)
  if (finalize !== undefined) {
    return finalize.tool !== undefined
      ? reply({ toolCalls: [{ name: finalize.tool, arguments: demoReport }], finish: "tool_use" })
      : text(JSON.stringify(demoReport))
  }
  const tool = firstTool(request)
  if (tool !== undefined && !sawToolResults(request)) {
    return reply({ text: "Let me look.", toolCalls: [{ name: tool.name, arguments: sampleArgs(tool.parameters) }] })
  }
  return text("The demo investigation is complete: the fake provider found nothing wrong.")
}

// ---------------------------------------------------------------------------------------------------------------
// Rendering

interface Rendered {
  readonly json: object
  readonly events: ReadonlyArray<string>
}

const split = (value: string, pieces: number): Array<string> => {
  if (value === "") return []
  const size = Math.max(1, Math.ceil(value.length / pieces))
  const out: Array<string> = []
  for (let i = 0; i < value.length; i += size) out.push(value.slice(i, i + size))
  return out
}

const argsText = (value: unknown): string => typeof value === "string" ? value : JSON.stringify(value)

const sse = (data: unknown, event?: string): string =>
  `${event !== undefined ? `event: ${event}\n` : ""}data: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`

const renderOpenAi = (spec: ReplySpec, n: number, model: string, pieces: number, withUsage: boolean): Rendered => {
  const reasoningField = spec.reasoningField ?? "reasoning_content"
  const calls = (spec.toolCalls ?? []).map((call, i) => ({
    id: call.id ?? `call_fake_${n}_${i}`,
    type: "function",
    function: { name: call.name, arguments: argsText(call.arguments) }
  }))
  const finish = spec.finish !== undefined ? spec.finish : calls.length > 0 ? "tool_calls" : "stop"
  const usage = {
    prompt_tokens: spec.usage?.input ?? 12,
    completion_tokens: spec.usage?.output ?? 7,
    total_tokens: (spec.usage?.input ?? 12) + (spec.usage?.output ?? 7),
    prompt_tokens_details: { cached_tokens: spec.usage?.cacheRead ?? 0 },
    completion_tokens_details: { reasoning_tokens: spec.usage?.reasoning ?? 0 }
  }
  const id = `chatcmpl-fake-${n}`
  const json = {
    id,
    object: "chat.completion",
    created: 1_700_000_000,
    model,
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: spec.text ?? (calls.length > 0 ? null : ""),
        refusal: spec.refusal ?? null,
        ...(spec.reasoningText !== undefined ? { [reasoningField]: spec.reasoningText } : {}),
        ...(calls.length > 0 ? { tool_calls: calls } : {})
      },
      finish_reason: finish
    }],
    usage
  }
  const chunk = (delta: object, finishReason: string | null = null) =>
    sse({
      id,
      object: "chat.completion.chunk",
      created: 1_700_000_000,
      model,
      choices: [{ index: 0, delta, finish_reason: finishReason }]
    })
  const events: Array<string> = [chunk({ role: "assistant", content: "" })]
  for (const piece of split(spec.reasoningText ?? "", pieces)) events.push(chunk({ [reasoningField]: piece }))
  for (const piece of split(spec.text ?? "", pieces)) events.push(chunk({ content: piece }))
  if (spec.refusal !== undefined) events.push(chunk({ refusal: spec.refusal }))
  calls.forEach((call, index) => {
    events.push(
      chunk({
        tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }]
      })
    )
    for (const piece of split(call.function.arguments, 2)) {
      events.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
    }
  })
  events.push(chunk({}, finish))
  if (withUsage) events.push(sse({ id, object: "chat.completion.chunk", model, choices: [], usage }))
  events.push(sse("[DONE]"))
  return { json, events }
}

/** What rendering an Anthropic reply needs to know of the request and the server. */
interface AnthropicContext {
  /** Whether the request turned thinking on (thinking blocks are only returned then). */
  readonly thinking: boolean
  readonly issued: Rules.Issued
  /** The modelled cache usage of the request, if it set breakpoints. */
  readonly cache: { readonly read: number; readonly write: number; readonly input: number } | undefined
}

const renderAnthropic = (
  spec: ReplySpec,
  n: number,
  model: string,
  pieces: number,
  context: AnthropicContext
): Rendered => {
  const calls = (spec.toolCalls ?? []).map((call, i) => ({
    id: call.id ?? `toolu_fake_${n}_${i}`,
    name: call.name,
    input: typeof call.arguments === "string" ? JSON.parse(call.arguments) as unknown : call.arguments
  }))
  const stop = spec.finish !== undefined ? spec.finish : calls.length > 0 ? "tool_use" : "end_turn"
  const usage = {
    input_tokens: spec.usage?.input ?? context.cache?.input ?? 12,
    output_tokens: spec.usage?.output ?? 7,
    cache_read_input_tokens: spec.usage?.cacheRead ?? context.cache?.read ?? 0,
    cache_creation_input_tokens: spec.usage?.cacheWrite ?? context.cache?.write ?? 0
  }
  const id = `msg_fake_${n}`
  type Block =
    | { readonly type: "text"; readonly text: string }
    | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }
    | { readonly type: "thinking"; readonly thinking: string; readonly signature: string }
    | { readonly type: "redacted_thinking"; readonly data: string }
  const reasoning: Array<Block> = []
  if (context.thinking && spec.thinking !== undefined) {
    reasoning.push({
      type: "thinking",
      thinking: spec.thinking,
      signature: Rules.sign(context.issued.secret, spec.thinking)
    })
  }
  if (context.thinking && spec.redactedThinking !== undefined) {
    const data = Buffer.from(`redacted ${n}: ${spec.redactedThinking}`).toString("base64")
    context.issued.redacted.add(data)
    reasoning.push({ type: "redacted_thinking", data })
  }
  const content: Array<Block> = [
    ...reasoning,
    ...(spec.text !== undefined && spec.text !== "" ? [{ type: "text", text: spec.text } as const] : []),
    ...calls.map((call) => ({ type: "tool_use", ...call } as const))
  ]
  const json = {
    id,
    type: "message",
    role: "assistant",
    model,
    content,
    stop_reason: stop,
    stop_sequence: null,
    usage
  }
  const events: Array<string> = [
    sse({
      type: "message_start",
      message: {
        id,
        type: "message",
        role: "assistant",
        model,
        content: [],
        stop_reason: null,
        usage: { ...usage, output_tokens: 1 }
      }
    }, "message_start")
  ]
  content.forEach((block, index) => {
    if (block.type === "thinking") {
      events.push(
        sse(
          { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } },
          "content_block_start"
        )
      )
      for (const piece of split(block.thinking, pieces)) {
        events.push(
          sse(
            { type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: piece } },
            "content_block_delta"
          )
        )
      }
      events.push(
        sse(
          { type: "content_block_delta", index, delta: { type: "signature_delta", signature: block.signature } },
          "content_block_delta"
        )
      )
    } else if (block.type === "redacted_thinking") {
      events.push(sse({ type: "content_block_start", index, content_block: block }, "content_block_start"))
    } else if (block.type === "text") {
      events.push(
        sse({ type: "content_block_start", index, content_block: { type: "text", text: "" } }, "content_block_start")
      )
      for (const piece of split(block.text, pieces)) {
        events.push(
          sse({ type: "content_block_delta", index, delta: { type: "text_delta", text: piece } }, "content_block_delta")
        )
      }
    } else {
      events.push(
        sse({ type: "content_block_start", index, content_block: { ...block, input: {} } }, "content_block_start")
      )
      for (const piece of split(JSON.stringify(block.input), 2)) {
        events.push(
          sse(
            { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: piece } },
            "content_block_delta"
          )
        )
      }
    }
    events.push(sse({ type: "content_block_stop", index }, "content_block_stop"))
    if (index === 0) events.push(sse({ type: "ping" }, "ping"))
  })
  events.push(sse({
    type: "message_delta",
    delta: { stop_reason: stop, stop_sequence: null },
    usage: { output_tokens: usage.output_tokens }
  }, "message_delta"))
  events.push(sse({ type: "message_stop" }, "message_stop"))
  return { json, events }
}

// ---------------------------------------------------------------------------------------------------------------
// The server

const wireOf = (path: string): Wire | "other" =>
  path.endsWith("/chat/completions") ? "openai" : path.endsWith("/messages") ? "anthropic" : "other"

/** Starts a fake provider (promise form, for scripts). */
export const start = (options: StartOptions = {}): Promise<FakeProvider> => {
  const queue: Array<Behaviour> = [...(options.script ?? [])]
  const fallback = options.fallback ?? demo
  const pieces = options.textPieces ?? 3
  const requests: Array<RecordedRequest> = []
  const refusals: Array<{ readonly n: number; readonly message: string }> = []
  const issued: Rules.Issued = { secret: `fake-secret-${Math.random()}`, redacted: new Set() }
  const cache = new Map<string, number>()
  const record = options.record ?? true
  let arrived = 0
  const timers = new Set<NodeJS.Timeout>()
  let holds: Array<() => void> = []
  let onClose: () => void = () => undefined
  const closed = new Promise<void>((resolve) => {
    onClose = resolve
  })

  const render = (request: RecordedRequest, spec: ReplySpec): Rendered => {
    const model = spec.model ?? (typeof request.body.model === "string" ? request.body.model : "fake-model")
    return request.wire === "anthropic"
      ? renderAnthropic(spec, request.n, model, pieces, {
        thinking: Rules.thinkingOn(request.body),
        issued,
        cache: Rules.cacheUsage(request.body, cache)
      })
      : renderOpenAi(spec, request.n, model, pieces, asRecord(request.body.stream_options).include_usage === true)
  }

  const sseHead = (res: http.ServerResponse) =>
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })

  const destroyAfterFlush = (res: http.ServerResponse) => res.write("", () => res.socket?.destroy())

  const play = async (behaviour: Behaviour, request: RecordedRequest, res: http.ServerResponse): Promise<void> => {
    switch (behaviour._tag) {
      case "Reply": {
        const rendered = render(request, behaviour.reply)
        if (!request.stream) {
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify(rendered.json))
          return
        }
        sseHead(res)
        for (const [i, event] of rendered.events.entries()) {
          if (behaviour.holdAfter !== undefined && i === behaviour.holdAfter) {
            await new Promise<void>((resolve) => holds.push(resolve))
          }
          if (res.destroyed) return
          res.write(event)
        }
        res.end()
        return
      }
      case "Status": {
        const body = typeof behaviour.body === "string" ? behaviour.body : JSON.stringify(behaviour.body)
        res.writeHead(behaviour.status, {
          "content-type": typeof behaviour.body === "string" ? "text/plain" : "application/json",
          ...behaviour.headers
        })
        res.end(body)
        return
      }
      case "Await": {
        await Promise.race([behaviour.until, closed])
        if (res.destroyed || res.writableEnded) return
        return play(behaviour.then, request, res)
      }
      case "SlowFirstByte": {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            timers.delete(timer)
            resolve()
          }, behaviour.delayMs)
          timers.add(timer)
          res.on("close", () => {
            clearTimeout(timer)
            timers.delete(timer)
            resolve()
          })
        })
        if (res.destroyed || res.writableEnded) return
        return play(behaviour.then, request, res)
      }
      case "DropMidBody": {
        const body = JSON.stringify(render(request, behaviour.reply).json)
        res.writeHead(200, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) })
        res.write(body.slice(0, Math.floor(body.length / 2)))
        destroyAfterFlush(res)
        return
      }
      case "BreakStream":
      case "StreamError": {
        const rendered = render(request, behaviour.reply)
        sseHead(res)
        for (const event of rendered.events.slice(0, behaviour.afterEvents)) res.write(event)
        if (behaviour._tag === "StreamError") {
          const error = { type: "error", error: behaviour.error }
          res.end(request.wire === "anthropic" ? sse(error, "error") : sse({ error: behaviour.error }))
        } else if (behaviour.clean === true) res.end()
        else destroyAfterFlush(res)
        return
      }
      case "MalformedJson": {
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{\"id\": \"broken\", \"choices\": [ {\"message\": ")
        return
      }
      case "Oversized": {
        res.writeHead(200, { "content-type": "application/json" })
        const chunk = "x".repeat(64 * 1024)
        res.write("{\"id\":\"huge\",\"padding\":\"")
        let sent = 0
        while (sent < behaviour.bytes && !res.destroyed) {
          const ok = res.write(chunk)
          sent += chunk.length
          if (!ok) {
            await new Promise<void>((resolve) => {
              const done = () => {
                res.off("drain", done)
                res.off("close", done)
                resolve()
              }
              res.on("drain", done)
              res.on("close", done)
            })
          }
        }
        if (!res.destroyed) res.end("\"}")
        return
      }
      case "Raw": {
        res.writeHead(behaviour.status ?? 200, { "content-type": "application/json", ...behaviour.headers })
        const chunks = typeof behaviour.body === "string" ? [behaviour.body] : behaviour.body
        for (const chunk of chunks) res.write(chunk)
        res.end()
        return
      }
    }
  }

  const server = http.createServer((req, res) => {
    res.on("error", () => undefined)
    const parts: Array<Buffer> = []
    req.on("data", (part: Buffer) => parts.push(part))
    req.on("end", () => {
      const text = Buffer.concat(parts).toString("utf8")
      let body: Record<string, unknown>
      try {
        body = asRecord(JSON.parse(text))
      } catch {
        body = { raw: text }
      }
      const path = req.url ?? "/"
      const request: RecordedRequest = {
        n: ++arrived,
        wire: wireOf(path),
        path,
        headers: req.headers,
        body,
        stream: body.stream === true,
        at: performance.now()
      }
      if (record) requests.push(request)
      if (req.method !== "POST" || request.wire === "other") {
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ error: { message: `no route for ${req.method} ${path}`, type: "not_found_error" } }))
        return
      }
      const refusal = request.wire === "anthropic"
        ? Rules.checkAnthropic(body, issued)
        : Rules.checkOpenAi(body, { refuseReasoningContent: options.refuseReasoningContent ?? false })
      if (refusal !== undefined) {
        refusals.push({ n: request.n, message: refusal.message })
        res.writeHead(refusal.status, { "content-type": "application/json" })
        res.end(JSON.stringify(refusal.body))
        return
      }
      const behaviour = queue.shift() ?? fallback(request)
      play(behaviour, request, res).catch(() => res.destroy())
    })
  })

  // Longer than any pause a test waits between two requests on one connection, so a pooled connection is never
  // closed under a client that is about to reuse it (the adapters also retry such a stale connection).
  server.keepAliveTimeout = 60_000
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(options.port ?? 0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      const url = `http://127.0.0.1:${port}`
      resolve({
        url,
        openAiBaseUrl: `${url}/v1`,
        anthropicBaseUrl: url,
        requests,
        refusals,
        sign: (thinking) => Rules.sign(issued.secret, thinking),
        count: () => arrived,
        enqueue: (...behaviours) => queue.push(...behaviours),
        release: () => {
          const pending = holds
          holds = []
          pending.forEach((resolveHold) => resolveHold())
        },
        close: () =>
          new Promise<void>((done) => {
            timers.forEach((timer) => clearTimeout(timer))
            timers.clear()
            holds.forEach((resolveHold) => resolveHold())
            holds = []
            onClose()
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })
}

/** Starts a fake provider for the life of the scope. */
export const make = (options: StartOptions = {}): Effect.Effect<FakeProvider, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => start(options)),
    (server) => Effect.promise(() => server.close())
  )
