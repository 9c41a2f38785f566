/**
 * A strict fake of the OpenAI Responses API: a REAL HTTP server on 127.0.0.1 (random port) answering
 * `POST /v1/responses`, streamed and not, so the adapter's HTTP, SSE and classification code runs for real.
 *
 * Strict: before any scripted behaviour, every request is checked against the API's documented rules, and one
 * that breaks a rule is refused as the API refuses it — status and OpenAI's error body (`{ error: { message, type,
 * param, code } }`) — and recorded in `refusals` (the queue is not consumed):
 * - top-level parameters the API does not have: `messages`, `max_tokens`, `response_format` … → 400 unsupported
 *   (moved), anything else unknown → 400 unknown parameter; `reasoning.effort` / `reasoning.summary` outside their
 *   values → 400 invalid value; `max_output_tokens` below 16 → 400; a tool without its top-level `name` (a Chat
 *   Completions tool) → 400 missing;
 * - a `reasoning` input item without `encrypted_content` → 404 not found (nothing is stored); with an encrypted
 *   content this server did not issue, or issued for another item, or altered → 400 `invalid_encrypted_content`;
 *   one not followed by an item it could have led to (an assistant message, a function call, another reasoning
 *   item) → 400 "… provided without its required following item";
 * - a `function_call` input item carrying an item `id` whose reasoning item (issued with it, in the same output)
 *   is missing, or separated from it by anything but that output's other items → 400 "… provided without its
 *   required 'reasoning' item: 'rs_…'";
 * - a `function_call_output` whose `call_id` answers no earlier `function_call` of the input → 400 "No tool call
 *   found for function call output with call_id …"; two input items with the same `id` → 400 duplicate item.
 *
 * Replies: when the request configures `reasoning`, a reasoning item comes first (its `encrypted_content` only when
 * `include` asks for `reasoning.encrypted_content`, as the API did before it sent it by default), then the text
 * message, then the function calls; usage reports `reasoning_tokens`, and `cached_tokens` when a request repeats a
 * `prompt_cache_key` already seen. Streams follow the API's event sequence (created, in_progress, output_item.added,
 * the deltas, output_item.done, completed / incomplete / failed), each event with its `sequence_number`.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { demoReport, retryAfterHeaders, sampleArgs } from "./FakeProvider.js"
import type { RetryAfter } from "./FakeProvider.js"

/** One request the server received. */
export interface RecordedRequest {
  readonly n: number
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: Record<string, unknown>
  readonly stream: boolean
}

/** A request the server refused under one of the API's rules. */
export interface Refusal {
  readonly n: number
  readonly status: number
  readonly error: WireError
}

/** OpenAI's error object. */
export interface WireError {
  readonly message: string
  readonly type: string
  readonly param: string | null
  readonly code: string | null
}

/** A model reply, rendered as a response's output items. */
export interface ReplySpec {
  readonly text?: string
  readonly toolCalls?: ReadonlyArray<{ readonly name: string; readonly arguments: unknown }>
  readonly refusal?: string
  /** Issue a reasoning item (default: when the request configures `reasoning`). */
  readonly reasoning?: boolean
  readonly summary?: ReadonlyArray<string>
  readonly reasoningTokens?: number
  readonly incomplete?: "max_output_tokens" | "content_filter"
  readonly usage?: { readonly input?: number; readonly output?: number }
}

