/**
 * SqlStore — the `SessionStore` port on @effect/sql's `SqlClient` (pg dialect): Postgres, or the embedded PGlite
 * through the same client (see Database.ts). Tables are in migrations/0001_init.ts.
 *
 * Sequence numbers: `session_counters.last_seq` is a per-session counter, and an append bumps it and inserts the
 * turn in ONE statement. The UPDATE takes the counter row's lock, so concurrent appends to one session queue on it
 * and each reads the previous one's committed counter: gap-free, duplicate-free numbers with no retry loop, and a
 * failed insert rolls its bump back with it. (`INSERT ... SELECT max(seq) + 1` would need a retry on every unique
 * violation under concurrency, and costs an index probe per row; the counter also makes "no such session" fall out
 * of the same statement, and lets one statement number a whole batch of several sessions' turns.)
 *
 * Appends go through group commit (internal/groupCommit.ts): turns from many sessions share one statement, a call
 * of `corral_append_turns` (migrations/0003_append_function.ts, whose plan stays cached per connection) with the
 * batch as binary array parameters (internal/appendBatch.ts, internal/appends.ts); an append completes only after the
 * statement that carried it committed. A session's other writes (its state, its trajectories, its settled messages)
 * share statements the same way (internal/sessionWrites.ts), and so do the reads by key on the served path (a
 * session, its turns, an agent, an idempotency key: internal/sessionReads.ts), so a served session has one statement
 * of its own left, its accept (docs/benchmarks.md, issue 44). The other methods are in internal/sql*.ts.
 *
 * Isolation: every read filters by org, either on the row's own `org_id` or by joining the session it belongs to.
 * Failures: every SQL error, decode error or defect is wrapped once, here, into `PersistenceFailed` (SqlError never
 * reaches session/); interruption passes through untouched.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Exit, Layer, Option, Schema } from "effect"
import type { ConfigError, Duration, Scope as EffectScope } from "effect"
import { PersistenceFailed } from "../domain/Errors.js"
import type { Turn } from "../domain/Message.js"
import { SessionState } from "../domain/Session.js"
import { Trajectory } from "../domain/Trajectory.js"
import * as Database from "./Database.js"
import * as Embedded from "./Embedded.js"
import type { Append } from "./internal/appendBatch.js"
import * as Appends from "./internal/appends.js"
import { persist, sqlState, within } from "./internal/failure.js"
import * as Overload from "./internal/overload.js"
import * as SessionReads from "./internal/sessionReads.js"
import * as SessionWrites from "./internal/sessionWrites.js"
import * as SqlApprovals from "./internal/sqlApprovals.js"
import * as SqlArtifacts from "./internal/sqlArtifacts.js"
import * as SqlInbox from "./internal/sqlInbox.js"
import * as SqlListings from "./internal/sqlListings.js"
import * as SqlSpend from "./internal/sqlSpend.js"
import * as Migrations from "./Migrations.js"
import { SessionStore } from "./SessionStore.js"

/** The persistence timeout and group-commit tuning; see docs/storage.md for the measurements behind the defaults. */
export interface Options {
  /**
   * The persistence timeout (default 10 s, `limits.persistTimeoutMs`): every method fails with `PersistenceFailed`
   * ("the store did not answer within N ms") when the database has not answered by then. `appendTurn` takes its
   * caller's `timeoutMs` when given, this one otherwise.
   */
  readonly timeoutMs?: number
  /**
   * Append batches in flight at once (default 1: fewer, larger statements won on the 2-CPU machine, for latency
   * and for the server's CPU per turn; more lanes pay off only on a server with cores to spare). Keep it below the
   * pool size so reads are never starved.
   */
  readonly lanes?: number
  /** Most turns in one INSERT (default 1,000). */
  readonly maxBatch?: number
  /** Most payload bytes in one INSERT (default 8 MiB; a larger single turn still goes, alone). */
  readonly maxBatchBytes?: number
  /** Linger after the first queued turn before writing (default 0: batch whatever queued meanwhile). */
  readonly window?: Duration.DurationInput
  /**
   * Notifies every turn stored on the Postgres channel `channel` in the transaction that stores it (`pg_notify`:
   * Postgres delivers it at the commit, and only if there is one), each as the payloads `payloads` makes of the
   * batch's turns. Set by a cluster node (cluster/ClusterEvents), so that a turn stored is never one whose
   * notification is still waiting in the process (a node that dies right after the commit loses nothing).
   */
  readonly notify?: {
    readonly channel: string
    readonly payloads: (turns: ReadonlyArray<Turn>) => ReadonlyArray<string>
  }
}

const decodeTrajectories = Schema.decodeUnknown(Schema.Array(Schema.Struct({ payload: Trajectory })))

const encodeState = Schema.encode(SessionState)

