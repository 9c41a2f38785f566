/**
 * Database — which Postgres Corral talks to. `DATABASE_URL` set: that server, through a pooled @effect/sql-pg
 * client. Unset: the embedded PGlite under `CORRAL_DATA_DIR`. Either way the rest of Corral sees one `SqlClient`
 * of the pg dialect, so every query and migration runs on both.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqlError } from "@effect/sql/SqlError"
import { Config, Duration, Effect, Layer, Option, Redacted } from "effect"
import type { ConfigError } from "effect"
import * as Pg from "pg"
import { PersistenceFailed } from "../domain/Errors.js"
import * as Embedded from "./Embedded.js"
import { describe } from "./internal/failure.js"
import * as Overload from "./internal/overload.js"

/** The database settings, from the environment (or any `ConfigProvider`). */
export const config = Config.all({
  url: Config.option(
    Config.redacted("DATABASE_URL").pipe(
      Config.withDescription("Postgres connection URL; when unset Corral runs an embedded PGlite database")
    )
  ),
  dataDir: Config.string("CORRAL_DATA_DIR").pipe(
    Config.withDefault("./.corral"),
    Config.withDescription("Directory of the embedded database (used only without DATABASE_URL)")
  ),
  maxConnections: Config.integer("CORRAL_DB_MAX_CONNECTIONS").pipe(
    Config.withDefault(10),
    Config.withDescription("Size of the Postgres connection pool (used only with DATABASE_URL)")
  )
})

/** Pool settings for a Postgres server. */
export interface PostgresOptions {
  readonly maxConnections?: number
  /**
   * The persistence timeout (default 10 s, `limits.persistTimeoutMs`): the most a statement may take; waiting for a
   * pooled connection may take six times that (overload: store/internal/overload.ts). See `layerPostgres`.
   */
  readonly timeoutMs?: number
  /**
   * Sets `search_path` on every pooled connection (a startup option, so no connection ever runs with another), and
   * with it where every unqualified table name resolves. Must be a plain lowercase identifier, already validated by
   * the caller (`corral/sql` checks it); the schema itself must exist before anything is created in it.
   */
  readonly searchPath?: string
}

/** The default persistence timeout (`limits.persistTimeoutMs`' seed default). */
export const defaultTimeoutMs = 10_000

/** How long opening a connection may take. */
const connectTimeoutMs = 5_000

/**
 * A node-postgres client that gives up its connection when one of its statements times out (`query_timeout`).
 * node-postgres fails the caller but keeps the connection, the statement still in flight on it: the pool would hand
 * it to the next caller, whose statement queues behind the hung one on a socket that may never answer again (a
 * partition). Marked unusable here, the pool discards it on release instead, and destroying the socket ends it
 * now rather than when TCP notices.
 */
class DiscardOnTimeout extends Pg.Client {
  // The pool's `connectionTimeoutMillis` bounds waiting for a pooled connection (overload: the overload ceiling);
  // opening one keeps its own, shorter bound (an unreachable server is an outage, noticed within 5 s).
  constructor(config: Pg.PoolConfig) {
    super({
      ...config,
      connectionTimeoutMillis: Math.min(connectTimeoutMs, config.connectionTimeoutMillis ?? Infinity)
    })
  }

  override query(...args: Array<unknown>): unknown {
    const last = args.length - 1
    const callback = args[last]
    if (typeof callback === "function") {
      args[last] = (error: unknown, result: unknown) => {
        if (error instanceof Error && error.message === "Query read timeout") {
          // node-postgres's own flag, the one its pool reads on release (pg-pool `_release`).
          Reflect.set(this, "_queryable", false)
          this.connection.stream.destroy()
        }
        callback(error, result)
      }
    }
    return super.query(...args)
  }
}

const failed = (cause: unknown, message: string) => new SqlError({ cause, message })

/**
 * A pooled `PgClient` (also provided as `SqlClient`) on the server at `url`. A dead server fails the layer at once
 * (it runs `SELECT 1` when built) with `PersistenceFailed`. Every wait is bounded, so an outage or a partition fails
 * statements instead of hanging them: opening a connection gives up after 5 s, waiting for a pooled one after six
 * persistence timeouts (a spike of work is overload, not an outage: store/internal/overload.ts), and a statement
 * after the persistence timeout, on the client (the socket may
 * be silent) and on the server (`statement_timeout`: it stops working for a caller that left). A connection whose
 * statement timed out is discarded, never reused; broken connections are replaced by the pool on next use.
 */
export const layerPostgres = (
  url: Redacted.Redacted,
  options: PostgresOptions = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PersistenceFailed> => {
  const timeoutMs = Math.max(1, Math.floor(options.timeoutMs ?? defaultTimeoutMs))
  return PgClient.layerFromPool({
    acquire: Effect.acquireRelease(
      Effect.suspend(() => {
        const pool = new Pg.Pool({
          connectionString: Redacted.value(url),
          max: options.maxConnections ?? 10,
          // Waiting for a connection is waiting behind this process's own statements: overload, bounded by the
          // overload ceiling; the store's operations fail sooner when the database goes quiet (internal/overload.ts).
          connectionTimeoutMillis: Overload.ceilingMs(timeoutMs),
          idleTimeoutMillis: 30_000,
          query_timeout: timeoutMs,
          statement_timeout: timeoutMs,
          // Notices a peer that vanished while the connection idles (a real partition; on loopback the kernel
          // answers the probes, so tests rely on the timeouts above).
          keepAlive: true,
          keepAliveInitialDelayMillis: 10_000,
          application_name: "corral",
          ...(options.searchPath === undefined ? {} : { options: `-c search_path=${options.searchPath}` }),
          Client: DiscardOnTimeout
        })
        pool.on("error", () => {})
        return Effect.tryPromise({
          try: () => pool.query("SELECT 1"),
          catch: (cause) => failed(cause, "could not connect")
        })
          .pipe(
            Effect.timeoutFail({
              duration: Duration.millis(connectTimeoutMs),
              onTimeout: () => failed(new Error(`no answer within ${connectTimeoutMs} ms`), "could not connect")
            }),
            Effect.tapError(() => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption(1_000))),
            Effect.as(pool)
          )
      }),
      // A connection still held by a hung statement would keep `end` waiting: bounded, like the statements.
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1_000))
    ),
    applicationName: "corral"
  }).pipe(Layer.mapError((error) => new PersistenceFailed({ operation: "connect", message: describe(error) })))
}

/**
 * The database from configuration: Postgres when `DATABASE_URL` is set, else the embedded PGlite in
 * `CORRAL_DATA_DIR` (default `./.corral`). Fails with `ConfigError` for malformed settings and `PersistenceFailed`
 * when the database cannot be reached or opened.
 */
export const layer: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PersistenceFailed | ConfigError.ConfigError> =
  Layer.unwrapEffect(
    Effect.map(config, ({ dataDir, maxConnections, url }) =>
      Option.match(url, {
        onNone: () => Embedded.layerEmbedded({ dataDir }),
        onSome: (url) => layerPostgres(url, { maxConnections })
      }))
  )
