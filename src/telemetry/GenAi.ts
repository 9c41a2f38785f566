/**
 * GenAi — the instrumentation of a burst, a model call and a tool call, by the OpenTelemetry GenAI semantic
 * conventions: the span names and attributes (`gen_ai.operation.name`, `gen_ai.provider.name` = the vendor,
 * `gen_ai.request.model`, `gen_ai.response.model`, `gen_ai.response.finish_reasons`, `gen_ai.usage.*`,
 * `error.type` = the ErrorKind), the rail events of a burst, and the metrics each one moves.
 *
 * Each wrapper is called with one line at its call site (session/Run, model/ProviderChain, session/ToolCall) so
 * the hot code stays as it is; with spans off (`Spans.enabled` false) a wrapper only updates its metrics.
 */
import { Clock, Effect } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { Session } from "../domain/Session.js"
import type { RailDecision, Trajectory } from "../domain/Trajectory.js"
import { leaf, usageParts } from "./internal/genAiFacts.js"
import * as Metrics from "./Metrics.js"
import * as RailEvents from "./RailEvents.js"
import * as Spans from "./Spans.js"
import * as Tracing from "./Tracing.js"

/** What the GenAI spans read of a model provider and of a request, and the vendor of a provider. */
export type { ProviderFacts, RequestFacts } from "./internal/genAiFacts.js"
/** The vendor of a provider for `gen_ai.provider.name` (`_OTHER` when its adapter does not say). */
export { vendorOf } from "./internal/genAiFacts.js"
/**
 * One logical model call inside its `chat {model}` span (`chat`), an attempt's `chat.attempt {model}` span
 * (`attemptIn`), and what they read of the call (internal/genAiChat.ts).
 */
export { attemptIn, chat } from "./internal/genAiChat.js"
export type { AttemptView, ChatOptions } from "./internal/genAiChat.js"
/** One tool call inside its `execute_tool {tool}` span, and what it reads of the tool (internal/genAiTool.ts). */
export { executeTool } from "./internal/genAiTool.js"
export type { OutcomeView, ToolView } from "./internal/genAiTool.js"

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
