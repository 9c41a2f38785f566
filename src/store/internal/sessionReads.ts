/**
 * Sessions as rows, and the two reads by session group-committed: `getSession` and `turns` calls that arrive in one
 * turn of the event loop leave as ONE statement each (`WHERE id = ANY($1)`, a join with the batch's `unnest`).
 *
 * A followed session was read three times as its event stream opened (the session, its turns, the stream's
 * snapshot), each read its own statement: a round trip and a socket write on the server for a row or two. Batched
 * like the writes (groupCommit.ts), a thousand followers' reads share a few statements. A read is queued only when
 * its caller asks, so it is sent after everything that caller saw acknowledged (its own writes, a hub it joined):
 * it sees what a lone statement would. Each read is answered from the batch's rows by its own org: another org's
 * session is not found and has no turns, as before; a row that does not decode fails only the reads it answers.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Either, Exit, Option, Schema } from "effect"
import type { Array as Arr, Scope as EffectScope } from "effect"
import { AgentSpec } from "../../domain/AgentSpec.js"
import { PersistenceFailed } from "../../domain/Errors.js"
import { AgentId, SessionId } from "../../domain/Ids.js"
import type { IdempotencyRecord } from "../../domain/Inbox.js"
import { TurnEntry } from "../../domain/Message.js"
import type { Turn } from "../../domain/Message.js"
import { Principal } from "../../domain/Principal.js"
import { Scope } from "../../domain/Scope.js"
import { SessionState } from "../../domain/Session.js"
import type { Session } from "../../domain/Session.js"
import { describe, persist, timedOut, within } from "./failure.js"
import * as GroupCommit from "./groupCommit.js"
import type * as Overload from "./overload.js"
import { boolArray, int4Array, oid, stringArray } from "./pgArrays.js"
import * as SqlInbox from "./sqlInbox.js"

/** A `sessions` row as read (`columns`). */
export const SessionRow = Schema.Struct({
  id: SessionId,
  org_id: Schema.String,
  user_id: Schema.String,
  scope: Scope,
  agent_id: AgentId,
  agent_version: Schema.Int,
  state: SessionState,
  created_at: Schema.Number,
  updated_at: Schema.Number
})

/** The columns of `SessionRow`, in a SELECT list. */
export const columns = "id, org_id, user_id, scope, agent_id, agent_version, state, created_at, updated_at"

/** Decodes rows of `columns`; fails with the ParseError of a row that is not a session. */
export const decodeSessions = Schema.decodeUnknown(Schema.Array(SessionRow))

const decodeRow = Schema.decodeUnknownEither(SessionRow)

/** A decoded row as the store's `Session`. */
export const toSession = (row: typeof SessionRow.Type): Session => ({
  id: row.id,
  principal: new Principal({ orgId: row.org_id, userId: row.user_id }),
  scope: row.scope,
  agentId: row.agent_id,
  agentVersion: row.agent_version,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
  state: row.state
})

/** One queued read of a session. */
export interface Read {
  readonly orgId: string
  readonly id: string
}

/** One queued read of a session's turns after `after`. */
export interface TurnsRead {
  readonly orgId: string
  readonly id: string
  readonly after: number
}

/** The batch's sessions, each id once. */
const sessionsStatement = `SELECT ${columns} FROM sessions WHERE id = ANY($1::text[])`

/** Each read's turns, with the read's position in the batch (1-based), in order. */
const turnsStatement = `SELECT v.i::int4 AS i, t.seq, t.created_at, t.payload
  FROM unnest($1::text[], $2::text[], $3::int4[]) WITH ORDINALITY AS v (id, org_id, after, i)
  JOIN sessions s ON s.id = v.id AND s.org_id = v.org_id
  JOIN turns t ON t.session_id = v.id AND t.seq > v.after
  ORDER BY v.i, t.seq`

const TurnRow = Schema.Struct({ seq: Schema.Int, created_at: Schema.Number, payload: TurnEntry })
const decodeTurns = Schema.decodeUnknownEither(Schema.Array(TurnRow))

/** How the reads are batched: the store's bounds (SqlStore.Options). */
export interface Options {
  readonly maxItems: number
  readonly patience: Overload.Liveness
}

