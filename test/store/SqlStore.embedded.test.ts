import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope } from "../../src/domain/Scope.js"
import { initialState } from "../../src/domain/Session.js"
import * as Embedded from "../../src/store/Embedded.js"
import * as Migrations from "../../src/store/Migrations.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import { sessionStoreContract } from "./SessionStoreContract.js"
import { sqlDriverSuite } from "./SqlDriverSuite.js"

/** The store and its SqlClient on a fresh in-memory PGlite; lanes 1 as Database wires it for one connection. */
const embedded = () => SqlStore.layer({ lanes: 1 }).pipe(Layer.provideMerge(Embedded.layerEmbedded()))

sessionStoreContract("sql on embedded PGlite", embedded())
sqlDriverSuite("embedded PGlite", embedded())

describe("Embedded", () => {
  it.live("migrates a fresh database once, even when two first runs race: 0001 once, then nothing", () =>
    Effect.gen(function*() {
      const [a, b] = yield* Effect.all([Migrations.run, Migrations.run], { concurrency: 2 })
      expect([a, b].sort((x, y) => x.length - y.length)).toEqual([[], [
        [1, "init"],
        [2, "approvals"],
        [
          3,
          "append_function"
        ],
        [4, "inbox"],
        [5, "mcp_credentials"],
        [6, "pairing"],
        [7, "org_spend"]
      ]])
      expect(yield* Migrations.run).toEqual([])
    }).pipe(Effect.provide(Embedded.layerEmbedded())))

  it.live(
    "keeps sessions and turns in CORRAL_DATA_DIR across restarts when DATABASE_URL is unset",
    () =>
      Effect.gen(function*() {
        const dir = yield* Effect.acquireRelease(
          Effect.promise(() => mkdtemp(join(tmpdir(), "corral-embedded-"))),
          (path) => Effect.promise(() => rm(path, { recursive: true, force: true }))
        )
        // The configured store, as Corral starts it: no DATABASE_URL, so the embedded database in CORRAL_DATA_DIR.
        const onDisk = SqlStore.layerConfig.pipe(
          Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map([["CORRAL_DATA_DIR", dir]]))))
        )
        const session = {
          id: SessionId.make("ses_durable"),
          principal: new Principal({ orgId: "org_a", userId: "u1" }),
          scope: Scope.make("incident:INC-1"),
          agentId: AgentId.make("triage"),
          agentVersion: 1,
          createdAt: 1,
          updatedAt: 1,
          state: initialState
        }
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.createSession(session)
          yield* store.appendTurn(session.id, { kind: "user", text: "before the restart" }, 2)
        }).pipe(Effect.provide(onDisk))
        const turns = yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.appendTurn(session.id, { kind: "user", text: "after the restart" }, 3)
          return yield* store.turns("org_a", session.id)
        }).pipe(Effect.provide(onDisk))
        expect(turns.map((t) => [t.seq, t.entry.kind === "user" ? t.entry.text : ""])).toEqual([
          [1, "before the restart"],
          [2, "after the restart"]
        ])
        expect(existsSync(join(dir, "pgdata", "PG_VERSION"))).toBe(true)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