/**
 * A session state's or a trajectory's JSON text. Their schemas transform nothing (classes and defaults encode to the
 * fields they hold), so the value's JSON IS its encoding, as for a turn's entry (`appendTurn`): the static type
 * vouches for the shape, and the Schema encoder run on every save was a visible part of the store's CPU per served
 * turn (measured: docs/benchmarks.md, issue 44). Rows are decoded with the Schema when read. Fails on a value JSON
 * cannot hold.
 */
const jsonText = (operation: string, value: SessionState | Trajectory): Effect.Effect<string, PersistenceFailed> => {
  try {
    return Effect.succeed(JSON.stringify(value))
  } catch (error) {
    return Effect.fail(new PersistenceFailed({ operation, message: `not JSON: ${String(error)}` }))
  }
}

/** A `turns(afterSeq)` bound as an int4 the database accepts, matching the memory driver's slice semantics. */
const afterBound = (afterSeq: number | undefined): number =>
  afterSeq === undefined || Number.isNaN(afterSeq) ? 0 : Math.max(0, Math.min(Math.floor(afterSeq), 2_147_483_647))

const noSession = (operation: string, sessionId: string) =>
  new PersistenceFailed({ operation, message: `no session "${sessionId}"` })

type Service = Context.Tag.Service<SessionStore>

/** The methods group-committed (the writes, the reads by key): each carries its deadline on its item. */
const groupCommitted = new Set([
  "appendTurn",
  "saveState",
  "saveTrajectory",
  "settle",
  "getSession",
  "turns",
  "getAgent",
  "findIdempotency"
])

/**
 * Every method of `service` bounded by `timeoutMs` (`within`), except the group-committed ones: their writes carry
 * their deadline on their group-commit item, which costs no timer and no fiber per call (the hot path;
 * groupCommit.ts). Wrapping the whole service, rather than each method, keeps the bound on methods added later too.
 */
const bounded = (service: Service, timeoutMs: number, liveness: Overload.Liveness): Service => {
  const out: Record<string, unknown> = {}
  for (const [name, method] of Object.entries(service) as Array<[string, (...args: Array<unknown>) => unknown]>) {
    out[name] = groupCommitted.has(name)
      ? method
      : (...args: Array<unknown>) =>
        within(name, timeoutMs, liveness)(method(...args) as Effect.Effect<unknown, unknown>)
  }
  return out as unknown as Service
}

/**
 * Builds the store over the `SqlClient` in context and starts its group-commit writers in the current scope (the
 * schema must already be migrated: `layer` does it). Never fails to build; methods fail with `PersistenceFailed`
 * (and `inheritArtifact` with `ScopeMismatch`), appends still queued when the scope closes fail too.
 */
