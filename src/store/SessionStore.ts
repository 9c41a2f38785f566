/**
 * The `SessionStore` port: agents, sessions, the transcript and trajectories. The transcript is the source of
 * truth; every read is filtered by org so no method returns another org's rows.
 */
import { Context } from "effect"
import type { Effect, Option } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { PersistenceFailed, ScopeMismatch } from "../domain/Errors.js"
import type { Turn, TurnEntry } from "../domain/Message.js"
import type { Session, SessionState } from "../domain/Session.js"
import type { Trajectory } from "../domain/Trajectory.js"

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
  /** Sessions whose status is `running` (a burst was in flight), across orgs: for crash recovery at start. */
  readonly listRunning: () => Effect.Effect<ReadonlyArray<Session>, PersistenceFailed>

  /** Appends one entry with the session's next sequence number (1, 2, ...). */
  readonly appendTurn: (sessionId: string, entry: TurnEntry, at: number) => Effect.Effect<Turn, PersistenceFailed>
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

  /** Saves a burst's trajectory. */
  readonly saveTrajectory: (trajectory: Trajectory) => Effect.Effect<void, PersistenceFailed>
  /** The session's trajectories, oldest first; empty for another org's session. */
  readonly trajectories: (
    orgId: string,
    sessionId: string
  ) => Effect.Effect<ReadonlyArray<Trajectory>, PersistenceFailed>
}>() {}
