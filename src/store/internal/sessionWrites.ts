/**
 * How one group-commit batch of a session's other writes travels to Postgres: a session's state (`saveState`), a
 * burst's trajectory (`saveTrajectory`) and a settled inbox message (`settle`), for any sessions, in ONE statement.
 *
 * A served session made each of these its own statement (about five of its ten: the state when the burst starts and
 * when it lands, the trajectory when it opens and when it closes, the settled message), each a round trip, a commit
 * and a socket write on the server, while its turns already shared statements with other sessions' turns
 * (appendBatch.ts). Group-committed like the turns (groupCommit.ts), a thousand sessions' saves leave in a few
 * statements: a caller's save still completes only after the statement that carried it committed.
 *
 * The three kinds touch three tables in three data-modifying parts of one statement (`WITH ... UPDATE / INSERT /
 * DELETE`), which Postgres runs on one snapshot and commits together; a caller awaits each save, so no two of one
 * session's saves of different kinds are ever in one batch waiting on each other's result. Two saves of one kind for
 * one key in one batch (two states of a session, two versions of a trajectory) would make an UPDATE or an upsert meet
 * its row twice: only the later is sent, as running them in order would have left it, and both callers get its
 * outcome.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Exit, Option } from "effect"
import type { Array as Arr, Scope } from "effect"
import { PersistenceFailed } from "../../domain/Errors.js"
import { persist, sqlState, timedOut, within } from "./failure.js"
import * as GroupCommit from "./groupCommit.js"
import type * as Overload from "./overload.js"
import { float8Array, oid, stringArray } from "./pgArrays.js"

/** One queued save: the state or the trajectory already encoded to its JSON text. */
export type Write =
  | {
    readonly _tag: "state"
    readonly sessionId: string
    readonly status: string
    readonly state: string
    readonly at: number
  }
  | {
    readonly _tag: "trajectory"
    readonly sessionId: string
    readonly runId: string
    readonly exitReason: string
    readonly startedAt: number
    readonly payload: string
  }
  | { readonly _tag: "settle"; readonly sessionId: string; readonly messageId: string }

/** The store method a write came from (named in its failures). */
export const operation = (write: Write): string =>
  write._tag === "state" ? "saveState" : write._tag === "trajectory" ? "saveTrajectory" : "settle"

/** A write's size, counted against the batch's byte cap. */
export const weight = (write: Write): number =>
  write._tag === "state" ? write.state.length : write._tag === "trajectory" ? write.payload.length : 0

/**
 * States update their session (the org is the row's own), trajectories are upserted by run id with the org taken from
 * the session row, never from the payload (a run id of another session is left alone), settled messages are deleted.
 * Rows: `(0, session id)` for each state stored and `(1, run id)` for each trajectory stored.
 */
export const statement = `WITH saved_states AS (
    UPDATE sessions s SET status = v.status, state = v.state, updated_at = v.at
    FROM unnest($1::text[], $2::text[], $3::json[], $4::float8[]) AS v (id, status, state, at)
    WHERE s.id = v.id
    RETURNING s.id
  ), saved_trajectories AS (
    INSERT INTO trajectories (run_id, session_id, org_id, exit_reason, started_at, payload)
    SELECT v.run_id, s.id, s.org_id, v.exit_reason, v.started_at, v.payload
    FROM unnest($5::text[], $6::text[], $7::text[], $8::float8[], $9::json[])
      AS v (run_id, session_id, exit_reason, started_at, payload)
    JOIN sessions s ON s.id = v.session_id
    ON CONFLICT (run_id) DO UPDATE SET payload = EXCLUDED.payload, exit_reason = EXCLUDED.exit_reason
      WHERE trajectories.session_id = EXCLUDED.session_id
    RETURNING run_id
  ), settled AS (
    DELETE FROM inbox i USING unnest($10::text[], $11::text[]) AS v (id, session_id)
    WHERE i.id = v.id AND i.session_id = v.session_id
  )
  SELECT 0, id FROM saved_states UNION ALL SELECT 1, run_id FROM saved_trajectories`

/** The parameters of `statement` for `batch`: of several saves of one kind for one key, the last. */
export const encode = (batch: ReadonlyArray<Write>): ReadonlyArray<Buffer> => {
  const states = new Map<string, Extract<Write, { _tag: "state" }>>()
  const trajectories = new Map<string, Extract<Write, { _tag: "trajectory" }>>()
  const settleIds: Array<string> = []
  const settleSessions: Array<string> = []
  for (const write of batch) {
    if (write._tag === "state") {
      states.delete(write.sessionId)
      states.set(write.sessionId, write)
    } else if (write._tag === "trajectory") {
      trajectories.delete(write.runId)
      trajectories.set(write.runId, write)
    } else {
      settleIds.push(write.messageId)
      settleSessions.push(write.sessionId)
    }
  }
  const s = [...states.values()]
  const t = [...trajectories.values()]
  return [
    stringArray(oid.text, s.map((w) => w.sessionId)),
    stringArray(oid.text, s.map((w) => w.status)),
    stringArray(oid.json, s.map((w) => w.state)),
    float8Array(s.map((w) => w.at)),
    stringArray(oid.text, t.map((w) => w.runId)),
    stringArray(oid.text, t.map((w) => w.sessionId)),
    stringArray(oid.text, t.map((w) => w.exitReason)),
    float8Array(t.map((w) => w.startedAt)),
    stringArray(oid.json, t.map((w) => w.payload)),
    stringArray(oid.text, settleIds),
    stringArray(oid.text, settleSessions)
  ]
}

