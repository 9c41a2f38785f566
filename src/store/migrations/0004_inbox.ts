/**
 * 0004 — the durable mailbox and idempotency keys (issue 12: "acknowledged means stored").
 *
 * - `inbox`: a message accepted for a session and not yet settled. It is written (for a start, in the same
 *   transaction as the session) before the request is acknowledged; the burst that takes it up stores its user turn
 *   with the message id, and the row is deleted afterwards. Rows left by a process that died are run at start.
 *   `ordinal` keeps acceptance order across messages accepted within the same millisecond.
 * - `idempotency_keys`: the first answer to a request sent with an `Idempotency-Key`, per org, written in the same
 *   transaction as what the request created, so a retry either finds it or finds nothing was created.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE inbox (
    id text PRIMARY KEY,
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    org_id text NOT NULL,
    payload json NOT NULL,
    accepted_at double precision NOT NULL,
    ordinal bigserial NOT NULL
  )`
  yield* sql`CREATE INDEX inbox_session_idx ON inbox (session_id, ordinal)`
  yield* sql`CREATE TABLE idempotency_keys (
    org_id text NOT NULL,
    key text NOT NULL,
    fingerprint text NOT NULL,
    session_id text NOT NULL,
    answer json NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (org_id, key)
  )`
})
