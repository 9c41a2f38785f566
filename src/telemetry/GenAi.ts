/**
 * GenAi — the instrumentation of a burst, a model call and a tool call, by the OpenTelemetry GenAI semantic
 * conventions: the span names and attributes (`gen_ai.operation.name`, `gen_ai.provider.name` = the vendor,
 * `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.response.finish_reasons`, `gen_ai.usage.*`,
 * `error.type` = the ErrorKind), the rail events of a burst, and the metrics each one moves.
 *
 * Each wrapper is called with one line at its call site (session/Run, model/ProviderChain, session/ToolCall) so
 * the hot code stays as it is; with spans off (`Spans.enabled` false) a wrapper only updates its metrics.
 */
import type { Fiber } from "effect"
import { Clock, Context, Effect, Exit, FiberRef, Ref } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { ModelReply } from "../domain/Message.js"
import type { Session } from "../domain/Session.js"
import type { RailDecision, Trajectory } from "../domain/Trajectory.js"
import type { Usage } from "../domain/Usage.js"
import * as Metrics from "./Metrics.js"
import * as RailEvents from "./RailEvents.js"
import * as Spans from "./Spans.js"
import * as Tracing from "./Tracing.js"

/**
 * What the GenAI spans read of a model provider (its name, model and vendor) and of a request (its system prompt and
 * messages, recorded when content capture is on): structural, so telemetry sits below `model/` (a
 * `ModelProvider` and a `ModelRequest` are both these).
 */
export interface ProviderFacts {
  readonly name: string
  readonly model: string
  readonly vendor?: string | undefined
}
export interface RequestFacts {
  readonly system: string
  readonly messages: ReadonlyArray<unknown>
}

/** The vendor of a provider for `gen_ai.provider.name` (`_OTHER` when its adapter does not say). */
export const vendorOf = (provider: ProviderFacts | undefined): string => provider?.vendor ?? "_OTHER"

/**
 * Bursts, model calls, their attempts and tool calls are leaf spans (`Spans.span`): not put into Effect's context.
 * That propagation was most of what a span cost, and for the burst span — in the context of every operation of the
 * burst and every fiber it forks — it was half of what telemetry cost a turn (docs/benchmarks.md at 09f4c1e, "Telemetry cost,
 * the exporter of our own"). The adapters' HTTP request spans still nest under the attempt
 * (`Spans.asParentOfOthers`).
 */
const leaf = { leaf: true } as const
/**
 * No region of its own where the fiber has one that ends it whatever happens (`Spans.span`'s `inner`): an attempt
 * inside its logical call, and a call inside its burst's region or on the burst's loop fiber (`Spans.guardFiber`,
 * session/Loop). Anywhere else (a call made on a fiber of its own) the span gets its region as before.
 */
const inner = { leaf: true, inner: true } as const
/** A tool call is the whole run of a fiber of its own (session/ToolCall): its span ends with that fiber (`Spans.span`). */
const wholeFiber = { leaf: true, wholeFiber: true } as const

/** Exit reasons that are not a failure of the burst (no `error.type`). */
const fine = new Set(["completed", "confirmation_pending"])

// ---------------------------------------------------------------------------------------------------------------
// invoke_agent: one burst

/** What the burst wrapper needs of a burst request (session/Run's `Request`). */
export interface BurstRequest {
  readonly session: Session
  readonly spec: AgentSpec
  /** Receives the burst record (a `BurstView` at least). */
  readonly onStart?: (burst: never) => void
}

/** What the burst wrapper reads of a burst in flight (session/Burst's record), for a burst the store stopped. */
export interface BurstView {
  readonly decisions: ReadonlyArray<RailDecision>
  readonly startedAt: number
}

/** The parts of an attempt's usage, as span attributes, when there are some: cache reads and writes, reasoning. */
const usageParts = (usage: Usage): Spans.Attributes => ({
  "gen_ai.usage.cache_read.input_tokens": usage.cacheReadTokens > 0 ? usage.cacheReadTokens : undefined,
  "gen_ai.usage.cache_creation.input_tokens": usage.cacheWriteTokens > 0 ? usage.cacheWriteTokens : undefined,
  "corral.usage.reasoning.output_tokens": usage.reasoningTokens > 0 ? usage.reasoningTokens : undefined
})

