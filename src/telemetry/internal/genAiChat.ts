/**
 * genAiChat — the GenAI instrumentation of a model call (GenAi): one `chat {model}` span per logical call, one
 * `chat.attempt {model}` child per attempt, and the metrics they move.
 */
import type { Fiber } from "effect"
import { Clock, Context, Effect, Exit, FiberRef, Ref } from "effect"
import type { ModelReply } from "../../domain/Message.js"
import type { RailDecision } from "../../domain/Trajectory.js"
import type { Usage } from "../../domain/Usage.js"
import * as Metrics from "../Metrics.js"
import * as Spans from "../Spans.js"
import type { ProviderFacts, RequestFacts } from "./genAiFacts.js"
import { inner, usageParts, vendorOf } from "./genAiFacts.js"

/** What the chat wrapper needs of a model call (model/ProviderChain's `CallOptions`). */
export interface ChatOptions {
  readonly providers: ReadonlyArray<ProviderFacts>
  readonly state: Ref.Ref<{ readonly index: number; readonly exhausted: boolean }>
  readonly request: RequestFacts
  /** Called after every attempt with (at least) an `AttemptView`. */
  readonly onAttempt: (record: never) => Effect.Effect<void>
  readonly onDecision?: (decision: RailDecision) => Effect.Effect<void>
}

/** What the chat wrapper reads of one attempt (model/ProviderChain's `AttemptRecord`). */
export interface AttemptView {
  readonly provider: string
  readonly attempt: number
  readonly durationMs: number
  readonly reply?: ModelReply
  readonly error?: { readonly kind: string }
  readonly usage: Usage
}

/**
 * Runs one logical model call (`walk(options)`) inside its `chat {model}` span: the attempts' counts (attempts,
 * retries, failovers) on success and failure alike, the reply's model, finish reason and usage, and `error.type` (the
 * ErrorKind, or `ProviderExhausted`). Moves `gen_ai.client.operation.duration`, `gen_ai.client.token.usage`, and the
 * attempt, retry and failover metrics. Content is recorded only when `CaptureContent` is on.
 */
export const chat = <
  O extends ChatOptions,
  A extends { readonly reply: ModelReply; readonly provider: ProviderFacts },
  E,
  R
