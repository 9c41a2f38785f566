/**
 * The durable mailbox and idempotency keys of the SQL store (migrations/0004_inbox.ts).
 *
 * Every `accept` is ONE statement, atomic on its own: a start writes the session, its turn counter and the message
 * together; with an `Idempotency-Key` the key is claimed first (`ON CONFLICT DO NOTHING`) and every other insert
 * reads the claimed row, so a key already taken — a retry, or a concurrent twin (the insert waits for the twin's
 * commit) — inserts nothing, and the first answer is read back. Two requests with one key never create two
 * sessions, in one process or in two.
 *
 * One statement rather than a transaction: a transaction's BEGIN and COMMIT made a start four round trips on a
 * pooled connection, and under a spike of starts (1,000 at once) the waits for a connection ran into the pool's bound
 * and were answered 503 (docs/benchmarks.md at 09f4c1e, "the server path").
 */
import type { SqlClient, Statement } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { Context } from "effect"
import { PersistenceFailed } from "../../domain/Errors.js"
import type { IdempotencyRecord } from "../../domain/Inbox.js"
import { InboxMessage } from "../../domain/Inbox.js"
import type { Session } from "../../domain/Session.js"
import { SessionState, SessionView } from "../../domain/Session.js"
import type { AcceptOutcome, SessionStore } from "../SessionStore.js"
import { persist, sqlState } from "./failure.js"

type Methods = Pick<Context.Tag.Service<SessionStore>, "accept" | "findIdempotency" | "inbox">

const encodeMessage = Schema.encode(InboxMessage)
const encodeView = Schema.encode(SessionView)
const encodeState = Schema.encode(SessionState)
const decodeMessages = Schema.decodeUnknown(Schema.Array(Schema.Struct({ payload: InboxMessage })))
/** An `idempotency_keys` row as read. */
export const KeyRow = Schema.Struct({
  org_id: Schema.String,
  key: Schema.String,
  fingerprint: Schema.String,
  session_id: Schema.String,
  answer: SessionView,
  created_at: Schema.Number
})
const decodeKeys = Schema.decodeUnknown(Schema.Array(KeyRow))
const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))

/** A decoded row as the store's `IdempotencyRecord`. */
export const toRecord = (row: typeof KeyRow.Type): IdempotencyRecord => ({
  orgId: row.org_id,
  key: row.key,
  fingerprint: row.fingerprint,
  sessionId: row.session_id,
  answer: row.answer,
  createdAt: row.created_at
})

/** An idempotency record with its answer encoded for the row. */
interface Keyed {
  readonly record: IdempotencyRecord
  readonly answer: string
}

