/**
 * A session's durable state: what the actor rebuilds from the store after passivation or a crash.
 */
import { Schema } from "effect"
import { ExitReason } from "./ExitReason.js"
import { AgentId, SessionId } from "./Ids.js"
import { Principal } from "./Principal.js"
import { Report } from "./Report.js"
import { Scope } from "./Scope.js"
import { Usage } from "./Usage.js"

/** Where a session stands between messages. `interrupted`: a burst was in flight when the process died. */
export const SessionStatus = Schema.Literal("idle", "running", "awaiting_confirmation", "interrupted")
export type SessionStatus = typeof SessionStatus.Type

/** A write that waits for a person: the call exactly as shown, and the token that approves it. */
export const PendingConfirmation = Schema.Struct({
  callId: Schema.String,
  tool: Schema.String,
  arguments: Schema.String,
  token: Schema.String
})
export type PendingConfirmation = typeof PendingConfirmation.Type

/** Counters, sticky provider state and the last landing. Both model-call counters move together (DESIGN §5). */
export const SessionState = Schema.Struct({
  status: SessionStatus,
  modelCalls: Schema.NonNegativeInt,
  toolCalls: Schema.NonNegativeInt,
  usage: Usage,
  /** Index into the tier's provider list; only ever moves forward. */
  providerIndex: Schema.NonNegativeInt,
  /** Every provider of the route was spent; sticky. */
  exhausted: Schema.Boolean,
  /** Time spent inside bursts, in milliseconds; the gaps between bursts do not count. */
  activeMs: Schema.NonNegativeInt,
  bursts: Schema.NonNegativeInt,
  lastExitReason: Schema.optional(ExitReason),
  report: Schema.optional(Report),
  pending: Schema.Array(PendingConfirmation)
})
export type SessionState = typeof SessionState.Type

/** The state of a session that has not run yet. */
export const initialState: SessionState = {
  status: "idle",
  modelCalls: 0,
  toolCalls: 0,
  usage: Usage.zero,
  providerIndex: 0,
  exhausted: false,
  activeMs: 0,
  bursts: 0,
  pending: []
}

/** A session row: identity, ownership, scope and state. */
export const Session = Schema.Struct({
  id: SessionId,
  principal: Principal,
  scope: Scope,
  agentId: AgentId,
  agentVersion: Schema.Int,
  createdAt: Schema.Number,
  updatedAt: Schema.Number,
  state: SessionState
})
export type Session = typeof Session.Type
