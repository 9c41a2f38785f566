/**
 * Migrations: the numbered schema changes under `migrations/`, applied by @effect/sql's Migrator.
 *
 * The loader is a plain record (not a glob) because Corral runs its TypeScript directly under tsx, with no build
 * step that could resolve globs. The Migrator runs every pending migration in one transaction with its bookkeeping
 * table locked, so a second run (or a second process) applies nothing twice. Run at start by `SqlStore.layer` and
 * by `corral migrate`.
 */
import type { SqlClient } from "@effect/sql"
import * as Migrator from "@effect/sql/Migrator"
import { Effect } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import { persist, sqlState } from "./internal/failure.js"
import init from "./migrations/0001_init.js"
import approvals from "./migrations/0002_approvals.js"
import appendFunction from "./migrations/0003_append_function.js"
import inbox from "./migrations/0004_inbox.js"
import mcpCredentials from "./migrations/0005_mcp_credentials.js"
import pairing from "./migrations/0006_pairing.js"
import orgSpend from "./migrations/0007_org_spend.js"

/** The bookkeeping table of applied migrations. */
export const table = "corral_migrations"

/** Every migration, keyed `<number>_<name>`; append new ones, never edit applied ones. */
export const all: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_init": init,
  "0002_approvals": approvals,
  "0003_append_function": appendFunction,
  "0004_inbox": inbox,
  "0005_mcp_credentials": mcpCredentials,
  "0006_pairing": pairing,
  "0007_org_spend": orgSpend
}

const migrate = Migrator.make({})

/** `run` (below) with the migrations of `record`: the embedded snapshot's maker applies a prefix of `all` in tests. */
export const runOf = (
  record: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>>
): Effect.Effect<ReadonlyArray<readonly [id: number, name: string]>, PersistenceFailed, SqlClient.SqlClient> =>
  migrate({ loader: Migrator.fromRecord(record), table }).pipe(
    // Two first runs at once (two processes starting on a fresh database) race to create the bookkeeping table
    // outside the Migrator's transaction; the loser fails with a duplicate (of the table, 42P07; of its row type,
    // 42710; or of the catalog row, 23505, depending on where the two collide). Run again, it finds the table and
    // waits on its lock, then sees the migrations applied.
    Effect.retry({ times: 2, while: (error) => ["42P07", "42710", "23505"].includes(sqlState(error) ?? "") }),
    // A failing migration reaches us as a defect (the Migrator dies with it): `persist` turns every
    // non-interrupt cause into one typed error so nothing of @effect/sql leaks past the store.
    persist("migrate")
  )

/**
 * Applies the pending migrations and returns the ones it applied as `[id, name]` (empty when the schema is
 * current). Fails with `PersistenceFailed` when the database is unreachable or a migration fails (the failed
 * run is rolled back as a whole); interruption is passed through.
 */
export const run: Effect.Effect<
  ReadonlyArray<readonly [id: number, name: string]>,
  PersistenceFailed,
  SqlClient.SqlClient
> = runOf(all)