type Answers<B> = ReadonlyArray<Exit.Exit<B, PersistenceFailed>>

/**
 * A read group-committed: `read` answers a batch, one Exit per item in order. Inside a caller's transaction the read
 * is made there, alone.
 */
const batched = <A, B>(
  operation: string,
  options: Options,
  read: (sql: SqlClient.SqlClient, batch: Arr.NonEmptyReadonlyArray<A>) => Effect.Effect<Answers<B>, unknown>
): Effect.Effect<
  (item: A, timeoutMs: number) => Effect.Effect<B, PersistenceFailed>,
  never,
  SqlClient.SqlClient | EffectScope.Scope
> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const write = (batch: Arr.NonEmptyReadonlyArray<A>) =>
      Effect.suspend(() => read(sql, batch)).pipe(persist(operation))
    const submit = yield* GroupCommit.make<A, B, PersistenceFailed>({
      lanes: 1,
      maxItems: options.maxItems,
      maxWeight: Number.POSITIVE_INFINITY,
      key: () => "",
      weight: () => 0,
      write,
      closed: () => new PersistenceFailed({ operation, message: "the store is shutting down" }),
      timedOut: (_, waitedMs, extended) => timedOut(operation, waitedMs, extended),
      patience: options.patience
    })
    return (item: A, timeoutMs: number) =>
      Effect.contextWithEffect((context: Context.Context<never>) =>
        Option.isNone(Context.getOption(context, SqlClient.TransactionConnection))
          ? submit(item, timeoutMs)
          : within(operation, timeoutMs, options.patience)(Effect.flatMap(write([item]), (exits) => exits[0]!))
      )
  })

const undecodable = (operation: string, error: unknown) =>
  Exit.fail(new PersistenceFailed({ operation, message: describe(error) }))

/**
 * Starts the group commit of `getSession` in the current scope and returns it: the org's session with that id, or
 * none; fails with `PersistenceFailed` (a database error, a row that does not decode, no answer within `timeoutMs`,
 * the store shutting down).
 */
export const makeGetSession = (options: Options) =>
  batched<Read, Option.Option<Session>>("getSession", options, (sql, batch) => {
    const ids = batch.length === 1 ? [batch[0].id] : [...new Set(batch.map((r) => r.id))]
    return Effect.map(sql.unsafe(sessionsStatement, [stringArray(oid.text, ids)]), (rows) => {
      const byId = new Map<unknown, unknown>(rows.map((row) => [(row as { readonly id?: unknown }).id, row]))
      return batch.map((r) => {
        const raw = byId.get(r.id) as { readonly org_id?: unknown } | undefined
        if (raw === undefined || raw.org_id !== r.orgId) return Exit.succeed(Option.none())
        const row = decodeRow(raw)
        return Either.isRight(row)
          ? Exit.succeed(Option.some(toSession(row.right)))
          : undecodable("getSession", row.left)
      })
    })
  })

/**
 * Starts the group commit of `turns` in the current scope and returns it: the org's session's turns after `after`,
 * in order (none for a session the org cannot see); fails like `makeGetSession`'s reads.
 */
export const makeTurns = (options: Options) =>
  batched<TurnsRead, ReadonlyArray<Turn>>("turns", options, (sql, batch) =>
    Effect.map(
      sql.unsafe(turnsStatement, [
        stringArray(oid.text, batch.map((r) => r.id)),
        stringArray(oid.text, batch.map((r) => r.orgId)),
        int4Array(batch.map((r) => r.after))
      ]),
      (rows) => {
        const byRead: Array<Array<unknown>> = batch.map(() => [])
        for (const row of rows) byRead[((row as { readonly i?: number }).i ?? 0) - 1]?.push(row)
        return batch.map((r, k) => {
          const decoded = decodeTurns(byRead[k]!)
          return Either.isRight(decoded)
            ? Exit.succeed(
              decoded.right.map((row): Turn => ({
                sessionId: r.id,
                seq: row.seq,
                at: row.created_at,
                entry: row.payload
              }))
            )
            : undecodable("turns", decoded.left)
        })
      }
    ))