const events = (list: ReadonlyArray<RailEvents.RailEvent>) =>
  Effect.forEach(list, (e) => Spans.event(e.name, e.at, e.attributes), { discard: true })

/** Annotates the burst span with how the burst ended, adds its rail events, and moves the burst metrics. */
const landed = (trajectory: Trajectory): Effect.Effect<void> => {
  const reason = trajectory.exitReason
  Metrics.add(Metrics.bursts, 1, "corral.exit_reason", reason, "corral.tier", trajectory.tier)
  const route = new Map((trajectory.replay?.route ?? []).map((p) => [p.name, p.model]))
  for (const attempt of trajectory.modelCalls) {
    const model = route.get(attempt.provider) ?? "unknown"
    const org = trajectory.principal.orgId
    const base = ["corral.provider", attempt.provider, "gen_ai.request.model", model, "corral.org_id", org] as const
    if (attempt.usage.inputTokens > 0) {
      Metrics.add(Metrics.tokens, attempt.usage.inputTokens, ...base, "gen_ai.token.type", "input")
    }
    if (attempt.usage.outputTokens > 0) {
      Metrics.add(Metrics.tokens, attempt.usage.outputTokens, ...base, "gen_ai.token.type", "output")
    }
    if (attempt.costMicros !== undefined && attempt.costMicros > 0) {
      Metrics.add(Metrics.cost, attempt.costMicros, ...base, "gen_ai.agent.id", trajectory.agentId)
    }
    // Parts of the two above (never to be added to them): what the prompt cache served and stored, and reasoning.
    if (attempt.usage.cacheReadTokens > 0) {
      Metrics.add(Metrics.tokens, attempt.usage.cacheReadTokens, ...base, "gen_ai.token.type", "cache_read")
    }
    if (attempt.usage.cacheWriteTokens > 0) {
      Metrics.add(Metrics.tokens, attempt.usage.cacheWriteTokens, ...base, "gen_ai.token.type", "cache_write")
    }
    if (attempt.usage.reasoningTokens > 0) {
      Metrics.add(Metrics.tokens, attempt.usage.reasoningTokens, ...base, "gen_ai.token.type", "reasoning")
    }
  }
  const exit = trajectory.decisions?.find((d) => d._tag === "exit")
  const last = trajectory.budgets[trajectory.budgets.length - 1]
  return Effect.zipRight(
    Spans.annotate(() => ({
      "corral.run.id": trajectory.runId,
      "corral.exit.reason": reason,
      "corral.exit.check": exit?._tag === "exit" ? exit.check : undefined,
      "error.type": fine.has(reason) ? undefined : reason,
      "corral.model_calls.burst": last?.modelCallsBurst ?? 0,
      "corral.model_calls.session": last?.modelCallsSession ?? 0,
      "corral.attempts": trajectory.modelCalls.length,
      "corral.tool_calls": trajectory.toolCalls.length,
      "corral.duration_ms": trajectory.endedAt - trajectory.startedAt,
      "gen_ai.usage.input_tokens": trajectory.usage.inputTokens,
      "gen_ai.usage.output_tokens": trajectory.usage.outputTokens,
      ...usageParts(trajectory.usage)
    })),
    Effect.flatMap(
      Spans.recording,
      (on) =>
        on
          ? events(RailEvents.ofBurst(trajectory.decisions ?? [], trajectory.toolCalls, trajectory.startedAt))
          : Effect.void
    )
  )
}

/**
 * Runs one burst (`run(request)`) inside its `invoke_agent {agent}` span, with `session_id` on every log line: the
 * span carries the session, run, agent id/version, tier, exit reason, counters and usage at exit, and one event per
 * rail decision. A burst that fails (the store stopped it) still gets its events and `error.type`.
 */
