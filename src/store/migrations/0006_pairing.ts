/**
 * 0006 — the pairing invariant kept by the append statement itself (store/Pairing.ts).
 *
 * `session_counters.closing` holds, while a session's last turn is an assistant turn whose calls have no results,
 * the `tool_results` entry that closes them (built by the node that stored the assistant turn). The append
 * function takes, per session of a batch, whether its first turn would break the pairing (anything but
 * `tool_results`) and the `closing` of its last turn (or null); when the first breaks it and `closing` is set, the
 * function stores `closing` first, numbered before the batch's turns, in the same statement. The counter row is
 * where this lives because the UPDATE locks it and re-reads it after waiting for a concurrent writer: a read of
 * `turns` in the same statement would see the snapshot taken before that wait, and miss an assistant turn another
 * node committed meanwhile. `closed` is scratch: the UPDATE sets it to the `closing` it consumed so that RETURNING
 * (which sees only new values) can report it.
 *
 * The four-argument-shorter `corral_append_turns` of 0003 stays for nodes of the previous version during a rolling
 * upgrade; it now clears `closing` (it cannot close, but it must not leave a stale one behind a turn it stored).
 *
 * Backfill: every session whose last stored turn is an assistant turn with calls gets its `closing`, built here
 * with the same text as `Pairing.closing`.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Sets `closing` for every session whose last stored turn is an assistant turn with calls (the text is
 * `Pairing.closingText`'s, word for word). Run by the migration; idempotent.
 */
export const backfill = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`UPDATE session_counters c SET closing = json_build_object(
      'kind', 'tool_results',
      'results', (
        SELECT json_agg(json_build_object(
          'callId', call.value ->> 'id',
          'name', call.value ->> 'name',
          'content', format(
            '"%s" has no result: its burst ended before the result was stored, so its outcome is unknown and it '
              || 'was NOT run again. Check its effect before calling it again.',
            call.value ->> 'name'
          ),
          'isError', true,
          'status', 'unknown_outcome'
        ) ORDER BY call.ordinality)
        FROM json_array_elements(t.payload -> 'toolCalls') WITH ORDINALITY AS call (value, ordinality)
      )
    )
    FROM turns t
    WHERE t.session_id = c.session_id AND t.seq = c.last_seq AND t.kind = 'assistant'
      AND json_array_length(t.payload -> 'toolCalls') > 0`
})

/** Adds the columns, the function and the backfill; fails (and the Migrator rolls back) on any SQL error. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE session_counters ADD COLUMN closing json, ADD COLUMN closed json`

  yield* sql`CREATE OR REPLACE FUNCTION corral_append_turns(
    session_ids text[], counts int4[], positions int4[], ranks int4[], kinds text[], payloads json[],
    created_ats float8[]
  ) RETURNS TABLE (session_position int4, base int4) LANGUAGE plpgsql AS $fn$
  BEGIN
    RETURN QUERY WITH bumped AS (
      UPDATE session_counters s SET last_seq = s.last_seq + c.n, closing = NULL, closed = NULL
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

  // Returns, per existing session, `base` (turn k of the session in the batch is base + k; a closing turn stored
  // first is base itself) and the closing entry stored, if any.
  yield* sql`CREATE FUNCTION corral_append_turns(
    session_ids text[], counts int4[], positions int4[], ranks int4[], kinds text[], payloads json[],
    created_ats float8[], breaks bool[], closings json[]
  ) RETURNS TABLE (session_position int4, base int4, closed json) LANGUAGE plpgsql AS $fn$
  BEGIN
    RETURN QUERY WITH bumped AS (
      UPDATE session_counters s SET
        last_seq = s.last_seq + c.n + CASE WHEN c.breaks AND s.closing IS NOT NULL THEN 1 ELSE 0 END,
        closed = CASE WHEN c.breaks THEN s.closing END,
        closing = c.closing
      FROM unnest(session_ids, counts, breaks, closings) WITH ORDINALITY AS c (session_id, n, breaks, closing, i)
      WHERE s.session_id = c.session_id
      RETURNING c.i::int4 AS i, s.session_id, s.last_seq - c.n AS base, s.closed AS closed
    ),
    closings AS (
      INSERT INTO turns (session_id, seq, kind, payload, created_at)
      SELECT bumped.session_id, bumped.base, 'tool_results', bumped.closed, t.created_at
      FROM unnest(positions, ranks, created_ats) AS t (i, rank, created_at)
      JOIN bumped ON bumped.i = t.i AND t.rank = 1
      WHERE bumped.closed IS NOT NULL
    ),
    inserted AS (
      INSERT INTO turns (session_id, seq, kind, payload, created_at)
      SELECT bumped.session_id, bumped.base + t.rank, t.kind, t.payload, t.created_at
      FROM unnest(positions, ranks, kinds, payloads, created_ats) AS t (i, rank, kind, payload, created_at)
      JOIN bumped ON bumped.i = t.i
    )
    SELECT bumped.i, bumped.base, bumped.closed FROM bumped;
  END
  $fn$`

  yield* backfill
})
