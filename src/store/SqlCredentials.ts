/**
 * SqlCredentials — the `mcp_credentials` table (migration 0005) as a key → value store: what the tools layer's
 * `McpCredentials` port keeps for MCP servers' OAuth, already sealed by it (this module never sees a plain token).
 * Every statement is bounded by the persistence timeout, like every store call: a database that does not answer
 * fails the read or write (the server's connect attempt then fails and is retried), it never hangs a connect.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import { persist, within } from "./internal/failure.js"

/** Values by key; the shape of the tools layer's `McpCredentials` service. */
export interface SqlCredentials {
  readonly load: (key: string) => Effect.Effect<Option.Option<string>, PersistenceFailed>
  readonly save: (key: string, value: string) => Effect.Effect<void, PersistenceFailed>
  /** Deletes the row of `key`; whether there was one. */
  readonly remove: (key: string) => Effect.Effect<boolean, PersistenceFailed>
}

/** The table over the SQL client in context; each statement bounded by `timeoutMs`. */
export const make = (timeoutMs: number): Effect.Effect<SqlCredentials, never, SqlClient.SqlClient> =>
  Effect.map(SqlClient.SqlClient, (sql) => ({
    load: (key) =>
      sql<{ readonly sealed: string }>`SELECT sealed FROM mcp_credentials WHERE key = ${key}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0]?.sealed)),
        persist("mcp_credentials.load"),
        within("mcp_credentials.load", timeoutMs)
      ),
    save: (key, value) =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) =>
          sql`INSERT INTO mcp_credentials (key, sealed, updated_at) VALUES (${key}, ${value}, ${now})
          ON CONFLICT (key) DO UPDATE SET sealed = EXCLUDED.sealed, updated_at = EXCLUDED.updated_at`
      ).pipe(
        Effect.asVoid,
        persist("mcp_credentials.save"),
        within("mcp_credentials.save", timeoutMs)
      ),
    remove: (key) =>
      sql<{ readonly key: string }>`DELETE FROM mcp_credentials WHERE key = ${key} RETURNING key`.pipe(
        Effect.map((rows) => rows.length > 0),
        persist("mcp_credentials.remove"),
        within("mcp_credentials.remove", timeoutMs)
      )
  }))