export const invokeAgent = <Req extends BurstRequest, A extends { readonly trajectory: Trajectory }, E, R>(
  request: Req,
  run: (request: Req) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> =>
  Effect.suspend(() => {
    let burst: BurstView | undefined
    const onStart = request.onStart as ((burst: BurstView) => void) | undefined
    const wrapped: Req = {
      ...request,
      onStart: (b: BurstView) => {
        burst = b
        onStart?.(b)
      }
    }
    Metrics.add(Metrics.burstsActive, 1)
    const { session, spec } = request
    return run(wrapped).pipe(
      Effect.tap((a) => landed(a.trajectory)),
      Effect.tapError((error) =>
        Effect.zipRight(
          // The store stopped the burst: it lands as `crashed` (session/Run).
          Effect.sync(() => Metrics.add(Metrics.bursts, 1, "corral.exit_reason", "crashed", "corral.tier", spec.tier)),
          Effect.zipRight(
            Spans.annotate(() => ({ "error.type": errorTag(error), "corral.exit.reason": "crashed" })),
            burst === undefined ? Effect.void : events(RailEvents.ofBurst(burst.decisions, [], burst.startedAt))
          )
        )
      ),
      Effect.ensuring(Effect.sync(() => Metrics.add(Metrics.burstsActive, -1))),
      Spans.span(
        () => `invoke_agent ${spec.name}`,
        () => ({
          "gen_ai.operation.name": "invoke_agent",
          "gen_ai.agent.id": spec.id,
          "gen_ai.agent.name": spec.name,
          "gen_ai.agent.version": String(spec.version),
          "gen_ai.conversation.id": session.id,
          "corral.session.id": session.id,
          "corral.org_id": session.principal.orgId,
          "corral.scope": session.scope,
          "corral.tier": spec.tier
        }),
        "internal",
        leaf
      ),
      Effect.annotateLogs("session_id", session.id)
    )
  })

const errorTag = (error: unknown): string =>
  typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "unknown"

/** Names the run on the burst span and on every later log line of the burst (`run_id`). */
export const runStarted = (runId: string): Effect.Effect<void> =>
  Effect.zipRight(Spans.annotateLogs({ run_id: runId }), Spans.annotate(() => ({ "corral.run.id": runId })))

// ---------------------------------------------------------------------------------------------------------------
// chat: one logical model call, one child per attempt

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
  // metrics (each `Clock.currentTimeMillis`, `annotate` and span check is a few run-loop instructions, and this runs
  // for every model call: docs/benchmarks.md at 09f4c1e, "Issue 14, eleventh pass").
  Effect.withFiberRuntime((fiber) => {
    const tracing = fiber.getFiberRef(FiberRef.currentTracerEnabled)
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    // Read here, in place, like the clock: a `CaptureContent` service read is an instruction of its own per call.
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

// ---------------------------------------------------------------------------------------------------------------
// execute_tool: one tool call

/** What the tool wrapper needs of a tool (tools/ToolExecutor's `ToolDef`). */
export interface ToolView {
  readonly effect: string
  readonly source: string
}

/** What the tool wrapper reads of a tool outcome (tools/ToolExecutor's `ToolOutcome`). */
export interface OutcomeView {
  readonly content: string
  readonly isError: boolean
  readonly failure?: string
}

/**
 * Runs one tool call (MCP or in-process) inside its `execute_tool {tool}` span: the server (`corral.tool.server`,
 * the tool's source), its effect, duration, result bytes, whether the result will be truncated (over `maxBytes`),
 * `is_error` and `error.type` (the executor's failure class). Moves `corral.tool_call.duration`.
 *
 * The wrapped call must be the whole run of the fiber it runs on (session/ToolCall runs each call so): the span
 * ends with that fiber, interrupted or not, with no region of its own (`Spans.span`'s `wholeFiber`).
 */
export const executeTool = (
  call: { readonly id: string; readonly name: string; readonly arguments: string },
  def: ToolView | undefined,
  maxBytes: number
) =>
<O extends OutcomeView, R>(self: Effect.Effect<O, never, R>): Effect.Effect<O, never, R> => {
  const server = def === undefined ? "none" : def.source.startsWith("mcp:") ? def.source.slice(4) : def.source
  const measure = (outcome: O, durationMs: number): string | undefined => {
    const errorType = outcome.isError ? outcome.failure ?? "tool_error" : undefined
    Metrics.add(
      Metrics.toolDuration,
      durationMs / 1000,
      "gen_ai.tool.name",
      call.name,
      "corral.tool.server",
      server,
      "error.type",
      errorType ?? "none"
    )
    return errorType
  }
  // Tracing off: the metric alone, timed by the fiber's clock read in place (see `chat`).
  return Effect.withFiberRuntime((fiber) => {
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const startedAt = clock.unsafeCurrentTimeMillis()
    if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) {
      return Effect.map(self, (outcome) => {
        measure(outcome, clock.unsafeCurrentTimeMillis() - startedAt)
        return outcome
      })
    }
    const capture = Context.get(fiber.currentContext, Spans.CaptureContent)
    return self.pipe(
      // A map on the same fiber, in the tool's span: annotated in place (`annotateIn`), not by an effect of its own.
      Effect.map((outcome) => {
        const durationMs = clock.unsafeCurrentTimeMillis() - startedAt
        const errorType = measure(outcome, durationMs)
        Spans.annotateIn(fiber, () => {
          const bytes = utf8Bytes(outcome.content)
          const attributes: Spans.Attributes = {
            "corral.tool.duration_ms": durationMs,
            "corral.tool.result_bytes": bytes,
            "corral.tool.truncated": bytes > maxBytes,
            "corral.tool.is_error": outcome.isError,
            "error.type": errorType
          }
          if (capture) {
            attributes["gen_ai.tool.call.arguments"] = call.arguments
            attributes["gen_ai.tool.call.result"] = outcome.content
          }
          return attributes
        })
        return outcome
      }),
      Spans.spanIn(
        fiber,
        () => `execute_tool ${call.name}`,
        () => ({
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": call.name,
          "gen_ai.tool.call.id": call.id,
          "gen_ai.tool.type": server.startsWith("mcp") || def?.source.startsWith("mcp:") === true
            ? "extension"
            : "function",
          "corral.tool.server": server,
          "corral.tool.effect": def?.effect ?? "unknown"
        }),
        "internal",
        wholeFiber
      )
    )
  })
}

/**
 * The UTF-8 size of a tool result, without changing how the result itself is held. Measuring a string made by
 * concatenation (a rope) makes the engine flatten it IN PLACE: the result then keeps a flat copy for as long as the
 * transcript holds it — 1 KiB more per result of the peers workload, where the results are ropes, and the garbage
 * collector copied every one of them again (docs/benchmarks.md at 09f4c1e, "Telemetry cost, fourth pass"). A short result is
 * measured on a throwaway string that starts with it (whatever is flattened dies young); a long one is measured in
 * place, where a copy would cost more than it saves (and what a parser produced is flat already).
 */
const utf8Bytes = (text: string): number =>
  text.length <= 4096 ? Buffer.byteLength(` ${text}`, "utf8") - 1 : Buffer.byteLength(text, "utf8")

// ---------------------------------------------------------------------------------------------------------------
// approval: a refused decision (no burst)

/**
 * Runs the recording of a refused approval decision (`self`) inside a short `approval` span with the
 * `corral.rail.approval_refused` event: a refusal starts no burst, so without this span the trace would not show
 * it. The span carries the session, the decision asked for and the reason (`error.type` = `approval_refused`).
 */
export const approvalRefused = (
  session: Session,
  refusal: Parameters<typeof RailEvents.fromRefusal>[0]
) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Tracing.scoped(
    Effect.zipRight(
      Effect.flatMap(Clock.currentTimeMillis, (now) => events([RailEvents.fromRefusal(refusal, now)])),
      self
    ).pipe(
      Spans.span(() => "approval", () => ({
        "gen_ai.conversation.id": session.id,
        "corral.session.id": session.id,
        "corral.org_id": session.principal.orgId,
        "corral.approval.decision": refusal.decision,
        "corral.approval.refused": refusal.reason,
        "error.type": "approval_refused"
      })),
      Effect.annotateLogs("session_id", session.id)
    )
  )