const noSession = (write: Write) =>
  new PersistenceFailed({ operation: operation(write), message: `no session "${write.sessionId}"` })

const stored: Exit.Exit<void, PersistenceFailed> = Exit.void

/**
 * One outcome per write, in batch order, from `statement`'s rows (array mode): a state or a trajectory the statement
 * did not return had no session (or, for a trajectory, its run id belongs to another session). Throws on a row that
 * is not a kind and an id (a driver or schema mismatch, reported as a defect of the batch).
 */
export const readBack = (
  batch: ReadonlyArray<Write>,
  rows: ReadonlyArray<ReadonlyArray<unknown>>
): ReadonlyArray<Exit.Exit<void, PersistenceFailed>> => {
  const states = new Set<string>()
  const trajectories = new Set<string>()
  for (const row of rows) {
    const [kind, id] = row
    if (typeof id !== "string" || (kind !== 0 && kind !== 1)) {
      throw new Error(`session writes: unexpected row ${JSON.stringify(row)}`)
    }
    ;(kind === 0 ? states : trajectories).add(id)
  }
  return batch.map((write) =>
    write._tag === "settle" ||
      (write._tag === "state" ? states.has(write.sessionId) : trajectories.has(write.runId))
      ? stored
      : Exit.fail(noSession(write))
  )
}

/** SQLSTATE classes that belong to one row's data (bad value, constraint, too large): worth isolating the row. */
export const isRowError = (error: unknown): boolean => {
  const state = sqlState(error)
  return state !== undefined && (state.startsWith("22") || state.startsWith("23") || state.startsWith("54"))
}

/** How the writes are batched: the store's bounds (SqlStore.Options). */
export interface Options {
  readonly maxItems: number
  readonly maxWeight: number
  readonly patience: Overload.Liveness
}

/**
 * Starts the group commit of session writes in the current scope (one lane: one session's saves keep their order)
 * and returns how to submit one: it completes once the statement that carried it committed, or fails with
 * `PersistenceFailed` named after its method (no session, a database error, no answer within `timeoutMs`, the store
 * shutting down). Inside a caller's transaction the write is made there, alone, to commit or roll back with it.
 */
export const make = (
  options: Options
): Effect.Effect<
  (write: Write, timeoutMs: number) => Effect.Effect<void, PersistenceFailed>,
  never,
  SqlClient.SqlClient | Scope.Scope
> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const once = (batch: ReadonlyArray<Write>) =>
      Effect.suspend(() => sql.unsafe(statement, encode(batch)).values).pipe(
        Effect.map((rows) => readBack(batch, rows)),
        // Two processes' batches can lock shared sessions in different orders; Postgres aborts one of them whole
        // (nothing was written), so running it again is safe.
        Effect.retry({ times: 2, while: (error) => sqlState(error) === "40P01" })
      )
    const write = (batch: Arr.NonEmptyReadonlyArray<Write>) =>
      once(batch).pipe(
        // One bad row must not fail its neighbours: on a data error, write the batch's rows one by one, in order.
        Effect.catchAll((error) =>
          batch.length > 1 && isRowError(error)
            ? Effect.forEach(batch, (item) =>
              once([item]).pipe(
                persist(operation(item)),
                Effect.flatMap((exits) => exits[0]!),
                Effect.exit
              ))
            : Effect.fail(error)
        ),
        persist("sessionWrites"),
        // A batch that failed whole fails each write under its own method's name.
        Effect.catchAll((error) =>
          Effect.succeed(
            batch.map((item) =>
              Exit.fail(new PersistenceFailed({ operation: operation(item), message: error.message }))
            )
          )
        )
      )
    const submit = yield* GroupCommit.make<Write, void, PersistenceFailed>({
      lanes: 1,
      maxItems: options.maxItems,
      maxWeight: options.maxWeight,
      key: (item) => item.sessionId,
      weight,
      write,
      closed: () => new PersistenceFailed({ operation: "sessionWrites", message: "the store is shutting down" }),
      timedOut: (item, waitedMs, extended) => timedOut(operation(item), waitedMs, extended),
      patience: options.patience
    })
    return (item: Write, timeoutMs: number) =>
      Effect.contextWithEffect((context: Context.Context<never>) =>
        Option.isNone(Context.getOption(context, SqlClient.TransactionConnection))
          ? submit(item, timeoutMs)
          : within(operation(item), timeoutMs, options.patience)(
            Effect.flatMap(write([item]), (exits) => exits[0]!)
          )
      )
  })
