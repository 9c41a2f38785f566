/**
 * MCP servers' OAuth state on the SQL store (`mcp_credentials`, sealed with CORRAL_SECRET_KEY), on an embedded
 * PGlite data directory reopened as a restart would: the state survives a restart with the same key, is ignored
 * (not presented) with another key, is never written to the database without a key, the database holds only
 * ciphertext, and a removed row is gone.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Option } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Config from "../../src/config/Config.js"
import * as Wiring from "../../src/server/Wiring.js"
import { McpCredentials } from "../../src/tools/McpCredentials.js"

const withKey = (key: string | undefined) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(key === undefined ? [] : [["CORRAL_SECRET_KEY", key]])))

describe("McpCredentials on the SQL store", () => {
  it.live(
    "keeps sealed state across a restart, for the same key only; without a key writes nothing",
    () =>
      Effect.gen(function*() {
        const dir = mkdtempSync(join(tmpdir(), "corral-creds-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        const settings: Config.Settings = { ...Config.defaults, database: { _tag: "Embedded", dataDir: dir } }
        const inStore = <A, E>(key: string | undefined, f: (c: McpCredentials["Type"]) => Effect.Effect<A, E>) =>
          Effect.flatMap(McpCredentials, f).pipe(Effect.provide(Wiring.store(settings)), withKey(key))
        const state = `{"tokens":{"access_token":"at-secret-1","refresh_token":"rt-secret-1"}}`
        const key = "0123456789abcdef-test-key"

        yield* inStore(key, (c) => c.save("remote http://127.0.0.1:1/mcp", state))
        expect(yield* inStore(key, (c) => c.load("remote http://127.0.0.1:1/mcp"))).toEqual(Option.some(state))
        expect(yield* inStore("another key of 16+ chars", (c) => c.load("remote http://127.0.0.1:1/mcp")))
          .toEqual(Option.none())

        // Without a key: kept in memory, nothing written (the row saved above is untouched).
        yield* inStore(undefined, (c) => c.save("other http://127.0.0.1:2/mcp", state))
        const rows = yield* Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ key: string; sealed: string }>`SELECT key, sealed FROM mcp_credentials`
        ).pipe(
          Effect.provide(Wiring.database(settings))
        )
        expect(rows.map((r) => r.key)).toEqual(["remote http://127.0.0.1:1/mcp"])
        expect(rows[0]!.sealed).toMatch(/^v1\./)
        expect(rows[0]!.sealed).not.toContain("secret")

        // Removed (`corral mcp logout`): gone from the table, and removing again finds nothing.
        expect(yield* inStore(key, (c) => c.remove("remote http://127.0.0.1:1/mcp"))).toBe(true)
        expect(yield* inStore(key, (c) => c.load("remote http://127.0.0.1:1/mcp"))).toEqual(Option.none())
        expect(yield* inStore(key, (c) => c.remove("remote http://127.0.0.1:1/mcp"))).toBe(false)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live("refuses a CORRAL_SECRET_KEY shorter than 16 characters, naming the variable", () =>
    Effect.gen(function*() {
      const settings: Config.Settings = { ...Config.defaults, database: { _tag: "Embedded", dataDir: "memory://" } }
      const error = yield* Effect.flip(
        Effect.flatMap(McpCredentials, () => Effect.void).pipe(Effect.provide(Wiring.store(settings)), withKey("short"))
      )
      expect(String(error)).toMatch(/CORRAL_SECRET_KEY.*at least 16 characters/)
    }), { timeout: 60_000 })
})
