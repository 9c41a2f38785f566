/**
 * A session's durable state: what the actor rebuilds from the store after passivation or a crash.
 */
import { Schema } from "effect"
import type { IssuedToken } from "./Approval.js"
import { ExitReason } from "./ExitReason.js"
import { AgentId, SessionId } from "./Ids.js"
import { ToolResultStatus } from "./Message.js"
import { Principal } from "./Principal.js"
import { Report } from "./Report.js"
import { Scope } from "./Scope.js"
import { Usage } from "./Usage.js"

/** Where a session stands between messages. `interrupted`: a burst was in flight when the process died. */
export const SessionStatus = Schema.Literal("idle", "running", "awaiting_confirmation", "interrupted")
export type SessionStatus = typeof SessionStatus.Type

/** How a person resolved a pending write, and what running it produced. */
export const Resolution = Schema.Struct({
  decision: Schema.Literal("approve", "reject"),
  content: Schema.String,
  isError: Schema.Boolean,
  /** How the call ended: `ok`/`error` when it ran, `not_executed` when it did not, `unknown_outcome` after a crash. */
  status: Schema.optional(ToolResultStatus),
  /** The user who decided. */
  decidedBy: Schema.optional(Schema.String),
  /** How long the approved call ran, in milliseconds. */
  durationMs: Schema.optional(Schema.Number)
})
export type Resolution = typeof Resolution.Type

/**
 * A write that waits for a person: the call exactly as shown. Its approval token is not here: only its hash is
 * stored (`ApprovalRecord`), and the token itself is shown once, in the response that landed the burst.
 */
export const PendingConfirmation = Schema.Struct({
  callId: Schema.String,
  tool: Schema.String,
  arguments: Schema.String,
  /** The assistant turn that asked for the call; the writes of one turn are decided together. */
  turnSeq: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 }),
  /** Where the tool comes from (`ToolDef.source`). */
  source: Schema.optional(Schema.String),
  /** Set (and persisted) just before an approved call is dispatched: a crash after it means an unknown outcome. */
  dispatchedAt: Schema.optional(Schema.Number),
  resolution: Schema.optional(Resolution),
  /**
   * Set with a resolution that no trajectory has recorded yet (a decision, or an unknown outcome found at recovery);
   * the next burst records it as a `handler` call and clears it.
   */
  unreported: Schema.optional(Schema.Literal(true))
})
export type PendingConfirmation = typeof PendingConfirmation.Type

/** The turn of the latest round of pending writes (each round is the writes of one assistant turn); -1 if none. */
export const latestRound = (pending: ReadonlyArray<PendingConfirmation>): number =>
  pending.reduce((max, p) => Math.max(max, p.turnSeq), -1)

/** The writes of the latest round. */
export const currentRound = (pending: ReadonlyArray<PendingConfirmation>): ReadonlyArray<PendingConfirmation> => {
  const latest = latestRound(pending)
  return pending.filter((p) => p.turnSeq === latest)
}

/** The writes still waiting for a decision. */
export const undecided = (state: { readonly pending: ReadonlyArray<PendingConfirmation> }) =>
  state.pending.filter((p) => p.resolution === undefined)

/** A write the store did not take: which, why, when, and of which burst. */
export const StoreError = Schema.Struct({
  operation: Schema.String,
  message: Schema.String,
  at: Schema.Number,
  runId: Schema.optional(Schema.String)
})
export type StoreError = typeof StoreError.Type

