/**
 * `corral/sql` — durable sessions for an embedded Corral: the SQL `SessionStore` on Postgres (`{ url }`) or on the
 * embedded PGlite (`{ dataDir }`), migrated on start exactly as `corral serve` does.
 *
 * Without this entry the only store an embedder could reach was the memory one, so a host that restarted lost
 * every session. `schema` keeps Corral's tables (`agents`, `sessions`, `turns`, `documents`…, generic names) out
 * of the host's own: every pooled connection starts with `search_path` set to that schema (a startup option, so no
 * statement ever runs with another), the schema is created if missing, then migrated. The table names in the
 * migrations and queries are unqualified, so each schema is a complete, separate Corral database.
 */
import { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { FieldIssue, InvalidRequest, PersistenceFailed } from "./domain/Errors.js"
import * as Database from "./store/Database.js"
import * as Embedded from "./store/Embedded.js"
import { describe, sqlState } from "./store/internal/failure.js"
import * as Migrations from "./store/Migrations.js"
import type { SessionStore } from "./store/SessionStore.js"
import * as SqlStore from "./store/SqlStore.js"

/** The SQL pieces `layerSql` is made of, for hosts that compose them themselves. */
export * as Database from "./store/Database.js"
/** The embedded PGlite database: `layerEmbedded({ dataDir })`, `inMemory`. */
export * as Embedded from "./store/Embedded.js"
/** The SQL store over a `SqlClient` in context: `layer(options)` (migrates first), `layerConfig` (from the env). */
export * as SqlStore from "./store/SqlStore.js"

/** A Postgres server. */
export interface PostgresOptions {
  /** The connection URL (`postgres://user:pass@host:5432/db`); a plain string is wrapped in `Redacted`. */
  readonly url: string | Redacted.Redacted
  /**
   * The Postgres schema that holds every Corral table (created if missing). Default: the server's `search_path`
   * (usually `public`). A lowercase identifier: letters, digits and `_`, at most 63 characters, not `pg_…`.
   */
  readonly schema?: string
  /** Size of the connection pool (default 10). */
  readonly maxConnections?: number
  /** The persistence timeout in ms (default 10 000; see `limits.persistTimeoutMs`). */
  readonly timeoutMs?: number
}

/** The embedded PGlite database: a directory (created if missing, one process at a time), or `memory://`. */
export interface EmbeddedOptions {
  readonly dataDir: string
  /** The persistence timeout in ms (default 10 000). */
  readonly timeoutMs?: number
}

/** Where `layerSql` keeps sessions. */
export type SqlOptions = PostgresOptions | EmbeddedOptions

const schemaName = /^[a-z_][a-z0-9_]{0,62}$/

/** Whether `name` is accepted as `schema`: a lowercase identifier that Postgres takes unquoted, not `pg_…`. */
export const isSchemaName = (name: string): boolean => schemaName.test(name) && !name.startsWith("pg_")

/**
 * Creates `schema` if missing. Two processes starting at once on a fresh database can both miss it and race on
 * the catalog (23505, or 42P06 "already exists"): the loser runs again and finds it.
 */
const ensureSchema = (schema: string): Effect.Effect<void, PersistenceFailed, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE SCHEMA IF NOT EXISTS ${sql(schema)}`).pipe(
    Effect.retry({ times: 2, while: (error) => ["23505", "42P06"].includes(sqlState(error) ?? "") }),
    Effect.mapError((error) => new PersistenceFailed({ operation: "createSchema", message: describe(error) })),
    Effect.asVoid
  )

const invalidSchema = (schema: string) =>
  new InvalidRequest({
    message: `invalid schema name "${schema}"`,
    issues: [
      new FieldIssue({
        path: "schema",
        message: "a lowercase identifier: letters, digits and '_', at most 63 characters, not starting with pg_"
      })
    ]
  })

/**
 * The database of `options` as a `SqlClient` (and `PgClient`), with `schema` (when given) created and on every
 * connection's `search_path`; nothing migrated. Fails like `layerSql`.
 */
export const layerDatabase = (
  options: SqlOptions
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PersistenceFailed | InvalidRequest> => {
  if (!("url" in options)) {
    return Embedded.layerEmbedded({
      dataDir: options.dataDir,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs })
    })
  }
  const schema = options.schema
  if (schema !== undefined && !isSchemaName(schema)) return Layer.fail(invalidSchema(schema))
  const database = Database.layerPostgres(
    typeof options.url === "string" ? Redacted.make(options.url) : options.url,
    {
      ...(options.maxConnections === undefined ? {} : { maxConnections: options.maxConnections }),
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      ...(schema === undefined ? {} : { searchPath: schema })
    }
  )
  // The schema must exist before the first statement that creates or reads a table in it (the migrations).
  return schema === undefined ?
    database :
    Layer.tap(database, (context) => Effect.provide(ensureSchema(schema), context))
}

/**
 * The SQL `SessionStore` (and its `SqlClient`, for the SQL knowledge retriever) on Postgres or the embedded
 * database, migrated first (idempotent; concurrent starts apply nothing twice). With `schema`, every table lives
 * in that Postgres schema. Fails with `InvalidRequest` for a `schema` that is not a plain lowercase identifier, and
 * with `PersistenceFailed` when the database cannot be reached or opened, the schema cannot be created, or a
 * migration fails.
 */
export const layerSql = (
  options: SqlOptions
): Layer.Layer<SessionStore | SqlClient.SqlClient, PersistenceFailed | InvalidRequest> =>
  SqlStore.layer(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }).pipe(
    Layer.provideMerge(layerDatabase(options))
  )

/**
 * Applies the pending migrations on the database of `options` (what `layerSql` does on start, without starting a
 * store; `corral migrate` for an embedder) and returns the ones applied as `[id, name]`, empty when the schema is
 * current. Fails like `layerSql`.
 */
export const migrate = (
  options: SqlOptions
): Effect.Effect<ReadonlyArray<readonly [id: number, name: string]>, PersistenceFailed | InvalidRequest> =>
  Effect.provide(Migrations.run, layerDatabase(options))
