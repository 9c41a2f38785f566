/**
 * EmbeddedSnapshot — makes the embedded database's snapshot: a new PGlite data directory (initdb), migrated, closed
 * cleanly, packed as a compressed tarball with its manifest (internal/pgSnapshot.ts). `npm run build` writes the package's
 * one to `dist/store/pgdata.tar.br` (scripts/build-pgdata.mjs); a new data directory then starts from it instead of
 * running initdb (Embedded.ts). Refuses to write a snapshot of a directory that did not shut down cleanly (its
 * control file says so), which would make every first start replay WAL.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { PersistenceFailed } from "../domain/Errors.js"
import * as Embedded from "./Embedded.js"
import * as PgSnapshot from "./internal/pgSnapshot.js"
import * as Migrations from "./Migrations.js"

/** What to put in the snapshot. */
export interface Options {
  /** The migrations to apply (default: every migration of the code, `Migrations.all`). */
  readonly migrations?: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>
  /** The most opening the new database (initdb) may take (default 3 min). */
  readonly openTimeoutMs?: number
}

/** `DBState` in Postgres's control file (`global/pg_control`, after two 8- and two 4-byte fields): shut down. */
const shutDownCleanly = async (pgdata: string): Promise<boolean> => {
  const control = await readFile(join(pgdata, "global", "pg_control"))
  return control.readUInt32LE(16) === 1
}

const failed = (message: string) => new PersistenceFailed({ operation: "snapshot", message })

/**
 * Writes the snapshot to `file` (through a temporary file renamed into place) and returns its manifest. Fails with
 * `PersistenceFailed` when the database cannot be created or migrated, did not close cleanly, or the file cannot be
 * written.
 */
export const make = (file: string, options: Options = {}): Effect.Effect<PgSnapshot.Manifest, PersistenceFailed> =>
  Effect.acquireUseRelease(
    Effect.tryPromise({
      try: () => mkdtemp(join(tmpdir(), "corral-pgdata-")),
      catch: (cause) => failed(`could not create a temporary directory: ${String(cause)}`)
    }),
    (dataDir) =>
      Effect.gen(function*() {
        const migrations = options.migrations ?? Migrations.all
        yield* Migrations.runOf(migrations).pipe(
          Effect.provide(
            Embedded.layerEmbedded({
              dataDir,
              snapshot: false,
              ...(options.openTimeoutMs === undefined ? {} : { openTimeoutMs: options.openTimeoutMs })
            })
          )
        )
        const pgdata = join(dataDir, "pgdata")
        if (!(yield* Effect.promise(() => shutDownCleanly(pgdata)))) {
          return yield* failed("the database did not shut down cleanly: no snapshot written")
        }
        const manifest: PgSnapshot.Manifest = {
          format: 1,
          pglite: PgSnapshot.installedPglite(),
          migrations: Object.keys(migrations)
        }
        yield* Effect.tryPromise({
          try: async () => {
            const packed = await PgSnapshot.pack(pgdata, manifest)
            const partial = join(dirname(file), `.${process.pid}.${Date.now()}.partial`)
            await writeFile(partial, packed)
            await rename(partial, file)
          },
          catch: (cause) => failed(`could not write ${file}: ${String(cause)}`)
        })
        return manifest
      }),
    (dataDir) => Effect.promise(() => rm(dataDir, { recursive: true, force: true }))
  )
