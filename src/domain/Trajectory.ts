/**
 * The run record of one burst: enough to audit it and to replay it. Every model reply is kept verbatim, every
 * classified error, every tool result with the executor's own output when a rail changed what the model saw, every
 * rail decision with the numbers that triggered it, and what a replay needs to re-run the loop deterministically
 * (`replay`: the effective limits, the route, the offered tools, the counters before, the jitter seed).
 */
import { Schema } from "effect"
import { ErrorKind } from "./ErrorKind.js"
import { ExitReason } from "./ExitReason.js"
import { RecordedLimits } from "./Limits.js"
import { Attachment, ModelReply, ToolResultStatus } from "./Message.js"
import { Principal } from "./Principal.js"
import { Report } from "./Report.js"
import { Usage } from "./Usage.js"

/** One attempt at one provider: the verbatim reply, or the classified error. */
export const ModelAttempt = Schema.Struct({
  provider: Schema.String,
  attempt: Schema.Int,
  startedAt: Schema.Number,
  durationMs: Schema.Number,
  request: Schema.Struct({ messages: Schema.Int, tools: Schema.Int }),
  reply: Schema.optional(ModelReply),
  error: Schema.optional(Schema.Struct({
    kind: ErrorKind,
    message: Schema.String,
    status: Schema.optional(Schema.Int),
    retryAfterMs: Schema.optional(Schema.Number)
  })),
  usage: Usage,
  /** What the attempt cost at its provider's prices, in micro-dollars; absent when the provider has none. */
  costMicros: Schema.optional(Schema.NonNegativeInt),
  /**
   * Set on an attempt made for a tool server's sample (MCP sampling) during tool call `callId`: its `n`-th sample
   * that reached the model in the burst (from 1; every attempt of one sample, retries and failovers, carries the
   * same). A replay asks the samples again, in order, from the replayed call. Absent: an attempt of the loop.
   */
  sampled: Schema.optional(Schema.Struct({ callId: Schema.String, n: Schema.Int }))
})
export type ModelAttempt = typeof ModelAttempt.Type

/**
 * Why a tool call failed, for the rails: `unknown_tool`, `invalid_json` and `invalid_args` are strikes of bad tool
 * use; the others are the tool's own trouble.
 */
export const ToolFailure = Schema.Literal(
  "unknown_tool",
  "invalid_json",
  "invalid_args",
  "tool_error",
  "timeout",
  "interrupted"
)
export type ToolFailure = typeof ToolFailure.Type

/**
 * One tool call: who initiated it, its declared effect, where the tool came from, its arguments, and its result or
 * error. `origin` is `model` for a call the model made in a turn, `handler` for a write a person approved or
 * rejected (run, or not, by the approval handler). Records written before `origin` existed read as `model`.
 */
export const ToolCallRecord = Schema.Struct({
  callId: Schema.String,
  name: Schema.String,
  origin: Schema.optionalWith(Schema.Literal("model", "handler"), { default: () => "model" }),
  effect: Schema.Literal("read", "write", "unknown"),
  /** Where the tool comes from (`ToolDef.source`, e.g. `builtin` or `mcp:<server>`); `none` for an unknown tool. */
  source: Schema.String,
  status: ToolResultStatus,
  durationMs: Schema.Number,
  /** The arguments exactly as the model sent them (and, for a write, as the person was shown them). */
  arguments: Schema.optionalWith(Schema.String, { default: () => "" }),
  /** What the call returned, or the error text, as recorded in the transcript (truncated like it). */
  result: Schema.optionalWith(Schema.String, { default: () => "" }),
  isError: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** The executor's classification of a failed call (`unknown_tool`, `invalid_args`, `timeout`, …). */
  failure: Schema.optional(ToolFailure),
  /** When the call was dispatched (Clock millis); absent for a call that never ran. */
  startedAt: Schema.optional(Schema.Number),
  /**
   * What the executor returned, kept only when the rails changed what the model saw (truncated, or a repeat
   * warning appended): the audit of what the tool really said, and what a replay feeds back.
   */
  output: Schema.optional(Schema.String),
  /** The images and audio the executor returned (before the size cap): what a replay feeds back with `output`. */
  attachments: Schema.optional(Schema.Array(Attachment)),
  /**
   * Samples the tool's server asked for during the call that passed the model-call gate (MCP sampling): counted
   * model calls, each with attempts marked `sampled` — except one still in flight when the call ended, which has
   * none. A replay asks this many again. Absent: none.
   */
  samples: Schema.optional(Schema.Int)
})
export type ToolCallRecord = typeof ToolCallRecord.Type