>(
  options: O,
  walk: (options: O) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  // What tracing costs is paid only when it is on: off, the call reads the fiber's clock in place and moves the
  // metrics, with no clock service read, annotation or span check of its own (this runs for every model call:
  // docs/benchmarks.md, "Notes moved from the code").
  Effect.withFiberRuntime((fiber) => {
    const tracing = fiber.getFiberRef(FiberRef.currentTracerEnabled)
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    // Read here, in place, like the clock, not as a service read of its own per call.
    const capture = tracing && Context.get(fiber.currentContext, Spans.CaptureContent)
    return Effect.flatMap(Ref.get(options.state), (start) => {
      const startedAt = clock.unsafeCurrentTimeMillis()
      const first = options.providers[start.index]
      let attempts = 0
      let retries = 0
      let failovers = 0
      let input = 0
      let output = 0
      const decide = options.onDecision
      const reported = options.onAttempt as (record: AttemptView) => Effect.Effect<void>
      const wrapped: O = {
        ...options,
        onAttempt: (record: AttemptView) => {
          attempts += 1
          input += record.usage.inputTokens
          output += record.usage.outputTokens
          // The walk reports an attempt on the call's own fiber, in the attempt's span: annotated in place.
          if (tracing) {
            Spans.annotateIn(fiber, () => ({
              "gen_ai.response.model": record.reply?.model,
              "gen_ai.response.finish_reasons": record.reply === undefined ? undefined : [record.reply.finishReason],
              "error.type": record.error?.kind,
              "gen_ai.usage.input_tokens": record.usage.inputTokens,
              "gen_ai.usage.output_tokens": record.usage.outputTokens,
              ...usageParts(record.usage)
            }))
          }
          return reported(record)
        },
        onDecision: (decision: RailDecision) => {
          if (decision._tag === "retry") {
            retries += 1
            Metrics.add(Metrics.retries, 1, "error.type", decision.kind, "corral.provider", decision.provider)
          } else if (decision._tag === "failover") {
            failovers += 1
            Metrics.add(Metrics.failovers, 1, "error.type", decision.kind, "corral.provider", decision.from)
          }
          return decide === undefined ? Effect.void : decide(decision)
        }
      }
      const ended = (exit: Exit.Exit<A, E>): Effect.Effect<void> => {
        const ok = Exit.isSuccess(exit)
        const provider = ok ? exit.value.provider : first
        const errorType = ok ? undefined : failureType(exit)
        const model = provider?.model ?? "unknown"
        const vendor = vendorOf(provider)
        Metrics.add(
          Metrics.operationDuration,
          (clock.unsafeCurrentTimeMillis() - startedAt) / 1000,
          "gen_ai.operation.name",
          "chat",
          "gen_ai.provider.name",
          vendor,
          "gen_ai.request.model",
          model,
          "error.type",
          errorType ?? "none"
        )
        Metrics.add(Metrics.attempts, attempts, "gen_ai.provider.name", vendor)
        const tokenLabels = ["gen_ai.provider.name", vendor, "gen_ai.request.model", model] as const
        if (attempts > 0) {
          Metrics.add(Metrics.tokenUsage, input, ...tokenLabels, "gen_ai.token.type", "input")
          Metrics.add(Metrics.tokenUsage, output, ...tokenLabels, "gen_ai.token.type", "output")
        }
        if (!tracing) return Effect.void
        // The call's fiber: `ended` runs on it, in the call's span.
        Spans.annotateIn(fiber, () => {
          const attributes: Spans.Attributes = {
            "gen_ai.provider.name": vendor,
            "gen_ai.request.model": model,
            "corral.provider": provider?.name,
            "gen_ai.response.model": ok ? exit.value.reply.model : undefined,
            "gen_ai.response.finish_reasons": ok ? [exit.value.reply.finishReason] : undefined,
            "gen_ai.usage.input_tokens": input,
            "gen_ai.usage.output_tokens": output,
            "corral.attempts": attempts,
            "corral.retries": retries,
            "corral.failovers": failovers,
            "error.type": errorType
          }
          if (capture) {
            attributes["gen_ai.system_instructions"] = options.request.system
            attributes["gen_ai.input.messages"] = JSON.stringify(options.request.messages)
            if (ok) {
              attributes["gen_ai.output.messages"] = JSON.stringify([{
                role: "assistant",
                text: exit.value.reply.text,
                toolCalls: exit.value.reply.toolCalls
              }])
            }
          }
          return attributes
        })
        return Effect.void
      }
      const measured = Effect.onExit(walk(wrapped), ended)
      if (!tracing) return measured
      // Still on the call's fiber (a continuation of this `withFiberRuntime`): the span is set up in place.
      return measured.pipe(
        Spans.spanIn(
          fiber,
          () => `chat ${first?.model ?? "unknown"}`,
          () => ({
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": vendorOf(first),
            "gen_ai.request.model": first?.model
          }),
          "client",
          inner
        )
      )
    })
  })

const failureType = (exit: Exit.Exit<unknown, unknown>): string => {
  if (Exit.isSuccess(exit)) return "none"
  const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
  if (typeof failure === "object" && failure !== null) {
    if ("kind" in failure) return String(failure.kind)
    // A spent route: the kind of the failure that spent it.
    if ("last" in failure && typeof failure.last === "object" && failure.last !== null && "kind" in failure.last) {
      return String(failure.last.kind)
    }
    if ("_tag" in failure) return String(failure._tag)
  }
  return exit.cause._tag === "Interrupt" ? "interrupted" : "_OTHER"
}

/**
 * The span of one attempt on one provider: `chat.attempt {model}`, a child of the logical call, for code running on
 * `fiber` (the walk's `withFiberRuntime`: see `Spans.spanIn`).
 */
export const attemptIn = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  provider: ProviderFacts,
  attemptNumber: number
) =>
  Spans.spanIn(
    fiber,
    () => `chat.attempt ${provider.model}`,
    () => ({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": vendorOf(provider),
      "gen_ai.request.model": provider.model,
      "corral.provider": provider.name,
      "corral.attempt": attemptNumber
    }),
    "client",
    inner
  )
