/**
 * `corral replay` and `corral run` with `--schema`: the CLI reads and writes the sessions an embedder keeps in its
 * own Postgres schema (`corral/sql`'s `layerSql({ url, schema })`). Without the flag those sessions were out of the
 * CLI's reach (it only ever looked in the server's default `search_path`).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Effect, Either, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import * as Cli from "../../src/cli/Cli.js"
import * as Command from "../../src/cli/Command.js"
import * as Config from "../../src/config/Config.js"
import { Corral } from "../../src/Corral.js"
import { LiveEvents, Principal, ToolRegistry } from "../../src/index.js"
import * as Scripted from "../../src/model/Scripted.js"
import { defaultTier, Providers } from "../../src/providers.js"
import { layerSql } from "../../src/sql.js"
import * as Database from "../../src/store/Database.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"

const inProcess = (argv: ReadonlyArray<string>, env: Record<string, string>) =>
  Cli.program(argv).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

const parsed = (schema: string) => ({
  positionals: [],
  strings: new Map([["schema", schema]]),
  booleans: new Set<string>()
})

const settingsWith = (env: Record<string, string>) =>
  Config.load.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("corral replay / run --schema", () => {
  it.effect("puts the schema on the connection's search_path, and names the flag when it cannot", () =>
    Effect.gen(function*() {
      const postgres = yield* settingsWith({ DATABASE_URL: "postgres://u@127.0.0.1:5432/db" })
      const chosen = yield* Command.withSchema(parsed("corral_app"), postgres)
      expect(chosen.database._tag === "Postgres" && Redacted.value(chosen.database.url)).toBe(
        "postgres://u@127.0.0.1:5432/db?options=-c+search_path%3Dcorral_app"
      )
      const bad = yield* Effect.either(Command.withSchema(parsed("Corral-App"), postgres))
      expect(Either.isLeft(bad) && bad.left).toMatch(/^--schema: "Corral-App"/)
      const embedded = yield* settingsWith({ CORRAL_DATA_DIR: "/tmp/nowhere" })
      const refused = yield* Effect.either(Command.withSchema(parsed("corral_app"), embedded))
      expect(Either.isLeft(refused) && refused.left).toContain("needs a Postgres server (DATABASE_URL)")
      // The commands take the flag (an unknown flag would be refused with exit 1 before anything runs).
      expect(yield* inProcess(["replay", "ses_missing", "--schema", "Bad-Name"], { CORRAL_STORE: "memory" })).toBe(1)
    }))
})

describe.skipIf(testDatabaseUrl === undefined)(
  `corral replay --schema on Postgres (${testDatabaseUrl === undefined ? skipReason : "a fresh database"})`,
  () => {
    it.scopedLive(
      "replays a session an embedder stored in its own schema, which the default search_path does not see",
      () =>
        Effect.gen(function*() {
          const admin = Context.get(
            yield* Layer.build(Database.layerPostgres(Redacted.make(testDatabaseUrl!), { maxConnections: 1 })),
            SqlClient.SqlClient
          )
          const name = `corral_test_${randomUUID().replaceAll("-", "").slice(0, 16)}`
          yield* admin`CREATE DATABASE ${admin(name)}`
          yield* Effect.addFinalizer(() =>
            admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`.pipe(Effect.ignore)
          )
          const url = new URL(testDatabaseUrl!)
          url.pathname = `/${name}`

          const me = new Principal({ orgId: "acme", userId: "ops" })
          const session = yield* Effect.gen(function*() {
            const corral = yield* Corral
            yield* corral.publishAgent(me, { id: "triage", version: 1, name: "Triage", instructions: "Look." })
            return yield* corral.run(me, { agentId: "triage", scope: "incident:1", prompt: "Why?" })
          }).pipe(Effect.provide(
            Corral.layer().pipe(
              Layer.provide(Layer.mergeAll(
                Providers.layer({ [defaultTier]: [Scripted.make({ script: [Scripted.text("The disk is full.")] })] }),
                LiveEvents.layer,
                ToolRegistry.layer([])
              )),
              Layer.provideMerge(layerSql({ url: url.toString(), schema: "corral_app" }))
            )
          ))
          const env = { DATABASE_URL: url.toString() }
          expect(yield* inProcess(["replay", session.id, "--org", "acme", "--schema", "corral_app"], env)).toBe(0)
          expect(yield* inProcess(["replay", session.id, "--org", "acme"], env)).toBe(1)
          expect(
            yield* inProcess(["run", "--demo", "--org", "acme", "--schema", "corral_app", "--scope", "s", "Why?"], {
              ...env,
              CORRAL_DEMO_DELAY_MS: "0"
            })
          ).toBe(0)
          const db = Context.get(
            yield* Layer.build(Database.layerPostgres(Redacted.make(url.toString()), { maxConnections: 1 })),
            SqlClient.SqlClient
          )
          expect((yield* db<{ n: number }>`SELECT count(*)::int AS n FROM corral_app.sessions`)[0]?.n).toBe(2)
        }),
      120_000
    )
  }
)
