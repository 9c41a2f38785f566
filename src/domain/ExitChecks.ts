/**
 * The data shape of an agent's own exit checks (`AgentSpec.exitPolicy`): thresholds on the burst's numbers that end
 * it earlier than the built-in ceilings would, and the order the checks are asked in. The checks themselves, their
 * order rules and the built-ins live in `rails/ExitPolicy`; the schema lives here so a spec can carry it.
 */
import { Schema } from "effect"

/** Where a burst can end: before a model call, or after a tool turn. */
export const ExitPoint = Schema.Literal("before_model", "after_tools")
export type ExitPoint = typeof ExitPoint.Type

/**
 * The numbers a check may read (`rails/ExitPolicy` Facts; `cost*` in micro-dollars). `turnCalls` and `repeats` exist only after a tool turn:
 * the calls of that turn, and the highest repeat count one of its calls reached.
 */
export const Metric = Schema.Literal(
  "modelCallsBurst",
  "modelCallsSession",
  "toolCallsBurst",
  "toolCallsSession",
  "tokensBurst",
  "tokensSession",
  "costBurst",
  "costSession",
  "activeMs",
  "burstMs",
  "strikes",
  "turnCalls",
  "repeats"
)
export type Metric = typeof Metric.Type

/**
 * The exit reasons an agent's or a host's own check may end a burst with: the halts. Not `completed` (the model
 * decides that), not `confirmation_pending` (it needs writes waiting), not `cancelled` / `crashed` (signals, not
 * checks), not the provider outcomes.
 */
export const HaltReason = Schema.Literal(
  "burst_limit",
  "session_limit",
  "tool_budget",
  "token_budget",
  "cost_budget",
  "deadline",
  "repeat_call_halt",
  "bad_tool_use"
)
export type HaltReason = typeof HaltReason.Type

/** A check as data: end the burst with `reason` when `metric` reaches `atLeast` at `at`. */
export const ThresholdCheck = Schema.Struct({
  name: Schema.String.pipe(
    Schema.pattern(/^[a-z][a-z0-9_.-]{0,63}$/, {
      message: () => "a lower-case name of at most 64 characters: letters, digits, '_', '.', '-'"
    })
  ),
  at: ExitPoint,
  metric: Metric,
  atLeast: Schema.Int.pipe(Schema.positive({ message: () => "a positive integer" })),
  reason: HaltReason,
  /** Why, in words, for the trajectory and the person reading it; a default names the metric and the threshold. */
  notice: Schema.optional(Schema.String)
})
export type ThresholdCheck = typeof ThresholdCheck.Type

/** An agent's exit policy: its own checks, and optionally the order of all checks (built-in and own) by name. */
export const ExitPolicySpec = Schema.Struct({
  checks: Schema.optional(Schema.Array(ThresholdCheck)),
  order: Schema.optional(Schema.Array(Schema.String))
})
export type ExitPolicySpec = typeof ExitPolicySpec.Type
