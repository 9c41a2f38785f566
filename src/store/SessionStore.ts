/**
 * The `SessionStore` port: agents, sessions, the transcript and trajectories. The transcript is the source of
 * truth; every read is filtered by org so no method returns another org's rows.
 */
import { Context } from "effect"
import type { Effect, Option } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { ApprovalRecord } from "../domain/Approval.js"
import type { PersistenceFailed, ScopeMismatch } from "../domain/Errors.js"
import type { IdempotencyRecord, InboxMessage } from "../domain/Inbox.js"
import type { Turn, TurnEntry } from "../domain/Message.js"
import type { Session, SessionState, SessionStatus } from "../domain/Session.js"
import type { Trajectory } from "../domain/Trajectory.js"
import type { OrgDayTally, UsageRow } from "../domain/Usage.js"

/** Filters and paging of `listSessions`. */
export interface ListSessionsOptions {
  readonly scope?: string
  readonly status?: SessionStatus
  /** Most sessions in the page (a positive integer). */
  readonly limit: number
  /** `nextCursor` of the previous page. */
  readonly cursor?: string
}

/** A page of sessions and where the next one starts. */
export interface SessionPage {
  readonly sessions: ReadonlyArray<Session>
  readonly nextCursor?: string
}

/** The position of a session in the `listSessions` order. */
export interface CursorPosition {
  readonly createdAt: number
  readonly id: string
}

/** The cursor after `position`: opaque to callers (base64url of `<createdAt>:<id>`), shared by every driver. */
export const encodeCursor = (position: CursorPosition): string =>
  Buffer.from(`${position.createdAt}:${position.id}`, "utf8").toString("base64url")

/** The position a cursor names, or `undefined` when it is not a cursor `encodeCursor` produced. Never throws. */
export const decodeCursor = (cursor: string): CursorPosition | undefined => {
  if (!/^[A-Za-z0-9_-]{1,2048}$/.test(cursor)) return undefined
  const text = Buffer.from(cursor, "base64url").toString("utf8")
  const colon = text.indexOf(":")
  if (colon <= 0) return undefined
  const createdAt = Number(text.slice(0, colon))
  const id = text.slice(colon + 1)
  return Number.isFinite(createdAt) && id.length > 0 ? { createdAt, id } : undefined
}

/** Whether session `a` comes before `b` in the `listSessions` order (newest first, then id descending). */
export const listedBefore = (a: CursorPosition, b: CursorPosition): boolean =>
  a.createdAt !== b.createdAt ? a.createdAt > b.createdAt : a.id > b.id

/**
 * What `appendTurn` stored: the turn, and — when the turn would have followed an assistant turn whose calls have no
 * results — the `tool_results` turn the store wrote just before it, in the same write, to close those calls
 * (store/Pairing.ts).
 */
export interface Appended extends Turn {
  readonly closed?: Turn
}

/** What `accept` stores together: the message, the session it opens (a start), the first answer to an idempotent request. */
export interface AcceptRequest {
  readonly message: InboxMessage
  /** A new session (a start): created with its message, in the same transaction. */
  readonly session?: Session
  /** The first answer to a request sent with an `Idempotency-Key`: stored with the message, or not at all. */
  readonly idempotency?: IdempotencyRecord
}

/** What `accept` did: stored everything, or found the idempotency key taken (and stored nothing). */
export type AcceptOutcome =
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Duplicate"; readonly first: IdempotencyRecord }

/**
 * The store. Every failure is a `PersistenceFailed` (drivers wrap their own errors once, at their edge), except
 * the scope refusal of `inheritArtifact`, which is a `ScopeMismatch`.
 */
