/**
 * storeWiring — the store half of server/Wiring: which database the configuration names (Postgres or embedded
 * PGlite), the session store and readiness probe over it (or the memory store), where MCP servers' OAuth state is
 * kept, and the migrations. Split from Wiring.ts to keep that file a readable list of layer builders; Wiring
 * re-exports the public names, so callers import them from there.
 */
import type { SqlClient } from "@effect/sql"
import { Config, ConfigError, Effect, Layer, Option, Redacted, Schema } from "effect"
import type { Settings } from "../../config/Config.js"
import type { PersistenceFailed } from "../../domain/Errors.js"
import * as Limits from "../../rails/Limits.js"
import * as Database from "../../store/Database.js"
import * as Embedded from "../../store/Embedded.js"
import * as MemoryStore from "../../store/MemoryStore.js"
import * as Migrations from "../../store/Migrations.js"
import type { SessionStore } from "../../store/SessionStore.js"
import * as SqlCredentials from "../../store/SqlCredentials.js"
import * as SqlStore from "../../store/SqlStore.js"
import * as McpCredentials from "../../tools/McpCredentials.js"
import * as Readiness from "../Readiness.js"

/** The persistence timeout in force: every store call is bounded by it (`limits.persistTimeoutMs`). */
export const persistTimeoutMs = (settings: Settings): number =>
  settings.limits?.persistTimeoutMs ?? Limits.defaults.persistTimeoutMs

/** The SQL client of the configured database (Postgres or embedded PGlite). */
export const database = (
  settings: Settings
): Layer.Layer<SqlClient.SqlClient, PersistenceFailed> =>
  settings.database._tag === "Postgres"
    ? Database.layerPostgres(settings.database.url, {
      maxConnections: settings.database.maxConnections,
      timeoutMs: persistTimeoutMs(settings)
    })
    : Embedded.layerEmbedded({
      dataDir: settings.database._tag === "Embedded" ? settings.database.dataDir : "memory://",
      timeoutMs: persistTimeoutMs(settings)
    })

/**
 * Where MCP servers' OAuth state is kept on a SQL store: the `mcp_credentials` table, sealed with a key derived from
 * `CORRAL_SECRET_KEY`. Without the key nothing is written there (an unsealed token is never stored): the state is
 * kept in memory, and when a configured server uses OAuth a warning says that each restart signs in again.
 */
const sqlCredentials = (
  settings: Settings
): Layer.Layer<McpCredentials.McpCredentials, ConfigError.ConfigError, SqlClient.SqlClient> =>
  Layer.effect(
    McpCredentials.McpCredentials,
    Effect.gen(function*() {
      const secret = yield* Config.option(Config.redacted("CORRAL_SECRET_KEY"))
      if (Option.isNone(secret)) {
        const oauth = Object.entries(settings.mcpServers).filter(([, s]) => "url" in s && s.auth !== undefined)
        if (oauth.length > 0) {
          yield* Effect.logWarning(
            `CORRAL_SECRET_KEY is not set: the OAuth tokens of MCP server(s) ${
              oauth.map(([name]) => `"${name}"`).join(", ")
            } are kept in memory only (never unsealed in the database), so each restart authorizes again`
          )
        }
        return McpCredentials.makeMemory()
      }
      const key = yield* Effect.try({
        try: () => McpCredentials.keyOf(Redacted.value(secret.value)),
        catch: (error) => ConfigError.InvalidData(["CORRAL_SECRET_KEY"], (error as Error).message)
      })
      const table = yield* SqlCredentials.make(persistTimeoutMs(settings))
      return McpCredentials.sealed(table, key)
    })
  )

/**
 * The store cannot keep MCP credentials for another process (`corral mcp login` / `logout`): the memory store keeps
 * nothing past the process, and without `CORRAL_SECRET_KEY` tokens are never written.
 */
