/**
 * memoryState — the memory store's state (MemoryStore): its Maps, one record per session, and the packer of its
 * closed trajectories; the parts (memorySessions.ts, memoryTranscripts.ts, memoryRecords.ts) are plain functions over
 * it.
 *
 * A session's transcript is kept by column: the entries exactly as appended (the live actor's conversation holds the
 * same objects) and their times, a number array V8 keeps unboxed; `turns` makes the Turns when they are read. Because
 * sequence numbers start at 1 with no gaps, a turn's index in the arrays is `seq - 1`.
 */
import { Effect } from "effect"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import type { ApprovalRecord } from "../../domain/Approval.js"
import { PersistenceFailed } from "../../domain/Errors.js"
import type { IdempotencyRecord, InboxMessage } from "../../domain/Inbox.js"
import type { TurnEntry } from "../../domain/Message.js"
import { Principal } from "../../domain/Principal.js"
import type { Session } from "../../domain/Session.js"
import type { Trajectory } from "../../domain/Trajectory.js"
import { Usage } from "../../domain/Usage.js"
import * as Packing from "./packing.js"

/** What the store holds of one session. */
export interface SessionRecord {
  session: Session
  /**
   * The transcript by column: the entries exactly as appended and their times (a Turn object and a boxed timestamp
   * per turn are not kept). Both have room for more than `length` (see `appendEntry`).
   */
  entries: Array<TurnEntry>
  times: Array<number>
  /** Turns stored: also the last sequence number. */
  length: number
  /**
   * Created on the first trajectory. A closed trajectory is kept packed (internal/packing), an open one (replaced as its
   * burst goes) as it is.
   */
  trajectories: Array<StoredTrajectory> | undefined
  /** Ids of the sessions this one inherits artifacts from; created on the first. */
  inherits: Set<string> | undefined
}

/** A trajectory as it was saved, or packed (an array) with its run id as the key. */
export type StoredTrajectory = Trajectory | Packing.Packed

/** A day's spend of an org under a daily budget (rails/OrgBudget). */
export interface SpendRow {
  readonly spentMicros: number
  readonly heldMicros: number
  readonly heldUntil: number
}

/** One memory store's state. */
export interface State {
  /** org → agent id → version → spec. */
  readonly agents: Map<string, Map<string, Map<number, AgentSpec>>>
  readonly sessions: Map<string, SessionRecord>
  /** token hash → approval. */
  readonly approvals: Map<string, ApprovalRecord>
  /** message id → accepted message not yet settled, in acceptance order (a Map iterates in insertion order). */
  readonly inbox: Map<string, InboxMessage>
  /** `keyOf(org, key)` → the first answer under that idempotency key. */
  readonly idempotency: Map<string, IdempotencyRecord>
  /** `keyOf(org, UTC day)` → the day's spend under a daily budget (rails/OrgBudget). */
  readonly spend: Map<string, SpendRow>
  /** Packs closed trajectories; its templates are this store's own, so they go with it. */
  readonly packer: ReturnType<typeof Packing.make>
}

/** An empty store's state. */
export const make = (): State => ({
  agents: new Map(),
  sessions: new Map(),
  approvals: new Map(),
  inbox: new Map(),
  idempotency: new Map(),
  spend: new Map(),
  // Closed trajectories are kept packed (internal/packing): as objects they were a large share of a held session's
  // bytes.
  packer: Packing.make({ classes: [Usage, Principal], maxTemplates: 1024 })
})

/** The key of a per-org entry (an idempotency key, a day's spend). */
export const keyOf = (orgId: string, key: string) => `${orgId}\u0000${key}`

/** The session's record when it belongs to `orgId`: every read goes through here, so no read crosses orgs. */
export const owned = (state: State, orgId: string, id: string): SessionRecord | undefined => {
  const record = state.sessions.get(id)
  return record !== undefined && record.session.principal.orgId === orgId ? record : undefined
}

/** The record of a session with nothing stored yet. */
export const fresh = (session: Session): SessionRecord => ({
  session,
  entries: [],
  times: [],
  length: 0,
  trajectories: undefined,
  inherits: undefined
})

/** A write to a session the store does not hold. */
export const missing = (operation: string, sessionId: string) =>
  Effect.fail(new PersistenceFailed({ operation, message: `no session "${sessionId}"` }))

/** A trajectory is an object, a packed one an array. */
export const isPacked = (stored: StoredTrajectory): stored is Packing.Packed => Array.isArray(stored)

/** The run id of a stored trajectory. */
export const runIdOf = (stored: StoredTrajectory): string =>
  isPacked(stored) ? Packing.keyOf(stored) as string : stored.runId

/** A stored trajectory as saved. */
export const unpacked = (state: State, stored: StoredTrajectory): Trajectory =>
  isPacked(stored) ? state.packer.unpack(stored) as Trajectory : stored