export const make = (
  options: Options = {}
): Effect.Effect<Context.Tag.Service<SessionStore>, never, SqlClient.SqlClient | EffectScope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const storeTimeoutMs = Math.max(1, Math.floor(options.timeoutMs ?? Database.defaultTimeoutMs))
    /** A flood of this store's own statements is not an outage (internal/overload.ts). */
    const liveness = new Overload.Liveness()

    const { submit, writeBatch } = yield* Appends.make({
      ...(options.notify === undefined ? {} : { notify: options.notify }),
      lanes: options.lanes ?? 1,
      maxItems: options.maxBatch ?? 1_000,
      maxWeight: options.maxBatchBytes ?? 8 * 1024 * 1024,
      ...(options.window === undefined ? {} : { window: options.window }),
      patience: liveness
    })

    // A session's state, its trajectories and its settled messages: group-committed too, in their own statement.
    const sessionWrite = yield* SessionWrites.make({
      maxItems: options.maxBatch ?? 1_000,
      maxWeight: options.maxBatchBytes ?? 8 * 1024 * 1024,
      patience: liveness
    })

    // Reads by key (a session, its turns, an agent, an idempotency key): batched too (internal/sessionReads.ts).
    const readOptions = { maxItems: options.maxBatch ?? 1_000, patience: liveness }
    const getSession = yield* SessionReads.makeGetSession(readOptions)
    const readTurns = yield* SessionReads.makeTurns(readOptions)
    const getAgent = yield* SessionReads.makeGetAgent(readOptions)
    const findIdempotency = yield* SessionReads.makeFindIdempotency(readOptions)

    const service: Service = {
      ...SqlListings.make(sql),
      ...SqlApprovals.make(sql),
      ...SqlInbox.make(sql),
      getAgent: (orgId, id, version) => getAgent({ orgId, id, version }, storeTimeoutMs),

      findIdempotency: (orgId, key) => findIdempotency({ orgId, key }, storeTimeoutMs),

      createSession: (session) =>
        Effect.gen(function*() {
          const state = JSON.stringify(yield* encodeState(session.state))
          // The session and its turn counter are born together, in one statement.
          yield* sql`WITH created AS (
              INSERT INTO sessions
                (id, org_id, user_id, scope, agent_id, agent_version, status, state, created_at, updated_at)
              VALUES (${session.id}, ${session.principal.orgId}, ${session.principal.userId}, ${session.scope},
                ${session.agentId}, ${session.agentVersion}, ${session.state.status}, ${state}::json,
                ${session.createdAt}, ${session.updatedAt})
              RETURNING id
            )
            INSERT INTO session_counters (session_id) SELECT id FROM created`.pipe(
            Effect.catchIf(
              (error) => sqlState(error) === "23505",
              () =>
                Effect.fail(
                  new PersistenceFailed({
                    operation: "createSession",
                    message: `session "${session.id}" already exists`
                  })
                )
            )
          )
        }).pipe(persist("createSession")),

      getSession: (orgId, id) => getSession({ orgId, id }, storeTimeoutMs),

      saveState: (id, state, at) =>
        Effect.flatMap(
          jsonText("saveState", state),
          // `status` is its own column (recovery's index); it is written with `state` in one statement, so the two
          // can never disagree.
          (encoded) =>
            sessionWrite({ _tag: "state", sessionId: id, status: state.status, state: encoded, at }, storeTimeoutMs)
        ),

      settle: (sessionId, messageId) => sessionWrite({ _tag: "settle", sessionId, messageId }, storeTimeoutMs),

      appendTurn: (sessionId, entry, at, timeoutMs) =>
        Effect.contextWithEffect((context: Context.Context<never>) => {
          // A TurnEntry's encoded form is the entry itself (no transformations), so JSON.stringify IS its encoding;
          // the static type vouches for the shape, and running the Schema encoder here cost more per append than
          // the append's share of the INSERT (measured). Rows are decoded with the Schema when read.
          let payload: string
          try {
            payload = JSON.stringify(entry)
          } catch (error) {
            return Effect.fail(
              new PersistenceFailed({ operation: "appendTurn", message: `not JSON: ${String(error)}` })
            )
          }
          const append: Append = { sessionId, entry, payload, at }
          // Inside a caller's transaction the turn must commit (or roll back) with it, and on the embedded
          // database the writer could not even get the one connection the transaction holds: write it here.
          if (Option.isNone(Context.getOption(context, SqlClient.TransactionConnection))) {
            return submit(append, timeoutMs ?? storeTimeoutMs)
          }
          const direct = writeBatch([append]).pipe(
            Effect.flatMap((exits) => exits[0] ?? Exit.fail(noSession("appendTurn", sessionId)))
          )
          return within("appendTurn", timeoutMs ?? storeTimeoutMs, liveness)(direct)
        }),

      turns: (orgId, sessionId, afterSeq) =>
        readTurns({ orgId, id: sessionId, after: afterBound(afterSeq) }, storeTimeoutMs),

      saveTrajectory: (trajectory) =>
        Effect.flatMap(jsonText("saveTrajectory", trajectory), (payload) =>
          sessionWrite({
            _tag: "trajectory",
            sessionId: trajectory.sessionId,
            runId: trajectory.runId,
            exitReason: trajectory.exitReason,
            startedAt: trajectory.startedAt,
            payload
          }, storeTimeoutMs)),

      trajectories: (orgId, sessionId) =>
        sql`SELECT payload FROM trajectories WHERE session_id = ${sessionId} AND org_id = ${orgId}
          ORDER BY ordinal`.pipe(
          Effect.flatMap(decodeTrajectories),
          Effect.map((rows) => rows.map((row) => row.payload)),
          persist("trajectories")
        ),
      ...SqlArtifacts.make(sql),
      ...SqlSpend.make(sql)
    }

    return bounded(service, storeTimeoutMs, liveness)
  })

/**
 * The SQL `SessionStore` over the `SqlClient` in context: migrates the schema first (idempotent), then starts the
 * store. Fails with `PersistenceFailed` when the database is unreachable or a migration fails.
 */
export const layer = (options: Options = {}): Layer.Layer<SessionStore, PersistenceFailed, SqlClient.SqlClient> =>
  Layer.scoped(SessionStore, Effect.zipRight(Migrations.run, make(options)))

/**
 * The store on the database from configuration (see `Database.config`): Postgres when `DATABASE_URL` is set, else
 * the embedded PGlite under `CORRAL_DATA_DIR`; migrated, with the default group commit (one lane, which also suits
 * the embedded database's single connection). Also provides the `SqlClient` for other SQL adapters (knowledge/). Fails
 * with `ConfigError` for malformed settings and `PersistenceFailed` when the database cannot be reached, opened
 * or migrated.
 */
export const layerConfig: Layer.Layer<
  SessionStore | SqlClient.SqlClient,
  PersistenceFailed | ConfigError.ConfigError
> = Layer.unwrapEffect(
  Effect.map(Database.config, ({ dataDir, maxConnections, url }) =>
    Option.match(url, {
      onNone: () => layer().pipe(Layer.provideMerge(Embedded.layerEmbedded({ dataDir }))),
      onSome: (url) => layer().pipe(Layer.provideMerge(Database.layerPostgres(url, { maxConnections })))
    }))
)