/** The mailbox methods over `sql`. */
export const make = (sql: SqlClient.SqlClient): Methods => {
  const sessionColumns = sql`id, org_id, user_id, scope, agent_id, agent_version, status, state, created_at,
    updated_at`
  /** Claims the key (`where` narrows when): one row back when this request took it, none when it was taken. */
  const claim = (key: Keyed, where: Statement.Fragment = sql``) =>
    sql`INSERT INTO idempotency_keys (org_id, key, fingerprint, session_id, answer, created_at)
      SELECT ${key.record.orgId}, ${key.record.key}, ${key.record.fingerprint}, ${key.record.sessionId},
        ${key.answer}::json, ${key.record.createdAt} ${where}
      ON CONFLICT (org_id, key) DO NOTHING RETURNING key`
  const findIdempotency: Methods["findIdempotency"] = (orgId, key) =>
    sql`SELECT org_id, key, fingerprint, session_id, answer, created_at FROM idempotency_keys
      WHERE org_id = ${orgId} AND key = ${key}`.pipe(
      Effect.flatMap(decodeKeys),
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRecord)),
      persist("findIdempotency")
    )

  /** Stores the message in its session (of its org); fails when there is no such session. */
  const insertMessage = (message: InboxMessage, payload: string) =>
    Effect.gen(function*() {
      // The org comes from the session row: a message can only land in a session of its own org.
      const stored = yield* sql`INSERT INTO inbox (id, session_id, org_id, payload, accepted_at)
        SELECT ${message.id}, s.id, s.org_id, ${payload}::json, ${message.acceptedAt}
        FROM sessions s WHERE s.id = ${message.sessionId} AND s.org_id = ${message.orgId}
        RETURNING id`.pipe(Effect.flatMap(decodeIds))
      if (stored.length === 0) {
        return yield* new PersistenceFailed({ operation: "accept", message: `no session "${message.sessionId}"` })
      }
    })

  /**
   * A start in ONE statement: the session, its turn counter and its first message — and with a key, the key first,
   * every other insert reading the claimed key's row, so a key already taken inserts nothing (no rows back).
   */
  const start = (session: Session, message: InboxMessage, payload: string, key?: Keyed) =>
    Effect.gen(function*() {
      if (message.sessionId !== session.id || message.orgId !== session.principal.orgId) {
        return yield* new PersistenceFailed({ operation: "accept", message: `no session "${message.sessionId}"` })
      }
      const state = JSON.stringify(yield* encodeState(session.state))
      const row = sql`${session.id}, ${session.principal.orgId}, ${session.principal.userId}, ${session.scope},
        ${session.agentId}, ${session.agentVersion}, ${session.state.status}, ${state}::json, ${session.createdAt},
        ${session.updatedAt}`
      const created = key === undefined
        ? sql`WITH created AS (
            INSERT INTO sessions (${sessionColumns}) VALUES (${row}) RETURNING id, org_id
          ),`
        : sql`WITH claimed AS (${claim(key)}), created AS (
            INSERT INTO sessions (${sessionColumns}) SELECT ${row} FROM claimed RETURNING id, org_id
          ),`
      const stored = yield* sql`${created} counter AS (
          INSERT INTO session_counters (session_id) SELECT id FROM created
        )
        INSERT INTO inbox (id, session_id, org_id, payload, accepted_at)
        SELECT ${message.id}, c.id, c.org_id, ${payload}::json, ${message.acceptedAt} FROM created c
        RETURNING id`.pipe(
        Effect.flatMap(decodeIds),
        Effect.catchIf(
          // The key cannot conflict here (ON CONFLICT DO NOTHING waits for a twin and inserts nothing): the id can.
          (error) => sqlState(error) === "23505",
          () =>
            Effect.fail(
              new PersistenceFailed({ operation: "accept", message: `session "${session.id}" already exists` })
            )
        )
      )
      return stored.length > 0
    })

  /** A follow-up with a key in one statement: the key is claimed only in an existing session of the org. */
  const followKeyed = (message: InboxMessage, payload: string, key: Keyed) =>
    sql`WITH target AS (
        SELECT s.id, s.org_id FROM sessions s WHERE s.id = ${message.sessionId} AND s.org_id = ${message.orgId}
      ), claimed AS (${claim(key, sql`WHERE EXISTS (SELECT 1 FROM target)`)})
      INSERT INTO inbox (id, session_id, org_id, payload, accepted_at)
      SELECT ${message.id}, t.id, t.org_id, ${payload}::json, ${message.acceptedAt} FROM target t, claimed
      RETURNING id`.pipe(
      Effect.flatMap(decodeIds),
      Effect.flatMap((rows) =>
        rows.length > 0 ? Effect.succeed(true) : Effect.flatMap(sessionExists(message), (exists) =>
          exists
            ? Effect.succeed(false)
            : Effect.fail(
              new PersistenceFailed({ operation: "accept", message: `no session "${message.sessionId}"` })
            ))
      )
    )

  const sessionExists = (message: InboxMessage) =>
    sql`SELECT id FROM sessions WHERE id = ${message.sessionId} AND org_id = ${message.orgId}`.pipe(
      Effect.flatMap(decodeIds),
      Effect.map((rows) => rows.length > 0)
    )

  const accept: Methods["accept"] = ({ idempotency: first, message, session }) =>
    Effect.gen(function*() {
      const payload = JSON.stringify(yield* encodeMessage(message))
      if (first === undefined) {
        yield* session === undefined ? insertMessage(message, payload) : start(session, message, payload)
        return { _tag: "Accepted" } satisfies AcceptOutcome
      }
      const key: Keyed = { record: first, answer: JSON.stringify(yield* encodeView(first.answer)) }
      // `false`: the key was taken (by an earlier request, or by a concurrent twin that committed first).
      const stored = yield* (session === undefined
        ? followKeyed(message, payload, key)
        : start(session, message, payload, key))
      if (stored) return { _tag: "Accepted" } satisfies AcceptOutcome
      const taken = yield* findIdempotency(first.orgId, first.key)
      if (Option.isNone(taken)) {
        return yield* new PersistenceFailed({ operation: "accept", message: "idempotency key vanished" })
      }
      return { _tag: "Duplicate", first: taken.value } satisfies AcceptOutcome
    }).pipe(persist("accept"))

  return {
    accept,
    findIdempotency,
    inbox: (sessionId) =>
      (sessionId === undefined
        ? sql`SELECT payload FROM inbox ORDER BY ordinal`
        : sql`SELECT payload FROM inbox WHERE session_id = ${sessionId} ORDER BY ordinal`).pipe(
          Effect.flatMap(decodeMessages),
          Effect.map((rows) => rows.map((row) => row.payload)),
          persist("inbox")
        )
  }
}
