/**
 * 0002 — approvals bound to the turn that asked for the call; `tool_calls` removed.
 *
 * - `approvals.turn_seq`: call ids are unique within one assistant turn only, so a token names its call by
 *   (session, turn, call). Rows from before this migration get 0, the value the session state reads for a pending
 *   write stored without its turn, so they still match.
 * - `approvals_live_idx`: a renewal revokes the unspent tokens of a call; a decision looks a token up by its hash.
 * - `tool_calls` is dropped: it was never written. Every call is recorded with its origin, effect, arguments and
 *   result in the burst's trajectory, and the marker that says "this approved write was dispatched" (what makes an
 *   interrupted write `unknown_outcome`) is saved in the session state before the call runs, in the same row that
 *   the decision itself updates.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE approvals ADD COLUMN turn_seq integer NOT NULL DEFAULT 0`
  yield* sql`DROP INDEX approvals_session_idx`
  yield* sql`CREATE INDEX approvals_call_idx ON approvals (session_id, turn_seq, call_id) WHERE used_at IS NULL`
  yield* sql`DROP TABLE tool_calls`
})