export class CredentialsNotDurable extends Schema.TaggedError<CredentialsNotDurable>()("CredentialsNotDurable", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

const memoryStoreKeepsNothing = new CredentialsNotDurable({
  reason: "the memory store (database.store \"memory\" or CORRAL_STORE=memory) keeps no MCP credentials " +
    "past this process: sign in with the store corral serve uses (embedded PGlite in CORRAL_DATA_DIR, or " +
    "DATABASE_URL)"
})

/**
 * The store's `mcp_credentials`, sealed, for `corral mcp login`: what it saves is what `corral serve` on the same
 * configuration reads. Migrates first (a fresh data directory). Fails with `CredentialsNotDurable` on the memory
 * store and when `CORRAL_SECRET_KEY` is not set (the tokens would otherwise live only as long as the command).
 */
export const durableCredentials = (
  settings: Settings
): Layer.Layer<McpCredentials.McpCredentials, CredentialsNotDurable | PersistenceFailed | ConfigError.ConfigError> =>
  // Checked before the database is opened: a refusal costs nothing and says at once what to set.
  Layer.unwrapEffect(Effect.gen(function*() {
    if (settings.database._tag === "Memory") return yield* memoryStoreKeepsNothing
    const secret = yield* Config.option(Config.redacted("CORRAL_SECRET_KEY"))
    if (Option.isNone(secret)) {
      return yield* new CredentialsNotDurable({
        reason: "CORRAL_SECRET_KEY is not set: the tokens are stored only sealed with it (and corral serve needs " +
          "the same key to read them); set it, e.g. export CORRAL_SECRET_KEY=$(openssl rand -hex 32), for this " +
          "command and for corral serve"
      })
    }
    const key = yield* Effect.try({
      try: () => McpCredentials.keyOf(Redacted.value(secret.value)),
      catch: (error) => ConfigError.InvalidData(["CORRAL_SECRET_KEY"], (error as Error).message)
    })
    return Layer.effect(
      McpCredentials.McpCredentials,
      Effect.zipRight(
        Migrations.run,
        Effect.map(SqlCredentials.make(persistTimeoutMs(settings)), (table) => McpCredentials.sealed(table, key))
      )
    ).pipe(Layer.provide(database(settings)))
  }))

/**
 * Removes the stored MCP credentials of `key` (`corral mcp logout`); whether there were any. Needs no
 * `CORRAL_SECRET_KEY` (nothing is opened). Fails with `CredentialsNotDurable` on the memory store.
 */
export const forgetCredentials = (
  settings: Settings,
  key: string
): Effect.Effect<boolean, CredentialsNotDurable | PersistenceFailed> =>
  settings.database._tag === "Memory"
    ? Effect.fail(memoryStoreKeepsNothing)
    : Effect.gen(function*() {
      yield* Migrations.run
      const table = yield* SqlCredentials.make(persistTimeoutMs(settings))
      return yield* table.remove(key)
    }).pipe(Effect.provide(database(settings)))

/**
 * The store, its readiness probe and where MCP servers' OAuth state is kept (in memory for the memory store). SQL
 * stores migrate on start (idempotent).
 */
export const store = (
  settings: Settings,
  notify?: SqlStore.Options["notify"]
): Layer.Layer<
  SessionStore | Readiness.Readiness | McpCredentials.McpCredentials,
  PersistenceFailed | ConfigError.ConfigError
> =>
  settings.database._tag === "Memory"
    ? Layer.mergeAll(MemoryStore.layerMemory, Readiness.layerMemory, McpCredentials.layerMemory)
    : Layer.mergeAll(
      SqlStore.layer({ timeoutMs: persistTimeoutMs(settings), ...(notify === undefined ? {} : { notify }) }),
      Readiness.layerSql,
      sqlCredentials(settings)
    ).pipe(Layer.provide(database(settings)))

/** Applies pending migrations; `None` for the memory store, which has none. */
export const migrate = (
  settings: Settings
): Effect.Effect<Option.Option<ReadonlyArray<readonly [number, string]>>, PersistenceFailed> =>
  settings.database._tag === "Memory"
    ? Effect.succeed(Option.none())
    : Effect.map(Effect.provide(Migrations.run, database(settings)), Option.some)
