/**
 * Scripted — a `ModelProvider` that plays a fixed list of steps: replies, classified faults, delays (on the Effect
 * clock, so TestClock drives them) and defects. Tests, the demo and the benchmark use it to put the loop and the
 * provider chain through exact situations without a network. The landing's finalize call (a request with a
 * `responseSchema`) is answered by `report` WITHOUT consuming the script, so a script describes the burst only.
 */
import { Effect } from "effect"
import type { ErrorKind } from "../domain/ErrorKind.js"
import { ProviderError } from "../domain/Errors.js"
import type { FinishReason, ModelReply, ReasoningPart, ToolCall } from "../domain/Message.js"
import { Usage } from "../domain/Usage.js"
import * as Cost from "../rails/Cost.js"
import type { ModelProvider, ModelRequest } from "./ModelProvider.js"
import { defaultAttempt } from "./ModelProvider.js"
import { withProvider } from "./ProviderError.js"

/** One scripted answer. */
export type Step =
  | { readonly _tag: "Reply"; readonly reply: ModelReply }
  | { readonly _tag: "Fault"; readonly error: ProviderError }
  /** Sleeps `millis` with `Effect.sleep` (TestClock-controllable), then plays `then`. */
  | { readonly _tag: "Delay"; readonly millis: number; readonly then: Step }
  /** Dies (`Effect.dieMessage`): a crash inside the provider, to test crash handling. */
  | { readonly _tag: "Defect"; readonly message: string }

/** A tool call as a script writes it: object arguments are JSON-stringified; a missing id is assigned on play. */
export interface CallSpec {
  readonly name: string
  readonly arguments: string | object
  readonly id?: string
}

const usageOf = (usage: Partial<{ input: number; output: number }> | undefined): Usage =>
  new Usage({
    inputTokens: usage?.input ?? 10,
    outputTokens: usage?.output ?? 5,
    cacheReadTokens: 0,
    cacheWriteTokens: 0
  })

// An empty id marks "assign on play": ids are `call_<n>`, counted per provider, like a model numbering its calls.
const toToolCall = (call: CallSpec): ToolCall => ({
  id: call.id ?? "",
  name: call.name,
  arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments)
})

const reply = (
  finishReason: FinishReason,
  text: string,
  calls: ReadonlyArray<CallSpec> = [],
  usage?: Partial<{ input: number; output: number }>
): Step => ({
  _tag: "Reply",
  reply: { text, toolCalls: calls.map(toToolCall), finishReason, usage: usageOf(usage), model: "" }
})

/** A reasoning part as a script writes it: the provider that plays it stamps its own name, as an adapter does. */
export type ScriptedReasoning = ReasoningPart extends infer P ? P extends ReasoningPart ? Omit<P, "provider"> : never
  : never

/**
 * `step` (a reply) with the reasoning a thinking model returns with it — Anthropic `thinking` / `redacted_thinking`
 * blocks, Responses `reasoning` items, compatible servers' `reasoning_text` — and `reasoningTokens` more output
 * tokens, counted as reasoning (providers bill reasoning as output). Other steps are returned unchanged.
 */
export const withReasoning = (
  step: Step,
  parts: ReadonlyArray<ScriptedReasoning>,
  reasoningTokens = 0
): Step =>
  step._tag !== "Reply" ? step : {
    _tag: "Reply",
    reply: {
      ...step.reply,
      reasoning: parts as ReadonlyArray<ReasoningPart>,
      usage: new Usage({
        ...step.reply.usage,
        outputTokens: step.reply.usage.outputTokens + reasoningTokens,
        reasoningTokens: step.reply.usage.reasoningTokens + reasoningTokens
      })
    }
  }

/** A plain text reply, finish reason `stop` (usage defaults to 10 input / 5 output tokens). */
export const text = (text: string, usage?: Partial<{ input: number; output: number }>): Step =>
  reply("stop", text, [], usage)