/** Counters, sticky provider state and the last landing. Both model-call counters move together (DESIGN §5). */
export const SessionState = Schema.Struct({
  status: SessionStatus,
  modelCalls: Schema.NonNegativeInt,
  toolCalls: Schema.NonNegativeInt,
  usage: Usage,
  /** What the session's model attempts cost, in micro-dollars (`rails/Cost`); 0 without prices. */
  costMicros: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 }),
  /** Index into the tier's provider list; only ever moves forward. */
  providerIndex: Schema.NonNegativeInt,
  /** Every provider of the route was spent; sticky. */
  exhausted: Schema.Boolean,
  /** Time spent inside bursts, in milliseconds; the gaps between bursts do not count. */
  activeMs: Schema.NonNegativeInt,
  bursts: Schema.NonNegativeInt,
  lastExitReason: Schema.optional(ExitReason),
  report: Schema.optional(Report),
  pending: Schema.Array(PendingConfirmation),
  /**
   * The last record the store failed to take (a trajectory or a landing saved late), kept where an operator finds
   * it: on the session. Cleared by nothing; replaced by the next such failure.
   */
  storeError: Schema.optional(StoreError)
})
export type SessionState = typeof SessionState.Type

/** The state of a session that has not run yet. */
export const initialState: SessionState = {
  status: "idle",
  modelCalls: 0,
  toolCalls: 0,
  usage: Usage.zero,
  costMicros: 0,
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

/** What callers see of a session: identity, where it stands, its last landing, and its counters. */
export const SessionView = Schema.Struct({
  id: Schema.String,
  agentId: Schema.String,
  agentVersion: Schema.Int,
  scope: Schema.String,
  status: SessionStatus,
  /**
   * `"unknown"` while the session reads `running` but no live node owns it (a cluster node died mid-burst and its
   * shards have not been taken over yet): nothing runs its burst; once a node takes it over it reads `interrupted`
   * (resume with a follow-up). Absent otherwise.
   */
  owner: Schema.optional(Schema.Literal("unknown")),
  exitReason: Schema.optional(ExitReason),
  report: Schema.optional(Report),
  usage: Usage,
  /** What the session's model attempts cost so far, in micro-dollars (0 when its providers have no prices). */
  costMicros: Schema.Int,
  modelCalls: Schema.Int,
  toolCalls: Schema.Int,
  activeMs: Schema.Number,
  bursts: Schema.Int,
  /** The last record the store failed to take (see `SessionState.storeError`). */
  storeError: Schema.optional(StoreError),
  /**
   * Writes awaiting a decision: tool and arguments exactly as they will run. `token` and `expiresAt` appear only in
   * the response that issued the token, to the session's own user (tokens are stored hashed and shown once; lost
   * tokens are re-issued with `renewApprovals`).
   */
  pending: Schema.Array(Schema.Struct({
    callId: Schema.String,
    tool: Schema.String,
    arguments: Schema.String,
    token: Schema.optional(Schema.String),
    expiresAt: Schema.optional(Schema.Number)
  })),
  createdAt: Schema.Number,
  updatedAt: Schema.Number
})
export type SessionView = typeof SessionView.Type

/** The view of a session row; `tokens` are the ones issued by the response being answered (see `pending`). */
export const view = (session: Session, tokens: ReadonlyArray<IssuedToken> = []): SessionView => ({
  id: session.id,
  agentId: session.agentId,
  agentVersion: session.agentVersion,
  scope: session.scope,
  status: session.state.status,
  ...(session.state.lastExitReason === undefined ? {} : { exitReason: session.state.lastExitReason }),
  ...(session.state.report === undefined ? {} : { report: session.state.report }),
  usage: session.state.usage,
  costMicros: session.state.costMicros,
  modelCalls: session.state.modelCalls,
  toolCalls: session.state.toolCalls,
  activeMs: session.state.activeMs,
  bursts: session.state.bursts,
  ...(session.state.storeError === undefined ? {} : { storeError: session.state.storeError }),
  pending: undecided(session.state).map((p) => {
    const issued = tokens.find((t) => t.callId === p.callId)
    return {
      callId: p.callId,
      tool: p.tool,
      arguments: p.arguments,
      ...(issued === undefined ? {} : { token: issued.token, expiresAt: issued.expiresAt })
    }
  }),
  createdAt: session.createdAt,
  updatedAt: session.updatedAt
})
