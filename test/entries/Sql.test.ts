/**
 * `corral/sql` from an embedder's side: `layerSql` keeps sessions across a restart (embedded database in a temp
 * dir) and, with `schema`, keeps each Corral's tables in its own Postgres schema (when CORRAL_TEST_DATABASE_URL is
 * set), two of them in one database holding separate data.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Corral } from "../../src/Corral.js"
import { LiveEvents, Principal, ToolRegistry } from "../../src/index.js"
import * as Scripted from "../../src/model/Scripted.js"
import { defaultTier, Providers } from "../../src/providers.js"
import { isSchemaName, layerSql, migrate } from "../../src/sql.js"
import type { SqlOptions } from "../../src/sql.js"
import * as Database from "../../src/store/Database.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"

const me = new Principal({ orgId: "acme", userId: "ops" })

const runtime = (options: SqlOptions) =>
  Corral.layer().pipe(
    Layer.provide(Layer.mergeAll(
      Providers.layer({ [defaultTier]: [Scripted.make({ script: [Scripted.text("The database is down.")] })] }),
      LiveEvents.layer,
      ToolRegistry.layer([])
    )),
    Layer.provideMerge(layerSql(options))
  )

const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: []
}

/** Publishes the agent and runs one session; the landed view. */
const runOne = Effect.gen(function*() {
  const corral = yield* Corral
  yield* corral.publishAgent(me, agent)
  return yield* corral.run(me, { agentId: "triage", scope: "incident:INC-42", prompt: "Why is checkout down?" })
})

describe("corral/sql", () => {
  it.scopedLive(
    "layerSql({ dataDir }) keeps a session across a restart of the embedded database",
    () =>
      Effect.gen(function*() {
        const dataDir = mkdtempSync(join(tmpdir(), "corral-sql-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true })))
        const first = yield* runOne.pipe(Effect.provide(runtime({ dataDir })))
        expect(first.exitReason).toBe("completed")
        // A new runtime on the same directory: the layer above is released, its lock with it.
        const again = yield* Effect.flatMap(Corral, (corral) => corral.get(me, first.id)).pipe(
          Effect.provide(runtime({ dataDir }))
        )
        expect(again.exitReason).toBe("completed")
        expect(again.id).toBe(first.id)
        // Migrated already: nothing left to apply.
        expect(yield* migrate({ dataDir })).toEqual([])
      }),
    120_000
  ) // creating a PGlite data directory takes ~30 s on a loaded 2-core machine

  it.effect("refuses a schema name that is not a plain lowercase identifier, before connecting", () =>
    Effect.gen(function*() {
      expect(isSchemaName("corral_a1")).toBe(true)
      for (const bad of ["Corral", "a;drop", "pg_corral", "x".repeat(64), "1abc", ""]) {
        expect(isSchemaName(bad)).toBe(false)
      }
      const exit = yield* Effect.exit(
        Layer.build(layerSql({ url: "postgres://nobody@127.0.0.1:1/none", schema: "a b" }))
      )
      expect(Exit.isFailure(exit) && JSON.stringify(exit.cause)).toContain("InvalidRequest")
    }).pipe(Effect.scoped))
})

describe.skipIf(testDatabaseUrl === undefined)(
  `corral/sql on Postgres (${testDatabaseUrl === undefined ? skipReason : "a fresh database"})`,
  () => {
    it.scopedLive(
      "schema puts every table in its own schema: two Corrals in one database hold separate data",
      () =>
        Effect.gen(function*() {
          const adminUrl = testDatabaseUrl!
          const admin = Context.get(
            yield* Layer.build(Database.layerPostgres(Redacted.make(adminUrl), { maxConnections: 1 })),
            SqlClient.SqlClient
          )
          const name = `corral_test_${randomUUID().replaceAll("-", "").slice(0, 16)}`
          yield* admin`CREATE DATABASE ${admin(name)}`
          yield* Effect.addFinalizer(() =>
            admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`.pipe(Effect.ignore)
          )
          const url = new URL(adminUrl)
          url.pathname = `/${name}`

          const inA = yield* runOne.pipe(Effect.provide(runtime({ url: url.toString(), schema: "corral_a" })))
          expect(inA.exitReason).toBe("completed")

          // Schema B: migrated on its own, sees neither the agent nor the session of A.
          const b = yield* Effect.gen(function*() {
            const corral = yield* Corral
            const agents = yield* corral.listAgents(me)
            const missing = yield* Effect.flip(corral.get(me, inA.id))
            return { agents: agents.length, missing: missing._tag }
          }).pipe(Effect.provide(runtime({ url: url.toString(), schema: "corral_b" })))
          expect(b).toEqual({ agents: 0, missing: "SessionNotFound" })

          // A again (a restart): its data is still there.
          const againA = yield* Effect.flatMap(Corral, (corral) => corral.get(me, inA.id)).pipe(
            Effect.provide(runtime({ url: url.toString(), schema: "corral_a" }))
          )
          expect(againA.exitReason).toBe("completed")

          // Where the tables are, as the database sees them: in both schemas, none in public.
          const db = Context.get(
            yield* Layer.build(Database.layerPostgres(Redacted.make(url.toString()), { maxConnections: 1 })),
            SqlClient.SqlClient
          )
          const rows = yield* db<{ schema: string; n: number }>`SELECT table_schema AS schema, count(*)::int AS n
          FROM information_schema.tables WHERE table_name IN ('agents', 'sessions', 'turns', 'documents',
          'corral_migrations') GROUP BY table_schema ORDER BY table_schema`
          expect(rows.map((r) => [r.schema, r.n])).toEqual([["corral_a", 5], ["corral_b", 5]])
          const sessions = yield* db<{ n: number }>`SELECT count(*)::int AS n FROM corral_a.sessions`
          expect(sessions[0]?.n).toBe(1)
          expect((yield* db<{ n: number }>`SELECT count(*)::int AS n FROM corral_b.sessions`)[0]?.n).toBe(0)
        }),
      60_000
    )
  }
)