/** A reply asking for tool calls, finish reason `tool_calls`; ids default to `call_<n>` counted per provider. */
export const toolCalls = (calls: ReadonlyArray<CallSpec>, text = ""): Step => reply("tool_calls", text, calls)

/** An empty reply: no text, no calls, finish reason `stop` (the loop nudges). */
export const empty = (): Step => reply("stop", "")

/** A reply cut at the output limit, finish reason `length`; its calls (arguments may be cut) get dropped by the loop. */
export const length = (calls: ReadonlyArray<CallSpec> = [], text = "(cut off"): Step => reply("length", text, calls)

/** A reply stopped by the provider's content filter, finish reason `filtered`. */
export const filtered = (): Step => reply("filtered", "")

/** The model declined, finish reason `refused`. */
export const refused = (): Step => reply("refused", "I can't help with that.")

const defaultStatus: Partial<Record<ErrorKind, number>> = {
  auth: 401,
  quota: 429,
  rate_limit: 429,
  overloaded: 529,
  server: 500,
  context_overflow: 400,
  bad_request: 400
}

/**
 * A classified provider failure of `kind` (the status defaults to the usual one for the kind; `usage` is what the
 * failed attempt still charged, none by default).
 */
export const fault = (
  kind: ErrorKind,
  options: {
    readonly status?: number
    readonly retryAfterMs?: number
    readonly message?: string
    readonly usage?: Partial<{ input: number; output: number }>
  } = {}
): Step => {
  const status = options.status ?? defaultStatus[kind]
  return {
    _tag: "Fault",
    error: new ProviderError({
      kind,
      message: options.message ?? `scripted ${kind}`,
      ...(status !== undefined ? { status } : {}),
      ...(options.retryAfterMs !== undefined ? { retryAfterMs: options.retryAfterMs } : {}),
      ...(options.usage !== undefined ? { usage: usageOf(options.usage) } : {})
    })
  }
}

/** Sleeps `millis` on the Effect clock, then plays `then` (an attempt timeout can interrupt the sleep). */
export const delay = (millis: number, then: Step): Step => ({ _tag: "Delay", millis, then })

/** Dies with `message`: a defect, not a `ProviderError`. */
export const defect = (message: string): Step => ({ _tag: "Defect", message })

/** A scripted provider: the port plus the requests it received, in order, and how many script steps are left. */
export interface Scripted extends ModelProvider {
  /** Every request received, finalize calls included (empty when `record: false`). */
  readonly requests: ReadonlyArray<ModelRequest>
  /** Script steps not yet played. */
  readonly remaining: number
}

/**
 * The default answer to a finalize call: valid against `domain/Report` `defaultReportSchema`, its summary what the
 * model last said in the transcript (a scripted session that answered must not report "no findings").
 */
export const defaultReport = (request: ModelRequest): Step => {
  const said = [...request.messages].reverse().find((entry) =>
    entry.kind === "assistant" && entry.text.trim().length > 0
  )
  return text(JSON.stringify({
    summary: said?.kind === "assistant"
      ? `The model said: ${said.text.trim()}`
      : "The scripted session ended before the model said anything.",
    findings: [],
    confidence: "low",
    nextSteps: []
  }))
}

/**
 * A provider that plays `script` one step per request, then `whenDone` (default: a text reply saying the script has
 * ended) for every request after that. Requests carrying `responseSchema` are answered by `report` without
 * consuming a step. Every reply's `model` is this provider's model and its `raw` is the script step, verbatim.
 * Faults fail with their `ProviderError` (stamped with this provider's name); `Defect` steps die. A reply whose
 * output tokens exceed the request's `maxTokens` is cut there like a provider cuts it (finish `length`, no calls).
 * `pricing` (USD per million tokens) prices its attempts (`rails/Cost`), for tests of cost budgets.
 */