export class SessionStore extends Context.Tag("corral/store/SessionStore")<SessionStore, {
  /** Stores a spec under (org, id, version). Re-publishing the same version replaces it. */
  readonly putAgent: (orgId: string, spec: AgentSpec) => Effect.Effect<void, PersistenceFailed>
  /** The given version, or the highest version when `version` is omitted. */
  readonly getAgent: (
    orgId: string,
    id: string,
    version?: number
  ) => Effect.Effect<Option.Option<AgentSpec>, PersistenceFailed>
  /** The latest version of every agent of the org, sorted by id. */
  readonly listAgents: (orgId: string) => Effect.Effect<ReadonlyArray<AgentSpec>, PersistenceFailed>

  /** Creates a session row; fails if the id exists. */
  readonly createSession: (session: Session) => Effect.Effect<void, PersistenceFailed>
  /** The session, if it exists and belongs to `orgId`. */
  readonly getSession: (orgId: string, id: string) => Effect.Effect<Option.Option<Session>, PersistenceFailed>
  /** Replaces the session's state. */
  readonly saveState: (id: string, state: SessionState, at: number) => Effect.Effect<void, PersistenceFailed>
  /**
   * One page of the org's sessions, newest first (`createdAt` descending, then `id` descending), optionally only
   * those of one scope and/or one status; at most `limit`. `nextCursor` is present when more sessions may follow:
   * passing it back continues right after the last session returned (keyset paging, so sessions created meanwhile
   * never shift a page). A cursor that `decodeCursor` rejects fails with `PersistenceFailed`; callers validate
   * cursors from the outside world first.
   */
  readonly listSessions: (orgId: string, options: ListSessionsOptions) => Effect.Effect<SessionPage, PersistenceFailed>
  /**
   * Stores an accepted message — and, in the same transaction, the session it opens and the first answer to its
   * idempotency key — before anything acknowledges it. `Duplicate` (nothing stored) when the key was already taken
   * in the org. Fails with `PersistenceFailed` when the session exists already (a start) or does not (a follow-up).
   */
  readonly accept: (request: AcceptRequest) => Effect.Effect<AcceptOutcome, PersistenceFailed>
  /** The first answer stored under an idempotency key of the org. */
  readonly findIdempotency: (
    orgId: string,
    key: string
  ) => Effect.Effect<Option.Option<IdempotencyRecord>, PersistenceFailed>
  /** Accepted messages not yet settled, oldest first: of one session, or of every session (recovery at start). */
  readonly inbox: (sessionId?: string) => Effect.Effect<ReadonlyArray<InboxMessage>, PersistenceFailed>
  /** Forgets an accepted message once it was taken up (its user turn is stored) or refused; idempotent. */
  readonly settle: (sessionId: string, messageId: string) => Effect.Effect<void, PersistenceFailed>
  /** Sessions whose status is `running` (a burst was in flight), across orgs: for crash recovery at start. */
  readonly listRunning: () => Effect.Effect<ReadonlyArray<Session>, PersistenceFailed>

  /**
   * Appends one entry with the session's next sequence number (1, 2, ...). Keeps the pairing invariant whoever
   * writes: an entry other than `tool_results` after an assistant turn whose calls have no results is stored after
   * a `tool_results` turn closing them (`unknown_outcome`), in the same write, and that turn is returned as
   * `closed`. With `timeoutMs`, a store that can
   * suspend (a database) fails with `PersistenceFailed` once that much time passed without an answer; the turn may
   * still land (the next read shows it). A store that answers synchronously (memory) may ignore it. The timeout is
   * the store's job, not a timeout around this Effect, because the store can enforce it where the caller waits
   * without a timer and a fiber per append (see internal/groupCommit.ts).
   */
  readonly appendTurn: (
    sessionId: string,
    entry: TurnEntry,
    at: number,
    timeoutMs?: number
  ) => Effect.Effect<Appended, PersistenceFailed>
  /** The session's turns with `seq > afterSeq`, in order; empty for another org's session. */
  readonly turns: (
    orgId: string,
    sessionId: string,
    afterSeq?: number
  ) => Effect.Effect<ReadonlyArray<Turn>, PersistenceFailed>