/** What the server does with one (valid) request. */
export type Behaviour =
  | { readonly _tag: "Reply"; readonly reply: ReplySpec }
  /** A response with `status: "failed"` and this error (a 200, or a `response.failed` event when streamed). */
  | { readonly _tag: "Failed"; readonly error: { readonly code: string; readonly message: string } }
  | {
    readonly _tag: "Status"
    readonly status: number
    readonly body: string | object
    readonly headers?: Readonly<Record<string, string>>
  }
  /** A streamed reply cut after `afterEvents` events: the socket destroyed, or (clean) the response ended. */
  | { readonly _tag: "BreakStream"; readonly reply: ReplySpec; readonly afterEvents: number; readonly clean: boolean }
  /** A streamed reply interrupted after `afterEvents` events by an `error` event. */
  | {
    readonly _tag: "ErrorEvent"
    readonly reply: ReplySpec
    readonly afterEvents: number
    readonly error: { readonly code: string; readonly message: string }
  }
  /** Sends nothing for `delayMs` (the client gives up first; the timer is cleared on close), then plays `then`. */
  | { readonly _tag: "Slow"; readonly delayMs: number; readonly then: Behaviour }
  /** Exact bytes (a recorded fixture), with a status and headers. */
  | {
    readonly _tag: "Raw"
    readonly status?: number
    readonly headers?: Readonly<Record<string, string>>
    readonly body: string
  }

export const reply = (spec: ReplySpec): Behaviour => ({ _tag: "Reply", reply: spec })
export const text = (value: string): Behaviour => reply({ text: value })
export const failed = (code: string, message: string): Behaviour => ({ _tag: "Failed", error: { code, message } })
export const status = (
  code: number,
  body: string | object = "",
  headers: Readonly<Record<string, string>> = {}
): Behaviour => ({ _tag: "Status", status: code, body, headers })
/** A 429 as OpenAI sends it, with a Retry-After in one of its forms (or none). */
export const rateLimited = (retryAfter?: RetryAfter): Behaviour =>
  status(
    429,
    apiError("Rate limit reached for gpt-5 on tokens per min (TPM).", "tokens", null, "rate_limit_exceeded"),
    {
      ...(retryAfter ? retryAfterHeaders(retryAfter) : {})
    }
  )
export const breakStream = (spec: ReplySpec, afterEvents: number, clean = false): Behaviour => ({
  _tag: "BreakStream",
  reply: spec,
  afterEvents,
  clean
})
export const errorEvent = (spec: ReplySpec, afterEvents: number, code: string, message: string): Behaviour => ({
  _tag: "ErrorEvent",
  reply: spec,
  afterEvents,
  error: { code, message }
})

/** Waits `delayMs` before answering with `then`. */
export const slow = (delayMs: number, then: Behaviour = text("late")): Behaviour => ({ _tag: "Slow", delayMs, then })

/** Exact bytes: a JSON body by default, or an event stream (`content-type: text/event-stream`). */
export const raw = (
  body: string,
  options: { readonly status?: number; readonly headers?: Readonly<Record<string, string>> } = {}
): Behaviour => ({ _tag: "Raw", body, ...options })