export const make = (options: {
  readonly name?: string
  readonly model?: string
  readonly pricing?: Cost.UsdPerMTok
  readonly script: ReadonlyArray<Step>
  readonly timeoutMs?: number
  readonly maxAttempts?: number
  readonly whenDone?: Step
  readonly report?: (request: ModelRequest) => Step
  readonly record?: boolean
}): Scripted => {
  const name = options.name ?? "scripted"
  const model = options.model ?? "scripted-model"
  const whenDone = options.whenDone ?? text("(the script has ended)")
  const report = options.report ?? defaultReport
  const record = options.record ?? true
  const log: Array<ModelRequest> = []
  let cursor = 0
  let callCounter = 0

  // A reply longer than the request's output cap is cut there, as a provider cuts it: finish `length`, no calls.
  const capped = (scripted: ModelReply, maxTokens: number | undefined): ModelReply =>
    maxTokens === undefined || scripted.usage.outputTokens <= maxTokens ? scripted : {
      ...scripted,
      toolCalls: [],
      finishReason: "length",
      usage: new Usage({
        ...scripted.usage,
        outputTokens: maxTokens,
        reasoningTokens: Math.min(scripted.usage.reasoningTokens, maxTokens)
      })
    }

  const finish = (scripted: ModelReply, verbatim: Step): ModelReply => ({
    ...scripted,
    toolCalls: scripted.toolCalls.map((call) => call.id === "" ? { ...call, id: `call_${++callCounter}` } : call),
    ...(scripted.reasoning === undefined ? {} : {
      reasoning: scripted.reasoning.map((part) => ({ ...part, provider: name }))
    }),
    model,
    raw: verbatim
  })

  const play = (step: Step, verbatim: Step, maxTokens?: number): Effect.Effect<ModelReply, ProviderError> => {
    switch (step._tag) {
      case "Reply":
        return Effect.sync(() => finish(capped(step.reply, maxTokens), verbatim))
      case "Fault":
        return Effect.fail(withProvider(step.error, name))
      case "Delay":
        return Effect.zipRight(Effect.sleep(step.millis), Effect.suspend(() => play(step.then, verbatim, maxTokens)))
      case "Defect":
        return Effect.dieMessage(step.message)
    }
  }

  // The step is taken when the attempt starts: an attempt cut short by its timeout still used its step.
  const complete = (request: ModelRequest): Effect.Effect<ModelReply, ProviderError> =>
    Effect.suspend(() => {
      if (record) log.push(request)
      if (request.responseSchema !== undefined) {
        const answer = report(request)
        return play(answer, answer)
      }
      const step = options.script[cursor]
      if (step === undefined) return play(whenDone, whenDone, request.maxTokens)
      cursor++
      return play(step, step, request.maxTokens)
    })

  return {
    name,
    model,
    timeoutMs: options.timeoutMs ?? defaultAttempt.timeoutMs,
    maxAttempts: options.maxAttempts ?? defaultAttempt.maxAttempts,
    ...(options.pricing === undefined ? {} : { pricing: Cost.fromUsd(options.pricing) }),
    complete,
    get requests() {
      return log
    },
    get remaining() {
      return Math.max(0, options.script.length - cursor)
    }
  }
}

/**
 * A stateless provider answering every request with `reply(request)`, synchronously and without recording: the
 * zero-latency benchmark's model, so it must stay cheap. A throw inside `reply` becomes a defect.
 */
export const fromFunction = (options: {
  readonly name?: string
  readonly model?: string
  readonly reply: (request: ModelRequest) => ModelReply
  /** USD per million tokens: prices its attempts (`rails/Cost`). */
  readonly pricing?: Cost.UsdPerMTok
}): ModelProvider => ({
  name: options.name ?? "function",
  model: options.model ?? "function-model",
  timeoutMs: defaultAttempt.timeoutMs,
  maxAttempts: defaultAttempt.maxAttempts,
  ...(options.pricing === undefined ? {} : { pricing: Cost.fromUsd(options.pricing) }),
  complete: (request) => Effect.sync(() => options.reply(request))
})