  /**
   * Records that session `sessionId` inherits the artifacts (report) of session `fromSessionId`; idempotent.
   * Fails with `ScopeMismatch` when `fromSessionId` is not a session of the same org AND the same scope (on the
   * SQL drivers the database itself refuses the row), and with `PersistenceFailed` when `sessionId` is not a
   * session of `orgId`.
   */
  readonly inheritArtifact: (
    orgId: string,
    sessionId: string,
    fromSessionId: string
  ) => Effect.Effect<void, PersistenceFailed | ScopeMismatch>
  /** The ids of the sessions `sessionId` inherits from, sorted; empty for another org's session. */
  readonly inherited: (orgId: string, sessionId: string) => Effect.Effect<ReadonlyArray<string>, PersistenceFailed>

  /**
   * Stores freshly issued approval tokens (hashed) of session `sessionId` and, in the same transaction, revokes
   * every unspent token of the same calls (a renewal leaves exactly one live token per call).
   */
  readonly issueApprovals: (
    sessionId: string,
    records: ReadonlyArray<ApprovalRecord>
  ) => Effect.Effect<void, PersistenceFailed>
  /** The approval with this token hash when it belongs to session `sessionId` of `orgId`. */
  readonly findApproval: (
    orgId: string,
    sessionId: string,
    tokenHash: string
  ) => Effect.Effect<Option.Option<ApprovalRecord>, PersistenceFailed>
  /**
   * Spends the token at `at`: `true` when this call spent it, `false` when it was already spent or had expired by
   * `at`. Atomic, so two concurrent decisions with one token cannot both win.
   */
  readonly spendApproval: (tokenHash: string, at: number) => Effect.Effect<boolean, PersistenceFailed>
  /**
   * How many approval tokens are live at `at` (unspent, not expired): the writes waiting for a person, across the
   * store, counted up to `cap` (the count stops there, so the query stays bounded however many there are). For the
   * `corral.approvals.pending` gauge. Optional: a store without it reports no gauge.
   */
  readonly countPendingApprovals?: (at: number, cap: number) => Effect.Effect<number, PersistenceFailed>

  /** Saves a burst's trajectory. */
  readonly saveTrajectory: (trajectory: Trajectory) => Effect.Effect<void, PersistenceFailed>
  /** The session's trajectories, oldest first; empty for another org's session. */
  readonly trajectories: (
    orgId: string,
    sessionId: string
  ) => Effect.Effect<ReadonlyArray<Trajectory>, PersistenceFailed>
  /**
   * The org's usage ledger over the model attempts that started in [from, to) (epoch ms): one row per UTC day, agent,
   * provider and model, summed from the stored trajectories (failed attempts included), sorted by day, agent,
   * provider. Only `orgId`'s sessions count.
   */
  readonly usage: (orgId: string, from: number, to: number) => Effect.Effect<ReadonlyArray<UsageRow>, PersistenceFailed>

  /**
   * Holds up to `wantMicros` of `orgId`'s budget of `perDayMicros` for the UTC `day` (`rails/OrgBudget`): grants, in
   * one atomic step, `OrgBudget.grant` of what is spent and what live holds hold, adds the grant to the holds (live for
   * `OrgBudget.holdLifetimeMs` after `at`), and answers the grant with the day's tally as it stood before it.
   */
  readonly holdSpend: (
    orgId: string,
    day: string,
    perDayMicros: number,
    wantMicros: number,
    at: number
  ) => Effect.Effect<{ readonly granted: number; readonly tally: OrgDayTally }, PersistenceFailed>
  /** Ends a hold of `heldMicros` for the UTC `day`: adds `spentMicros` (what the call's attempts cost) to the day's spend. */
  readonly settleSpend: (
    orgId: string,
    day: string,
    heldMicros: number,
    spentMicros: number
  ) => Effect.Effect<void, PersistenceFailed>
  /** What `orgId` has spent on the UTC `day` (settled calls), in micro-dollars; 0 when nothing. */
  readonly daySpend: (orgId: string, day: string) => Effect.Effect<number, PersistenceFailed>
}>() {}
