/**
 * Database — which Postgres Corral talks to. `DATABASE_URL` set: that server, through a pooled @effect/sql-pg
 * client. Unset: the embedded PGlite under `CORRAL_DATA_DIR`. Either way the rest of Corral sees one `SqlClient`
 * of the pg dialect, so every query and migration runs on both.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Config, Duration, Effect, Layer, Option } from "effect"
import type { ConfigError, Redacted } from "effect"
import { PersistenceFailed } from "../domain/Errors.js"
import * as Embedded from "./Embedded.js"
import { describe } from "./internal/failure.js"

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
}

/**
 * A pooled `PgClient` (also provided as `SqlClient`) on the server at `url`. A dead server fails the layer at once
 * (it runs `SELECT 1` when built) with `PersistenceFailed`; a connection attempt gives up after 5 s, so an outage
 * fails statements instead of hanging them, and broken connections are replaced by the pool on next use.
 */
export const layerPostgres = (
  url: Redacted.Redacted,
  options: PostgresOptions = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PersistenceFailed> =>
  PgClient.layer({
    url,
    maxConnections: options.maxConnections ?? 10,
    connectTimeout: Duration.seconds(5),
    idleTimeout: Duration.seconds(30),
    applicationName: "corral"
  }).pipe(Layer.mapError((error) => new PersistenceFailed({ operation: "connect", message: describe(error) })))

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
