/**
 * Embedded — real Postgres with no server to run: PGlite (Postgres compiled to WASM; the optional peer
 * `@electric-sql/pglite`, needed only for a data directory) in a worker thread of the process, reached through the SAME @effect/sql-pg client the server path uses.
 *
 * PGlite runs in a `worker_threads` worker (internal/pgliteWorker.ts), never in the server's thread: a statement there
 * held the event loop for as long as it ran, so under a burst of 2,000 session starts `/healthz` did not answer
 * within 5 s and SIGTERM took 17–50 s to exit (issue 42). node-postgres speaks the wire protocol to it over a
 * socket-like stream whose bytes cross to the worker and back (internal/pgliteHost.ts), so statement compilation,
 * transactions and row parsing are node-postgres's own, exactly as on a Postgres server. @effect/sql-pg gets a `pg`
 * pool of exactly ONE such client. That single client is the serialisation point: PGlite is one backend, so every
 * statement and every transaction must take turns. node-postgres's pool already guarantees it: a transaction reserves
 * the client until COMMIT/ROLLBACK and every other fiber's statement waits in the pool's queue (never interleaved
 * into the transaction). docs/storage.md records the decision.
 *
 * Bounds: opening waits at most `openTimeoutMs` (default 3 min: a new directory without a snapshot runs initdb, which
 * took over 60 s on the loaded 2-core CI machine), each round trip to the worker at most the persistence timeout
 * (`timeoutMs`, default 10 s), closing at most 1.5 s before the worker is terminated; a worker that dies fails every
 * statement at once and is restarted on the same directory (bounded; a warning is logged; internal/pgliteHost.ts).
 *
 * Memory: PGlite keeps Postgres's shared buffers inside its WASM heap, all resident, and its default is Postgres's
 * own 128 MB; Corral's working set (recent turns, the session rows) is a few MB, so 32 MB is plenty. Durability is
 * untouched (WAL and fsync as before).
 *
 * A new directory: unpacked from the snapshot shipped with the package (a data directory initialised and migrated at
 * build time; internal/pgSnapshot.ts, a log line says so) when it fits the code, instead of running initdb, which took
 * 26 of the 27 s of a new directory's open on the loaded CI machine. Without one, initdb runs in a worker of its own
 * that exits before the database is opened for use: its WASM instance kept hundreds of MB alive after it was closed
 * (internal/pgliteHost.ts; docs/benchmarks.md, issue 42).
 *
 * Limits that follow from one backend: cancelling a running statement is impossible (one that outlives its timeout
 * runs to its end in the worker, and the next one waits behind it, each with its own bound), and one data directory
 * belongs to one process at a time: opening a directory takes its lock file first (internal/dataDirLock.ts), so a
 * second process is refused instead of corrupting it, and a lock left by a killed process is taken over.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqlError } from "@effect/sql/SqlError"
import { Duration, Effect, Layer, Runtime } from "effect"
import { mkdir } from "node:fs/promises"
import { join } from "node:path"
import { Pool } from "pg"
import { PersistenceFailed } from "../domain/Errors.js"
import * as OptionalPeers from "../internal/optionalPeers.js"
import * as DataDirLock from "./internal/dataDirLock.js"
import { describe } from "./internal/failure.js"
import * as PgliteHost from "./internal/pgliteHost.js"
import * as Migrations from "./Migrations.js"

/** The data directory value that keeps the database in memory (gone when the layer is released). */
export const inMemory = "memory://"

/** Where the embedded database lives. */
export interface Options {
  /**
   * A directory (created if missing; Postgres's files go under `<dataDir>/pgdata`), or `memory://` for a
   * database that lives and dies with the layer. Default: in memory.
   */
  readonly dataDir?: string
  /** The persistence timeout (default 10 s): the most one statement's round trip to the database may take. */
  readonly timeoutMs?: number
  /** The most opening the database may take (default 3 min; a new directory without a snapshot runs initdb first). */
  readonly openTimeoutMs?: number
  /**
   * What a NEW data directory starts from: a snapshot file (a data directory initialised and migrated at build
   * time, `dist/store/pgdata.tar.br`, made by scripts/build-pgdata.mjs), or `false` to run initdb instead. Default:
   * the snapshot shipped with the package, when there is one (initdb otherwise, with a log line saying why). An
   * existing directory is opened as it is.
   */
  readonly snapshot?: string | false
}