/** An SSE body for `events` (each with its `type`), as the API streams them. */
export const sseBody = (events: ReadonlyArray<Record<string, unknown>>): string =>
  events.map((event) => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`).join("")

/** OpenAI's error body. */
export const apiError = (
  message: string,
  type = "invalid_request_error",
  param: string | null = null,
  code: string | null = null
): { readonly error: WireError } => ({ error: { message, type, param, code } })

/** A running fake. */
export interface FakeResponses {
  readonly url: string
  /** The base URL to configure (`…/v1`). */
  readonly baseUrl: string
  readonly requests: ReadonlyArray<RecordedRequest>
  readonly refusals: ReadonlyArray<Refusal>
  readonly enqueue: (...behaviours: ReadonlyArray<Behaviour>) => void
  /** POSTs `body` as JSON to `/v1/responses` and returns the status and parsed body (for the rule tests). */
  readonly post: (body: unknown) => Promise<{ readonly status: number; readonly body: unknown }>
  readonly close: () => Promise<void>
}

export interface StartOptions {
  readonly script?: ReadonlyArray<Behaviour>
  /** Decides when the queue is empty (default: `demo(1)`). */
  readonly fallback?: (request: RecordedRequest) => Behaviour
  readonly textPieces?: number
  /** Check the API's rules before answering (default true); off only to inspect what an adapter sends. */
  readonly strict?: boolean
}

const asRecord = (u: unknown): Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? u as Record<string, unknown> : {}
const asArray = (u: unknown): ReadonlyArray<unknown> => Array.isArray(u) ? u : []

/** How many `function_call_output` items the request's input holds. */
export const outputs = (request: RecordedRequest): number =>
  asArray(request.body.input).filter((item) => asRecord(item).type === "function_call_output").length

/**
 * The default conversation: a finalize call (`text.format`) gets `demoReport`; a request offering tools gets a call
 * of the first tool (arguments from its schema, numbered per turn) until its input holds `toolTurns` outputs; then
 * a short answer.
 */
export const demo = (toolTurns = 1) => (request: RecordedRequest): Behaviour => {
  if (asRecord(asRecord(request.body.text).format).type === "json_schema") return text(JSON.stringify(demoReport))
  const tool = asRecord(asArray(request.body.tools)[0])
  const done = outputs(request)
  if (typeof tool.name === "string" && done < toolTurns) {
    const args = sampleArgs(tool.parameters)
    return reply({
      text: done === 0 ? "Let me look." : "",
      toolCalls: [{ name: tool.name, arguments: { ...args, ...("q" in args ? { q: `turn ${done + 1}` } : {}) } }]
    })
  }
  return text("The investigation is complete: nothing is wrong.")
}

// ---------------------------------------------------------------------------------------------------------------
// The rules

const parameters = new Set([
  "model",
  "input",
  "instructions",
  "store",
  "include",
  "tools",
  "tool_choice",
  "parallel_tool_calls",
  "max_tool_calls",
  "reasoning",
  "max_output_tokens",
  "prompt_cache_key",
  "prompt_cache_retention",
  "safety_identifier",
  "text",
  "stream",
  "stream_options",
  "temperature",
  "top_p",
  "top_logprobs",
  "metadata",
  "user",
  "truncation",
  "service_tier",
  "background",
  "previous_response_id",
  "conversation",
  "prompt"
])
const moved: Readonly<Record<string, string>> = {
  messages: "input",
  max_tokens: "max_output_tokens",
  max_completion_tokens: "max_output_tokens",
  response_format: "text.format",
  reasoning_effort: "reasoning.effort"
}
const efforts = ["minimal", "low", "medium", "high"]
const summaries = ["auto", "concise", "detailed"]

const refuse = (status: number, error: ReturnType<typeof apiError>) => ({ status, error: error.error })

const invalidValue = (value: unknown, param: string, allowed: ReadonlyArray<string>) =>
  refuse(
    400,
    apiError(
      `Invalid value: '${String(value)}'. Supported values are: ${
        allowed.slice(0, -1).map((v) => `'${v}'`).join(", ")
      }, and '${allowed.at(-1)}'.`,
      "invalid_request_error",
      param,
      "invalid_value"
    )
  )

/** What this server issued, so items sent back can be checked. */
interface Issued {
  /** encrypted_content → the reasoning item it was issued for. */
  readonly encrypted: Map<string, string>
  /** function_call item id → the reasoning item issued before it in the same output (none: no reasoning). */
  readonly callReasoning: Map<string, string | undefined>
}

const isAssistantItem = (item: Record<string, unknown>): boolean =>
  item.type === "function_call" || (item.type === "message" && item.role === "assistant") ||
  (item.type === undefined && item.role === "assistant")

/** The first rule `body` breaks, as the API's refusal; `undefined` when it breaks none. */
const check = (
  body: Record<string, unknown>,
  issued: Issued
): { readonly status: number; readonly error: WireError } | undefined => {
  for (const key of Object.keys(body)) {
    if (parameters.has(key)) continue
    const to = moved[key]
    if (to !== undefined) {
      return refuse(
        400,
        apiError(
          `Unsupported parameter: '${key}'. In the Responses API, this parameter has moved to '${to}'. Try again ` +
            "with the new parameter. See the API documentation for more information: " +
            "https://platform.openai.com/docs/api-reference/responses/create.",
          "invalid_request_error",
          key,
          "unsupported_parameter"
        )
      )
    }
    return refuse(400, apiError(`Unknown parameter: '${key}'.`, "invalid_request_error", key, "unknown_parameter"))
  }
  const reasoning = asRecord(body.reasoning)
  if (reasoning.effort !== undefined && !efforts.includes(String(reasoning.effort))) {
    return invalidValue(reasoning.effort, "reasoning.effort", efforts)
  }
  if (reasoning.summary !== undefined && !summaries.includes(String(reasoning.summary))) {
    return invalidValue(reasoning.summary, "reasoning.summary", summaries)
  }
  if (typeof body.max_output_tokens === "number" && body.max_output_tokens < 16) {
    return refuse(
      400,
      apiError(
        "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got " +
          `${body.max_output_tokens} instead.`,
        "invalid_request_error",
        "max_output_tokens",
        "integer_below_min_value"
      )
    )
  }
  for (const [i, entry] of asArray(body.tools).entries()) {
    if (typeof asRecord(entry).name !== "string") {
      return refuse(
        400,
        apiError(
          `Missing required parameter: 'tools[${i}].name'.`,
          "invalid_request_error",
          `tools[${i}].name`,
          "missing_required_parameter"
        )
      )
    }
  }
  const input = asArray(body.input).map(asRecord)
  const calls = new Set<string>()
  const ids = new Set<string>()
  for (const [i, item] of input.entries()) {
    if (typeof item.id === "string") {
      if (ids.has(item.id)) {
        return refuse(
          400,
          apiError(
            `Duplicate item found with id ${item.id}. Remove duplicate items from your input and try again.`,
            "invalid_request_error",
            "input",
            null
          )
        )
      }
      ids.add(item.id)
    }
    if (item.type === "reasoning") {
      const id = typeof item.id === "string" ? item.id : undefined
      const encrypted = item.encrypted_content
      if (typeof encrypted !== "string" || encrypted === "") {
        return refuse(
          404,
          apiError(
            `Item with id '${id ?? ""}' not found. Items are not persisted when \`store\` is set to false. Try ` +
              "again with `store` set to true, or remove this item from your input.",
            "invalid_request_error",
            "input",
            null
          )
        )
      }
      const issuedFor = issued.encrypted.get(encrypted)
      if (issuedFor === undefined || (id !== undefined && id !== issuedFor)) {
        return refuse(
          400,
          apiError(
            `The encrypted content for item ${id ?? "reasoning"} could not be verified. Reason: Encrypted content ` +
              "could not be decrypted or parsed.",
            "invalid_request_error",
            null,
            "invalid_encrypted_content"
          )
        )
      }
      const next = input[i + 1]
      if (next === undefined || !(next.type === "reasoning" || isAssistantItem(next))) {
        return refuse(
          400,
          apiError(
            `Item '${id ?? issuedFor}' of type 'reasoning' was provided without its required following item.`,
            "invalid_request_error",
            "input",
            null
          )
        )
      }
    }
    if (item.type === "function_call") {
      if (typeof item.call_id === "string") calls.add(item.call_id)
      const id = typeof item.id === "string" ? item.id : undefined
      const required = id === undefined ? undefined : issued.callReasoning.get(id)
      if (id !== undefined && required !== undefined) {
        // The reasoning item must come before the call, with only items of the same output in between.
        let j = i - 1
        while (j >= 0 && input[j]?.type !== "reasoning" && isAssistantItem(input[j]!)) j--
        const found = input[j]
        const sameOutput = found !== undefined && found.type === "reasoning" &&
          (found.id === required || issued.encrypted.get(String(found.encrypted_content)) === required)
        if (!sameOutput) {
          return refuse(
            400,
            apiError(
              `Item '${id}' of type 'function_call' was provided without its required 'reasoning' item: '${required}'.`,
              "invalid_request_error",
              "input",
              null
            )
          )
        }
      }
    }
    if (item.type === "function_call_output" && !calls.has(String(item.call_id))) {
      return refuse(
        400,
        apiError(
          `No tool call found for function call output with call_id ${String(item.call_id)}.`,
          "invalid_request_error",
          "input",
          null
        )
      )
    }
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Rendering

