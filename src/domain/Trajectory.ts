/**
 * The run record of one burst: enough to audit it and to replay it (every model reply is kept verbatim).
 */
import { Schema } from "effect"
import { ErrorKind } from "./ErrorKind.js"
import { ExitReason } from "./ExitReason.js"
import { ModelReply, ToolResultStatus } from "./Message.js"
import { Principal } from "./Principal.js"
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
  usage: Usage
})
export type ModelAttempt = typeof ModelAttempt.Type

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
  isError: Schema.optionalWith(Schema.Boolean, { default: () => false })
})
export type ToolCallRecord = typeof ToolCallRecord.Type

/** The counters and budgets at a point in the burst. */
export const BudgetSnapshot = Schema.Struct({
  at: Schema.Number,
  modelCallsBurst: Schema.Int,
  modelCallsSession: Schema.Int,
  toolCalls: Schema.Int,
  tokens: Schema.Int,
  activeMs: Schema.Number
})
export type BudgetSnapshot = typeof BudgetSnapshot.Type

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
  exitReason: ExitReason,
  /**
   * `true` while the burst runs: the trajectory is saved as it goes (after every model call and tool turn), so a
   * process that dies mid-burst leaves its attempts and usage behind; `exitReason` is then provisional. Recovery
   * closes a trajectory left open as `crashed` and bills its usage to the session.
   */
  open: Schema.optional(Schema.Boolean)
})
export type Trajectory = typeof Trajectory.Type