const opening = (dataDir: string) => (cause: unknown) =>
  new SqlError({ cause, message: `could not open the embedded database in ${dataDir}` })

/** Postgres settings for the embedded backend (see the header). */
const postgresqlconf = ["shared_buffers=32MB"]

/** How long closing may take before the worker is terminated (well inside the shutdown's 2 s margin). */
const closeTimeoutMs = 1_500

/** Starts the worker with the database open, in memory or under `dataDir` (locked first; see the header). */
const open = (dataDir: string, options: Options) =>
  Effect.gen(function*() {
    // PGlite is an optional peer (a Postgres-only program never installs it): say so before the worker fails on it.
    const missing = OptionalPeers.check("the embedded database")
    if (missing !== undefined) return yield* new SqlError({ cause: missing, message: missing.message })
    if (dataDir !== inMemory) {
      yield* Effect.tryPromise({ try: () => mkdir(dataDir, { recursive: true }), catch: opening(dataDir) })
      // Released after the worker has closed the database (finalizers run in reverse). The refusal keeps its message.
      yield* Effect.acquireRelease(
        DataDirLock.acquire(dataDir).pipe(Effect.mapError((cause) => new SqlError({ cause, message: cause.message }))),
        (release) => release
      )
    }
    const bounds = {
      openTimeoutMs: Math.max(1, Math.floor(options.openTimeoutMs ?? 180_000)),
      timeoutMs: Math.max(1, Math.floor(options.timeoutMs ?? 10_000)),
      closeTimeoutMs
    }
    const started = Date.now()
    const { host, prepared } = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          PgliteHost.Host.start(
            { path: dataDir === inMemory ? undefined : join(dataDir, "pgdata"), postgresqlconf },
            bounds,
            { file: options.snapshot, migrations: Object.keys(Migrations.all) }
          ),
        catch: opening(dataDir)
      }),
      ({ host }) => Effect.promise(() => host.close())
    )
    const runtime = yield* Effect.runtime<never>()
    host.onEvent = (line) => void Runtime.runFork(runtime)(Effect.logWarning(line))
    const took = Date.now() - started
    switch (prepared._tag) {
      case "snapshot": {
        const level = prepared.manifest.migrations.at(-1) ?? "none"
        yield* Effect.logInfo(
          `embedded database: a new data directory ${dataDir}, created from the snapshot ${prepared.file} ` +
            `(migrations up to ${level}; unpacked in ${prepared.ms} ms, open in ${took} ms)`
        )
        break
      }
      case "initdb":
        yield* Effect.logInfo(
          `embedded database: a new data directory ${dataDir}, created by initdb (open in ${took} ms): ` +
            prepared.reason
        )
        break
      case "existing":
        break
    }
    return host
  })

/**
 * A `PgClient` (also provided as `SqlClient`) over an embedded PGlite in a worker thread. Fails with
 * `PersistenceFailed` when the data directory cannot be created or opened (or not within `openTimeoutMs`), or is in
 * use by another live process (the message names the directory and the holder's pid); a statement the worker does not
 * answer within `timeoutMs`, or one in flight when the worker died or sent before its restart has the directory open
 * again, fails with `SqlError`. Releasing the layer closes the
 * database (at most 1.5 s, then the worker is terminated: a statement in flight fails), then the pool (at most
 * 1 s), then releases the directory's lock.
 */
export const layerEmbedded = (
  options: Options = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PersistenceFailed> =>
  PgClient.layerFromPool({
    acquire: Effect.gen(function*() {
      const host = yield* open(options.dataDir ?? inMemory, options)
      return yield* Effect.acquireRelease(
        Effect.sync(() => {
          // max 1 is the whole concurrency story (see header); no idle timeout, so the one client stays open.
          const pool = new Pool({
            user: "postgres",
            database: "postgres",
            stream: () => new PgliteHost.Socket(host),
            max: 1,
            idleTimeoutMillis: 0
          })
          pool.on("error", () => {})
          return pool
        }),
        // The database closes first: a statement still running in the worker (PGlite cannot cancel it) would keep
        // its client checked out and `end` waiting; closed, it fails at once. `end` stays bounded all the same.
        (pool) =>
          Effect.promise(() => host.close()).pipe(
            Effect.zipRight(
              Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(Duration.seconds(1)))
            )
          )
      )
    }),
    applicationName: "corral-embedded"
  }).pipe(
    Layer.mapError((error) => new PersistenceFailed({ operation: "openEmbedded", message: describe(error) }))
  )
