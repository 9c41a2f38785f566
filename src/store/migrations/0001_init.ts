/**
 * 0001 — the initial schema (DESIGN §8). Runs unchanged on PostgreSQL 15+ and on the embedded PGlite.
 *
 * Decisions worth knowing before changing a column:
 * - Times are `double precision` milliseconds since the epoch, exactly the numbers the domain's `Clock` gives:
 *   they round-trip bit for bit on both drivers (a `timestamptz` would not keep a JavaScript number exactly).
 * - Every JSON column is `json`, not `jsonb`. `jsonb` normalises what it stores: it reorders object keys, drops
 *   duplicate keys and refuses `\u0000` and unpaired surrogates. Key order is observable here (a report's fields,
 *   the property order of an agent's report schema, which shapes the prompt), and model replies and tool output
 *   are kept verbatim and may contain those characters (a refused turn would fail the burst as infrastructure).
 *   `json` stores the text as written, so both drivers read back exactly what was appended, and it skips the
 *   binary conversion that is most of an append's server-side cost. A query that needs operators or an index casts
 *   to `jsonb`.
 * - `session_counters.last_seq` is the per-session turn counter: an append bumps it and inserts the turn in one
 *   statement (see SqlStore), so sequence numbers are gap-free without retries. It lives in its own narrow table,
 *   half-filled pages, no index but the key: every bump is then a HOT update of a ~40-byte row, instead of a
 *   copy of the session row (state included) plus a new entry in each of its indexes. Measured: the counter
 *   UPDATE was the most expensive node of an append batch while it lived on `sessions`.
 * - `UNIQUE (org_id, scope, id)` on sessions is what composite foreign keys point at: a row that references a
 *   session through (org_id, scope, id) cannot cross an org or a scope, whatever the code above it does.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/** Creates every table and index of the initial schema; fails (and the Migrator rolls back) on any SQL error. */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient

  yield* sql`CREATE TABLE agents (
    org_id text NOT NULL,
    id text NOT NULL,
    version integer NOT NULL,
    spec json NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, id, version)
  )`

  yield* sql`CREATE TABLE sessions (
    id text PRIMARY KEY,
    org_id text NOT NULL,
    user_id text NOT NULL,
    scope text NOT NULL,
    agent_id text NOT NULL,
    agent_version integer NOT NULL,
    status text NOT NULL,
    state json NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    CONSTRAINT sessions_org_scope_id_key UNIQUE (org_id, scope, id)
  )`
  // listSessions pages newest first by (created_at, id) in code-unit order.
  yield* sql`CREATE INDEX sessions_org_created_idx ON sessions (org_id, created_at, id COLLATE "C")`
  // Recovery at start scans only the sessions whose burst was in flight.
  yield* sql`CREATE INDEX sessions_running_idx ON sessions (id) WHERE status = 'running'`

  yield* sql`CREATE TABLE session_counters (
    session_id text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    last_seq integer NOT NULL DEFAULT 0
  ) WITH (fillfactor = 50)`

  // No foreign key on turns.session_id, on purpose: a turn is only ever inserted by the statement that bumps its
  // session's counter and joins on it (SqlStore), which already proves the session exists and holds its lock. The
  // RI trigger would repeat that lookup and lock per row, a quarter of an append batch's cost as measured.
  yield* sql`CREATE TABLE turns (
    session_id text NOT NULL,
    seq integer NOT NULL CHECK (seq > 0),
    kind text NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_results', 'notice')),
    payload json NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (session_id, seq)
  )`

  // One row per tool dispatch, keyed by the assistant turn that asked for it (call ids are unique per turn only).
  // Written before a write tool runs, completed after: a row left 'dispatched' after a crash is an unknown outcome.
  yield* sql`CREATE TABLE tool_calls (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_seq integer NOT NULL,
    call_id text NOT NULL,
    run_id text NOT NULL,
    tool text NOT NULL,
    effect text NOT NULL,
    source text NOT NULL,
    status text NOT NULL,
    started_at double precision NOT NULL,
    ended_at double precision,
    PRIMARY KEY (session_id, turn_seq, call_id)
  )`

  // Confirmation tokens are stored hashed; a token is spent once (used_at) and only before it expires.
  yield* sql`CREATE TABLE approvals (
    token_hash text PRIMARY KEY,
    org_id text NOT NULL,
    user_id text NOT NULL,
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    call_id text NOT NULL,
    tool text NOT NULL,
    args_hash text NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    used_at double precision
  )`
  yield* sql`CREATE INDEX approvals_session_idx ON approvals (session_id)`

  yield* sql`CREATE TABLE trajectories (
    run_id text PRIMARY KEY,
    ordinal bigint GENERATED ALWAYS AS IDENTITY,
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    org_id text NOT NULL,
    exit_reason text NOT NULL,
    started_at double precision NOT NULL,
    payload json NOT NULL
  )`
  yield* sql`CREATE INDEX trajectories_session_idx ON trajectories (session_id, ordinal)`

  // Knowledge (the SQL full-text Retriever): the tsvector is derived by the database, so it can never drift.
  yield* sql`CREATE TABLE documents (
    org_id text NOT NULL,
    id text NOT NULL,
    source text NOT NULL,
    title text NOT NULL,
    body text NOT NULL,
    updated_at double precision NOT NULL,
    search tsvector GENERATED ALWAYS AS (
      setweight(to_tsvector('english', title), 'A') || setweight(to_tsvector('english', body), 'B')
    ) STORED,
    PRIMARY KEY (org_id, id)
  )`
  yield* sql`CREATE INDEX documents_search_idx ON documents USING gin (search)`
  yield* sql`CREATE INDEX documents_source_idx ON documents (org_id, source)`

  // A session's inherited artifacts. Both foreign keys share (org_id, scope): the inheriting session and the
  // inherited one must be of the same org and the same scope, or the database refuses the row.
  yield* sql`CREATE TABLE session_artifacts (
    session_id text NOT NULL,
    org_id text NOT NULL,
    scope text NOT NULL,
    inherited_session_id text NOT NULL,
    PRIMARY KEY (session_id, inherited_session_id),
    CONSTRAINT session_artifacts_session_fkey FOREIGN KEY (org_id, scope, session_id)
      REFERENCES sessions (org_id, scope, id) ON DELETE CASCADE,
    CONSTRAINT session_artifacts_inherited_fkey FOREIGN KEY (org_id, scope, inherited_session_id)
      REFERENCES sessions (org_id, scope, id)
  )`
  yield* sql`CREATE INDEX session_artifacts_inherited_idx ON session_artifacts (org_id, scope, inherited_session_id)`
})
