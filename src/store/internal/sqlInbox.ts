/**
 * The durable mailbox and idempotency keys of the SQL store (migrations/0004_inbox.ts).
 *
 * `accept` writes the idempotency key FIRST, inside one transaction with the session (a start) and the message: a
 * key already taken (a retry, or a concurrent twin) makes that insert return nothing, the transaction is rolled back
 * whole, and the first answer is read back — so two requests with one key never create two sessions, in one process
 * or in two.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { Context } from "effect"
import { PersistenceFailed } from "../../domain/Errors.js"
import type { IdempotencyRecord } from "../../domain/Inbox.js"
import { InboxMessage } from "../../domain/Inbox.js"
import { SessionView } from "../../domain/Session.js"
import type { AcceptOutcome, SessionStore } from "../SessionStore.js"
import { persist, sqlState } from "./failure.js"

type Methods = Pick<Context.Tag.Service<SessionStore>, "accept" | "findIdempotency" | "inbox" | "settle">

const encodeMessage = Schema.encode(InboxMessage)
const encodeView = Schema.encode(SessionView)
const decodeMessages = Schema.decodeUnknown(Schema.Array(Schema.Struct({ payload: InboxMessage })))
const KeyRow = Schema.Struct({
  org_id: Schema.String,
  key: Schema.String,
  fingerprint: Schema.String,
  session_id: Schema.String,
  answer: SessionView,
  created_at: Schema.Number
})
const decodeKeys = Schema.decodeUnknown(Schema.Array(KeyRow))
const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))

const toRecord = (row: typeof KeyRow.Type): IdempotencyRecord => ({
  orgId: row.org_id,
  key: row.key,
  fingerprint: row.fingerprint,
  sessionId: row.session_id,
  answer: row.answer,
  createdAt: row.created_at
})

/** Rolls the transaction back: the key was taken. */
class KeyTaken extends Schema.TaggedError<KeyTaken>()("KeyTaken", {}) {}

/**
 * The mailbox methods over `sql`. `createSession` is the store's own statement that creates a session with its turn
 * counter; it runs inside the transaction.
 */
export const make = (
  sql: SqlClient.SqlClient,
  createSession: Context.Tag.Service<SessionStore>["createSession"]
): Methods => {
  const findIdempotency: Methods["findIdempotency"] = (orgId, key) =>
    sql`SELECT org_id, key, fingerprint, session_id, answer, created_at FROM idempotency_keys
      WHERE org_id = ${orgId} AND key = ${key}`.pipe(
      Effect.flatMap(decodeKeys),
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRecord)),
      persist("findIdempotency")
    )

  const accept: Methods["accept"] = ({ idempotency: first, message, session }) =>
    Effect.gen(function*() {
      const payload = JSON.stringify(yield* encodeMessage(message))
      const answer = first === undefined ? undefined : JSON.stringify(yield* encodeView(first.answer))
      const write = Effect.gen(function*() {
        if (first !== undefined && answer !== undefined) {
          const claimed = yield* sql`INSERT INTO idempotency_keys
              (org_id, key, fingerprint, session_id, answer, created_at)
            VALUES (${first.orgId}, ${first.key}, ${first.fingerprint}, ${first.sessionId}, ${answer}::json,
              ${first.createdAt})
            ON CONFLICT (org_id, key) DO NOTHING RETURNING key AS id`.pipe(Effect.flatMap(decodeIds))
          if (claimed.length === 0) return yield* new KeyTaken()
        }
        if (session !== undefined) yield* createSession(session)
        // The org comes from the session row: a message can only land in a session of its own org.
        const stored = yield* sql`INSERT INTO inbox (id, session_id, org_id, payload, accepted_at)
          SELECT ${message.id}, s.id, s.org_id, ${payload}::json, ${message.acceptedAt}
          FROM sessions s WHERE s.id = ${message.sessionId} AND s.org_id = ${message.orgId}
          RETURNING id`.pipe(Effect.flatMap(decodeIds))
        if (stored.length === 0) {
          return yield* new PersistenceFailed({ operation: "accept", message: `no session "${message.sessionId}"` })
        }
      })
      const outcome = yield* sql.withTransaction(write).pipe(
        Effect.as<AcceptOutcome>({ _tag: "Accepted" }),
        Effect.catchTag("KeyTaken", () => Effect.succeed(undefined)),
        // A concurrent twin committed the key between our snapshot and our insert: it is taken.
        Effect.catchIf((error) => sqlState(error) === "23505" && first !== undefined, () => Effect.succeed(undefined))
      )
      if (outcome !== undefined) return outcome
      const taken = yield* findIdempotency(first!.orgId, first!.key)
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
        ),
    settle: (sessionId, messageId) =>
      sql`DELETE FROM inbox WHERE id = ${messageId} AND session_id = ${sessionId}`.pipe(
        Effect.asVoid,
        persist("settle")
      )
  }
}
