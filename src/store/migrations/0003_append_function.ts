/**
 * 0003 — `corral_append_turns`, the statement of an append batch as a function, so its plan is cached.
 *
 * Group commit writes a batch every few milliseconds, and under a paced load most batches are small (median 19
 * turns at 10,000 turns/s offered). Sent as a plain statement, every batch paid Postgres's parse, analysis and
 * planning of a three-part CTE again, a large share of a small batch's server time. PL/pgSQL keeps the plan of
 * the query inside a function for the life of the connection (switching to the generic plan after five calls), so
 * a batch costs a trivial `SELECT ... FROM corral_append_turns(...)` plus execution (the figures: docs/benchmarks.md,
 * "Notes moved from the code").
 *
 * Contract (SqlStore.ts and internal/appendBatch.ts): `session_ids` are a batch's distinct sessions and `counts`
 * their numbers of turns; turn i belongs to session `positions[i]` (1-based into `session_ids`) and is the
 * `ranks[i]`-th turn of that session in the batch. Each existing session's counter is bumped by its count, in
 * the same statement that inserts its turns numbered base + rank (base: the counter before the bump), so the
 * numbers are gap-free and a failed insert rolls the bump back. Returns `(session_position, base)` for each session
 * that exists; turns of a missing session are neither numbered nor written. The counter UPDATE takes each session's
 * row lock, which is what orders concurrent batches of one session (see SqlStore.ts).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Creates the function; fails (and the Migrator rolls back) on any SQL error. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE FUNCTION corral_append_turns(
    session_ids text[], counts int4[], positions int4[], ranks int4[], kinds text[], payloads json[],
    created_ats float8[]
  ) RETURNS TABLE (session_position int4, base int4) LANGUAGE plpgsql AS $fn$
  BEGIN
    RETURN QUERY WITH bumped AS (
      UPDATE session_counters s SET last_seq = s.last_seq + c.n
      FROM unnest(session_ids, counts) WITH ORDINALITY AS c (session_id, n, i)
      WHERE s.session_id = c.session_id
      RETURNING c.i::int4 AS i, s.session_id, s.last_seq - c.n AS previous
    ),
    inserted AS (
      INSERT INTO turns (session_id, seq, kind, payload, created_at)
      SELECT bumped.session_id, bumped.previous + t.rank, t.kind, t.payload, t.created_at
      FROM unnest(positions, ranks, kinds, payloads, created_ats) AS t (i, rank, kind, payload, created_at)
      JOIN bumped ON bumped.i = t.i
    )
    SELECT bumped.i, bumped.previous FROM bumped;
  END
  $fn$`
})
