/**
 * Embedded — real Postgres with nothing installed: PGlite (Postgres compiled to WASM) inside the process, reached
 * through the SAME @effect/sql-pg client the server path uses.
 *
 * PGlite ships a node-postgres connection adapter (`@electric-sql/pglite/node-postgres`): node-postgres speaks
 * the wire protocol to PGlite in memory, with no socket. We give @effect/sql-pg a `pg` pool of exactly ONE such
 * client. That single client is the serialisation point: PGlite is one backend, so every statement and every
 * transaction must take turns. node-postgres's pool already guarantees it: a transaction reserves the client
 * until COMMIT/ROLLBACK and every other fiber's statement waits in the pool's queue (never interleaved into the
 * transaction). Result parsing is node-postgres's own, so rows decode identically on both drivers.
 * docs/storage.md records why this beats a hand-written PGlite SqlClient and the pglite-socket server.
 *
 * Memory: PGlite keeps Postgres's shared buffers inside its WASM heap, all resident, and its default is Postgres's
 * own 128 MB; Corral's working set (recent turns, the session rows) is a few MB, so 32 MB is plenty and takes the idle
 * process from ~480 to ~330 MB. Durability is untouched (WAL and fsync as before). The first open of a new directory
 * runs initdb, whose WASM instance keeps ~450 MB of memory alive for as long as that database object lives: a new
 * directory is therefore initialised, closed and opened again, once.
 *
 * Limits that follow from one backend: cancelling a running statement is impossible (an interrupted query runs to
 * its end before the next one starts), and one data directory belongs to one process at a time: opening a
 * directory takes its lock file first (internal/dataDirLock.ts), so a second process is refused instead of
 * corrupting it, and a lock left by a killed process is taken over.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqlError } from "@effect/sql/SqlError"
import { PGlite } from "@electric-sql/pglite"
import { createPgConfig } from "@electric-sql/pglite/node-postgres"
import { Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import { mkdir } from "node:fs/promises"
import { join } from "node:path"
import { Pool } from "pg"
import { PersistenceFailed } from "../domain/Errors.js"
import * as DataDirLock from "./internal/dataDirLock.js"
import { describe } from "./internal/failure.js"

/** The data directory value that keeps the database in memory (gone when the layer is released). */
export const inMemory = "memory://"

/** Where the embedded database lives. */
export interface Options {
  /**
   * A directory (created if missing; Postgres's files go under `<dataDir>/pgdata`), or `memory://` for a
   * database that lives and dies with the layer. Default: in memory.
   */
  readonly dataDir?: string
}

const opening = (dataDir: string) => (cause: unknown) =>
  new SqlError({ cause, message: `could not open the embedded database in ${dataDir}` })

/** Postgres settings for the embedded backend (see the header). */
const settings = { postgresqlconf: ["shared_buffers=32MB"] }

/** Opens the database, in memory or under `dataDir` (created if missing, locked first; see the header). */
const open = (dataDir: string) =>
  dataDir === inMemory
    ? Effect.tryPromise({ try: () => PGlite.create(inMemory, settings), catch: opening(dataDir) })
    : Effect.gen(function*() {
      const path = join(dataDir, "pgdata")
      yield* Effect.tryPromise({ try: () => mkdir(path, { recursive: true }), catch: opening(dataDir) })
      // Released after the database is closed (finalizers run in reverse). The refusal keeps its own message.
      yield* Effect.acquireRelease(
        DataDirLock.acquire(dataDir).pipe(Effect.mapError((cause) => new SqlError({ cause, message: cause.message }))),
        (release) => release
      )
      const fresh = !existsSync(join(path, "PG_VERSION"))
      return yield* Effect.tryPromise({
        try: async () => {
          if (fresh) await (await PGlite.create(path, settings)).close()
          return await PGlite.create(path, settings)
        },
        catch: opening(dataDir)
      })
    })

/**
 * A `PgClient` (also provided as `SqlClient`) over an embedded PGlite. Fails with `PersistenceFailed` when the
 * data directory cannot be created or opened, or is in use by another live process (the message names the
 * directory and the holder's pid); closes the pool, then the database, then releases the directory's lock when the
 * layer is released.
 */
export const layerEmbedded = (
  options: Options = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PersistenceFailed> =>
  PgClient.layerFromPool({
    acquire: Effect.gen(function*() {
      const pglite = yield* Effect.acquireRelease(open(options.dataDir ?? inMemory), (db) =>
        Effect.promise(() => db.close()).pipe(Effect.ignore))
      return yield* Effect.acquireRelease(
        Effect.sync(() => {
          // max 1 is the whole concurrency story (see header); no idle timeout, so the one client stays open.
          const pool = new Pool({ ...createPgConfig(pglite), max: 1, idleTimeoutMillis: 0 })
          pool.on("error", () => {})
          return pool
        }),
        (pool) =>
          Effect.promise(() => pool.end()).pipe(Effect.ignore)
      )
    }),
    applicationName: "corral-embedded"
  }).pipe(
    Layer.mapError((error) => new PersistenceFailed({ operation: "openEmbedded", message: describe(error) }))
  )