const split = (value: string, pieces: number): Array<string> => {
  if (value === "") return []
  const size = Math.max(1, Math.ceil(value.length / pieces))
  const out: Array<string> = []
  for (let i = 0; i < value.length; i += size) out.push(value.slice(i, i + size))
  return out
}

interface Rendered {
  readonly response: Record<string, unknown>
  /** [type, payload without type/sequence_number] per event. */
  readonly events: ReadonlyArray<readonly [string, Record<string, unknown>]>
}

/** Starts a fake (promise form). */
export const start = (options: StartOptions = {}): Promise<FakeResponses> => {
  const queue: Array<Behaviour> = [...(options.script ?? [])]
  const fallback = options.fallback ?? demo(1)
  const pieces = options.textPieces ?? 3
  const requests: Array<RecordedRequest> = []
  const refusals: Array<Refusal> = []
  const issued: Issued = { encrypted: new Map(), callReasoning: new Map() }
  const cacheKeys = new Map<string, number>()
  let arrived = 0
  const timers = new Set<NodeJS.Timeout>()

  const render = (request: RecordedRequest, spec: ReplySpec, failure?: Behaviour & { _tag: "Failed" }): Rendered => {
    const n = request.n
    const body = request.body
    const model = typeof body.model === "string" ? body.model : "fake-model"
    const reasons = spec.reasoning ?? body.reasoning !== undefined
    const encrypt = asArray(body.include).includes("reasoning.encrypted_content")
    const output: Array<Record<string, unknown>> = []
    let rs: string | undefined
    if (reasons && failure === undefined) {
      rs = `rs_fake_${n}`
      const encrypted = `gAAAAA.fake.${Buffer.from(JSON.stringify({ rs, n })).toString("base64")}`
      issued.encrypted.set(encrypted, rs)
      output.push({
        id: rs,
        type: "reasoning",
        summary: (spec.summary ?? ["**Planning** I will look before answering."]).map((t) => ({
          type: "summary_text",
          text: t
        })),
        ...(encrypt ? { encrypted_content: encrypted } : {})
      })
    }
    if (failure === undefined && (spec.text !== undefined && spec.text !== "" || spec.refusal !== undefined)) {
      output.push({
        id: `msg_fake_${n}`,
        type: "message",
        status: spec.incomplete !== undefined ? "incomplete" : "completed",
        role: "assistant",
        content: spec.refusal !== undefined
          ? [{ type: "refusal", refusal: spec.refusal }]
          : [{ type: "output_text", text: spec.text, annotations: [], logprobs: [] }]
      })
    }
    for (const [k, call] of (failure === undefined ? spec.toolCalls ?? [] : []).entries()) {
      const id = `fc_fake_${n}_${k}`
      issued.callReasoning.set(id, rs)
      output.push({
        id,
        type: "function_call",
        status: "completed",
        arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments),
        call_id: `call_fake_${n}_${k}`,
        name: call.name
      })
    }
    const size = Math.ceil(JSON.stringify([body.instructions, body.input, body.tools]).length / 4)
    const input = spec.usage?.input ?? size
    const key = typeof body.prompt_cache_key === "string" ? body.prompt_cache_key : undefined
    const seen = key === undefined ? undefined : cacheKeys.get(key)
    if (key !== undefined) cacheKeys.set(key, input)
    const reasoningTokens = rs !== undefined ? spec.reasoningTokens ?? 64 : 0
    const outputTokens = (spec.usage?.output ?? 7) + reasoningTokens
    const response = {
      id: `resp_fake_${n}`,
      object: "response",
      created_at: 1_700_000_000 + n,
      status: failure !== undefined ? "failed" : spec.incomplete !== undefined ? "incomplete" : "completed",
      error: failure !== undefined ? failure.error : null,
      incomplete_details: spec.incomplete !== undefined ? { reason: spec.incomplete } : null,
      instructions: body.instructions ?? null,
      max_output_tokens: body.max_output_tokens ?? null,
      model,
      output,
      parallel_tool_calls: true,
      previous_response_id: null,
      reasoning: { effort: asRecord(body.reasoning).effort ?? null, summary: asRecord(body.reasoning).summary ?? null },
      store: body.store ?? true,
      temperature: 1,
      text: body.text ?? { format: { type: "text" } },
      tool_choice: "auto",
      tools: body.tools ?? [],
      top_p: 1,
      truncation: "disabled",
      usage: {
        input_tokens: input,
        input_tokens_details: { cached_tokens: seen === undefined ? 0 : Math.min(seen, input) },
        output_tokens: outputTokens,
        output_tokens_details: { reasoning_tokens: reasoningTokens },
        total_tokens: input + outputTokens
      },
      user: null,
      metadata: {}
    }
    const open = { ...response, status: "in_progress", output: [], usage: null, error: null, incomplete_details: null }
    const events: Array<readonly [string, Record<string, unknown>]> = [
      ["response.created", { response: open }],
      ["response.in_progress", { response: open }]
    ]
    output.forEach((item, index) => {
      const id = item.id
      if (item.type === "reasoning") {
        events.push(["response.output_item.added", {
          output_index: index,
          item: { id, type: "reasoning", summary: [] }
        }])
        asArray(item.summary).forEach((part, s) => {
          const t = String(asRecord(part).text)
          const at = { item_id: id, output_index: index, summary_index: s }
          events.push(["response.reasoning_summary_part.added", { ...at, part: { type: "summary_text", text: "" } }])
          for (const piece of split(t, 2)) {
            events.push(["response.reasoning_summary_text.delta", { ...at, delta: piece }])
          }
          events.push(["response.reasoning_summary_text.done", { ...at, text: t }])
          events.push(["response.reasoning_summary_part.done", { ...at, part: { type: "summary_text", text: t } }])
        })
      } else if (item.type === "message") {
        events.push(["response.output_item.added", {
          output_index: index,
          item: { id, type: "message", status: "in_progress", role: "assistant", content: [] }
        }])
        const part = asRecord(asArray(item.content)[0])
        const at = { item_id: id, output_index: index, content_index: 0 }
        if (part.type === "refusal") {
          events.push(["response.content_part.added", { ...at, part: { type: "refusal", refusal: "" } }])
          events.push(["response.refusal.delta", { ...at, delta: part.refusal }])
          events.push(["response.refusal.done", { ...at, refusal: part.refusal }])
        } else {
          events.push(["response.content_part.added", {
            ...at,
            part: { type: "output_text", text: "", annotations: [], logprobs: [] }
          }])
          for (const piece of split(String(part.text), pieces)) {
            events.push(["response.output_text.delta", { ...at, delta: piece, logprobs: [] }])
          }
          events.push(["response.output_text.done", { ...at, text: part.text, logprobs: [] }])
        }
        events.push(["response.content_part.done", { ...at, part }])
      } else {
        events.push(["response.output_item.added", {
          output_index: index,
          item: { ...item, status: "in_progress", arguments: "" }
        }])
        for (const piece of split(String(item.arguments), 2)) {
          events.push(["response.function_call_arguments.delta", { item_id: id, output_index: index, delta: piece }])
        }
        events.push(["response.function_call_arguments.done", {
          item_id: id,
          output_index: index,
          name: item.name,
          arguments: item.arguments
        }])
      }
      events.push(["response.output_item.done", { output_index: index, item }])
    })
    events.push([
      failure !== undefined
        ? "response.failed"
        : spec.incomplete !== undefined
        ? "response.incomplete"
        : "response.completed",
      { response }
    ])
    return { response, events }
  }

  const sse = (type: string, payload: Record<string, unknown>, seq: number): string =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...payload, sequence_number: seq })}\n\n`

  const sseHead = (res: http.ServerResponse) =>
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" })

  const json = (res: http.ServerResponse, code: number, value: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(code, { "content-type": "application/json", ...headers })
    res.end(JSON.stringify(value))
  }

  const play = (behaviour: Behaviour, request: RecordedRequest, res: http.ServerResponse): void => {
    switch (behaviour._tag) {
      case "Status": {
        const body = typeof behaviour.body === "string" ? behaviour.body : JSON.stringify(behaviour.body)
        res.writeHead(behaviour.status, {
          "content-type": typeof behaviour.body === "string" ? "text/plain" : "application/json",
          ...behaviour.headers
        })
        res.end(body)
        return
      }
      case "Reply":
      case "Failed": {
        const rendered = behaviour._tag === "Reply"
          ? render(request, behaviour.reply)
          : render(request, {}, behaviour)
        if (!request.stream) return json(res, 200, rendered.response)
        sseHead(res)
        rendered.events.forEach(([type, payload], seq) => res.write(sse(type, payload, seq)))
        res.end()
        return
      }
      case "Slow": {
        const timer = setTimeout(() => {
          timers.delete(timer)
          if (!res.destroyed && !res.writableEnded) play(behaviour.then, request, res)
        }, behaviour.delayMs)
        timers.add(timer)
        res.on("close", () => {
          clearTimeout(timer)
          timers.delete(timer)
        })
        return
      }
      case "Raw": {
        res.writeHead(behaviour.status ?? 200, { "content-type": "application/json", ...behaviour.headers })
        res.end(behaviour.body)
        return
      }
      case "BreakStream":
      case "ErrorEvent": {
        const rendered = render(request, behaviour.reply)
        sseHead(res)
        const sent = rendered.events.slice(0, behaviour.afterEvents)
        sent.forEach(([type, payload], seq) => res.write(sse(type, payload, seq)))
        if (behaviour._tag === "ErrorEvent") {
          res.end(
            sse("error", { code: behaviour.error.code, message: behaviour.error.message, param: null }, sent.length)
          )
        } else if (behaviour.clean) res.end()
        else res.write("", () => res.socket?.destroy())
        return
      }
    }
  }

  const server = http.createServer((req, res) => {
    res.on("error", () => undefined)
    const parts: Array<Buffer> = []
    req.on("data", (part: Buffer) => parts.push(part))
    req.on("end", () => {
      const raw = Buffer.concat(parts).toString("utf8")
      let body: Record<string, unknown>
      try {
        body = asRecord(JSON.parse(raw))
      } catch {
        return json(res, 400, apiError("We could not parse the JSON body of your request."))
      }
      const path = req.url ?? "/"
      const request: RecordedRequest = { n: ++arrived, path, headers: req.headers, body, stream: body.stream === true }
      requests.push(request)
      if (req.method !== "POST" || path !== "/v1/responses") {
        return json(res, 404, apiError(`Invalid URL (${req.method} ${path})`))
      }
      const refused = options.strict === false ? undefined : check(body, issued)
      if (refused !== undefined) {
        refusals.push({ n: request.n, ...refused })
        return json(res, refused.status, { error: refused.error })
      }
      play(queue.shift() ?? fallback(request), request, res)
    })
  })
  server.keepAliveTimeout = 60_000

  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      const url = `http://127.0.0.1:${port}`
      resolve({
        url,
        baseUrl: `${url}/v1`,
        requests,
        refusals,
        enqueue: (...behaviours) => queue.push(...behaviours),
        post: async (body) => {
          const response = await fetch(`${url}/v1/responses`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(body)
          })
          const text = await response.text()
          let parsed: unknown = text
          try {
            parsed = JSON.parse(text)
          } catch {
            // an SSE body stays text
          }
          return { status: response.status, body: parsed }
        },
        close: () =>
          new Promise<void>((done) => {
            timers.forEach((timer) => clearTimeout(timer))
            timers.clear()
            server.close(() => done())
            server.closeAllConnections()
          })
      })
    })
  })
}

/** Starts a fake for the life of the scope. */
export const make = (options: StartOptions = {}): Effect.Effect<FakeResponses, never, Scope.Scope> =>
  Effect.acquireRelease(Effect.promise(() => start(options)), (server) => Effect.promise(() => server.close()))