/** The counters and budgets at a point in the burst. */
export const BudgetSnapshot = Schema.Struct({
  at: Schema.Number,
  modelCallsBurst: Schema.Int,
  modelCallsSession: Schema.Int,
  toolCalls: Schema.Int,
  tokens: Schema.Int,
  activeMs: Schema.Number,
  /** Micro-dollars the session had spent when the call passed the gate (absent in older records). */
  costMicros: Schema.optional(Schema.Int)
})
export type BudgetSnapshot = typeof BudgetSnapshot.Type

const at = Schema.Number

/**
 * One decision a rail took, with the numbers that triggered it. `exit` is the one that ended the burst: `check`
 * names the exit-policy check (or `ReplyPolicy`, `ProviderChain`, `ActiveTime`, `cancel`, `crash`) and `notice`
 * says why in words.
 */
export const RailDecision = Schema.Union(
  Schema.TaggedStruct("retry", {
    at,
    provider: Schema.String,
    attempt: Schema.Int,
    kind: ErrorKind,
    delayMs: Schema.Number,
    retryAfterMs: Schema.optional(Schema.Number)
  }),
  Schema.TaggedStruct("failover", {
    at,
    from: Schema.String,
    /** The next provider of the route; absent when the route is spent. */
    to: Schema.optional(Schema.String),
    kind: ErrorKind,
    /** Set when a Retry-After beyond the cap made the chain move on instead of waiting. */
    retryAfterMs: Schema.optional(Schema.Number)
  }),
  /**
   * An attempt waited in a provider's storm line (`StormGuard`) before it was sent: `at` is its release, `waitMs`
   * how long it waited there. Other sessions' throttles put it there, so a replay does not reproduce it.
   */
  Schema.TaggedStruct("storm_wait", { at, provider: Schema.String, waitMs: Schema.Number }),
  /**
   * A cost budget left too little for the call's usual output cap: it was sent with `maxTokens`, so that its worst
   * case (input estimate + that many output tokens at the highest prices it may meet) fits the `leftMicros` left.
   */
  Schema.TaggedStruct("cost_cap", { at, maxTokens: Schema.Int, leftMicros: Schema.Int }),
  /**
   * The org's daily budget (`OrgBudget`) granted the `call`-th model call of the burst less than its worst case
   * (`wantMicros`): `grantedMicros` was what was left after `spentMicros` spent and `heldMicros` held by the org's
   * calls in flight (after waiting `waitedMs` for those to settle). The call was sent with its output cap lowered to
   * fit the grant, or (an `exit` follows) not made. A replay grants the same (without the wait's polls).
   */
  Schema.TaggedStruct("org_budget", {
    at,
    call: Schema.Int,
    wantMicros: Schema.Int,
    grantedMicros: Schema.Int,
    spentMicros: Schema.Int,
    heldMicros: Schema.Int,
    /** How long the call waited for the org's calls in flight to release what they held. */
    waitedMs: Schema.Number
  }),
  /**
   * A request to `provider` left out `parts` reasoning parts of the transcript because another provider made them
   * (a failover moved the session): only their maker can read them (`Reasoning`). Recorded once per provider and
   * burst.
   */
  Schema.TaggedStruct("reasoning_dropped", { at, provider: Schema.String, parts: Schema.Int }),
  Schema.TaggedStruct("prune", { at, pruned: Schema.Boolean }),
  Schema.TaggedStruct("nudge", { at, cause: Schema.Literal("empty", "length") }),
  Schema.TaggedStruct("truncate", {
    at,
    callId: Schema.String,
    tool: Schema.String,
    bytes: Schema.Int,
    keptBytes: Schema.Int
  }),
  Schema.TaggedStruct("repeat", {
    at,
    callId: Schema.String,
    tool: Schema.String,
    count: Schema.Int,
    verdict: Schema.Literal("warn", "halt")
  }),
  Schema.TaggedStruct("strike", { at, strikes: Schema.Int }),
  Schema.TaggedStruct("turn_cap", { at, surplus: Schema.Int }),
  Schema.TaggedStruct("budget_refused", { at, callId: Schema.String, tool: Schema.String }),
  /** A write the model asked for now waits for a person's approval (it has not run). */
  Schema.TaggedStruct("confirmation", { at, callId: Schema.String, tool: Schema.String }),
  Schema.TaggedStruct("exit", { at, check: Schema.String, reason: ExitReason, notice: Schema.String })
)
export type RailDecision = typeof RailDecision.Type