/** One queued read of an agent: a version, or the latest (`version` undefined). */
export interface AgentRead {
  readonly orgId: string
  readonly id: string
  readonly version: number | undefined
}

/** Each read's agent (the given version, or the highest), with the read's position in the batch (1-based). */
const agentsStatement = `SELECT DISTINCT ON (v.i) v.i::int4 AS i, a.spec
  FROM unnest($1::text[], $2::text[], $3::int4[], $4::bool[]) WITH ORDINALITY AS v (org_id, id, version, latest, i)
  JOIN agents a ON a.org_id = v.org_id AND a.id = v.id AND (v.latest OR a.version = v.version)
  ORDER BY v.i, a.version DESC`

const decodeSpec = Schema.decodeUnknownEither(AgentSpec)

/** Whether `version` can name a stored version (an int4): any other matches none, as the lone statement found. */
const storable = (version: number): boolean => Number.isInteger(version) && version >= -(2 ** 31) && version < 2 ** 31

/**
 * Starts the group commit of `getAgent` in the current scope and returns it: the org's agent `id` at `version`, or
 * its highest version; none when there is none; fails like `makeGetSession`'s reads.
 */
export const makeGetAgent = (options: Options) => {
  const made = batched<AgentRead, Option.Option<AgentSpec>>("getAgent", options, (sql, batch) =>
    Effect.map(
      sql.unsafe(agentsStatement, [
        stringArray(oid.text, batch.map((r) => r.orgId)),
        stringArray(oid.text, batch.map((r) => r.id)),
        int4Array(batch.map((r) => r.version ?? 0)),
        boolArray(batch.map((r) => r.version === undefined ? 1 : 0))
      ]),
      (rows) => {
        const byRead: Array<unknown> = batch.map(() => undefined)
        for (const row of rows) {
          const { i, spec } = row as { readonly i?: number; readonly spec?: unknown }
          byRead[(i ?? 0) - 1] = spec
        }
        return batch.map((_, k) => {
          const raw = byRead[k]
          if (raw === undefined) return Exit.succeed(Option.none())
          const spec = decodeSpec(raw)
          return Either.isRight(spec) ? Exit.succeed(Option.some(spec.right)) : undecodable("getAgent", spec.left)
        })
      }
    ))
  return Effect.map(
    made,
    (read) => (item: AgentRead, timeoutMs: number) =>
      item.version !== undefined && !storable(item.version)
        ? Effect.succeed(Option.none<AgentSpec>())
        : read(item, timeoutMs)
  )
}

/** One queued read of an idempotency record. */
export interface KeyRead {
  readonly orgId: string
  readonly key: string
}

/** Each read's record, with the read's position in the batch (1-based). */
const keysStatement = `SELECT v.i::int4 AS i, k.org_id, k.key, k.fingerprint, k.session_id, k.answer, k.created_at
  FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS v (org_id, key, i)
  JOIN idempotency_keys k ON k.org_id = v.org_id AND k.key = v.key`

const decodeKey = Schema.decodeUnknownEither(SqlInbox.KeyRow)

/**
 * Starts the group commit of `findIdempotency` in the current scope and returns it: the org's record of `key`, or
 * none; fails like `makeGetSession`'s reads.
 */
export const makeFindIdempotency = (options: Options) =>
  batched<KeyRead, Option.Option<IdempotencyRecord>>("findIdempotency", options, (sql, batch) =>
    Effect.map(
      sql.unsafe(keysStatement, [
        stringArray(oid.text, batch.map((r) => r.orgId)),
        stringArray(oid.text, batch.map((r) => r.key))
      ]),
      (rows) => {
        const byRead: Array<unknown> = batch.map(() => undefined)
        for (const row of rows) byRead[((row as { readonly i?: number }).i ?? 0) - 1] = row
        return batch.map((_, k) => {
          const raw = byRead[k]
          if (raw === undefined) return Exit.succeed(Option.none())
          const row = decodeKey(raw)
          return Either.isRight(row)
            ? Exit.succeed(Option.some(SqlInbox.toRecord(row.right)))
            : undecodable("findIdempotency", row.left)
        })
      }
    ))