/** One provider of the route a burst ran with, as the provider chain saw it. */
export const RouteEntry = Schema.Struct({
  name: Schema.String,
  model: Schema.String,
  maxAttempts: Schema.Int,
  timeoutMs: Schema.Number,
  /** Its prices, picodollars per token (`rails/Cost`), when it had some: a replay prices the attempts the same. */
  pricing: Schema.optional(Schema.Struct({
    input: Schema.Int,
    output: Schema.Int,
    cacheRead: Schema.Int,
    cacheWrite: Schema.Int,
    reasoning: Schema.Int
  })),
  /** Its output cap for a request without one (`ModelProvider.maxOutputTokens`): an org budget's hold uses it. */
  maxOutputTokens: Schema.optional(Schema.Int)
})
export type RouteEntry = typeof RouteEntry.Type

/** What a deterministic replay needs beyond the turns and the attempts (`corral replay --verify`). */
export const ReplayRecord = Schema.Struct({
  /** The seed of the burst's own jitter (`Random`): the same seed gives the same backoff delays. */
  seed: Schema.Int,
  /** The effective limits of the burst (host ∩ agent). */
  limits: RecordedLimits,
  /** The exit policy's checks, in order. */
  policy: Schema.Array(Schema.String),
  route: Schema.Array(RouteEntry),
  /**
   * The tools offered to the model, then those it could call without being offered them: allowed tools whose server
   * was down, each with `unavailable`, the reason (absent in older records: none).
   */
  tools: Schema.Array(Schema.Struct({
    name: Schema.String,
    effect: Schema.String,
    source: Schema.String,
    unavailable: Schema.optional(Schema.String)
  })),
  /** The session's counters when the burst opened. */
  before: Schema.Struct({
    modelCalls: Schema.Int,
    toolCalls: Schema.Int,
    tokens: Schema.Int,
    activeMs: Schema.Number,
    providerIndex: Schema.Int,
    exhausted: Schema.Boolean,
    /** Micro-dollars the session had spent (absent in records older than the cost ledger: none). */
    costMicros: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 })
  }),
  /** The characters of the burst's system prompt and tool list (`Burst.Context.promptChars`). */
  promptChars: Schema.optional(Schema.NonNegativeInt),
  /** When the burst saw its cancel signal (Clock millis). */
  cancelledAt: Schema.optional(Schema.Number),
  /** The org's daily budget the burst ran under (`OrgBudget`), in micro-dollars; absent when it had none. */
  orgPerDayMicros: Schema.optional(Schema.NonNegativeInt)
})
export type ReplayRecord = typeof ReplayRecord.Type

/** The record of one burst. */
export const Trajectory = Schema.Struct({
  runId: Schema.String,
  sessionId: Schema.String,
  principal: Principal,
  agentId: Schema.String,
  agentVersion: Schema.Int,
  tier: Schema.String,
  startedAt: Schema.Number,
  endedAt: Schema.Number,
  /** Sequence numbers of the turns this burst persisted, first and last (inclusive). */
  turns: Schema.Struct({ from: Schema.Int, to: Schema.Int }),
  modelCalls: Schema.Array(ModelAttempt),
  toolCalls: Schema.Array(ToolCallRecord),
  errors: Schema.Array(Schema.Struct({ code: Schema.String, message: Schema.String })),
  budgets: Schema.Array(BudgetSnapshot),
  usage: Usage,
  /** What the burst's attempts cost, in micro-dollars (the sum of their `costMicros`); absent without prices. */
  costMicros: Schema.optional(Schema.NonNegativeInt),
  exitReason: ExitReason,
  /** Every rail decision of the burst, in order, with exactly one `exit`. Absent in records older than replay. */
  decisions: Schema.optional(Schema.Array(RailDecision)),
  replay: Schema.optional(ReplayRecord),
  /** The report the burst landed with (what its `report` event carried). Absent in older records and while open. */
  report: Schema.optional(Report),
  /**
   * `true` while the burst runs: the trajectory is saved as it goes (after every model call and tool turn), so a
   * process that dies mid-burst leaves its attempts and usage behind; `exitReason` is then provisional. Recovery
   * closes a trajectory left open as `crashed` and bills its usage to the session.
   */
  open: Schema.optional(Schema.Boolean)
})
export type Trajectory = typeof Trajectory.Type
