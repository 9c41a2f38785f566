/**
 * The watchdog (cluster/Watchdog, issue 46): a runner whose address refuses connections is marked unhealthy in the
 * cluster's runner table; one that listens, and this node itself, are left alone. On a fresh Postgres database with
 * the table as @effect/cluster makes it; skipped without CORRAL_TEST_DATABASE_URL. Real sockets on 127.0.0.1.
 * A runner whose heartbeat is stale (a lost machine) is marked unhealthy and exactly its connections opened before it
 * fell silent are ended — not another runner's, not this test's, not those of a node started again on its address.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { createServer } from "node:net"
import type { Server } from "node:net"
import * as Fence from "../../src/cluster/Fence.js"
import * as Watchdog from "../../src/cluster/Watchdog.js"
import * as Database from "../../src/store/Database.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { eventually } from "../support/ServerHarness.js"
import { clusterDatabase } from "./support.js"

/** A connection to `url` named as the runner at `address` names its connections; its backend pid. */
const connectionOf = (url: string, address: string) =>
  Effect.gen(function*() {
    const named = new URL(url)
    named.searchParams.set("application_name", Fence.applicationName(address))
    const context = yield* Layer.build(Database.layerPostgres(Redacted.make(named.toString()), { maxConnections: 1 }))
    const sql = yield* Effect.provide(SqlClient.SqlClient, context)
    const [row] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
    return row!.pid
  })

const listening = Effect.acquireRelease(
  Effect.promise(() =>
    new Promise<Server>((resolve) => {
      const server = createServer((socket) => socket.destroy())
      server.listen(0, "127.0.0.1", () => resolve(server))
    })
  ),
  (server) => Effect.promise(() => new Promise<void>((resolve) => server.close(() => resolve())))
)

const portOf = (server: Server) => {
  const address = server.address()
  return typeof address === "object" && address !== null ? address.port : 0
}

describe.skipIf(testDatabaseUrl === undefined)(
  `the cluster watchdog${testDatabaseUrl === undefined ? ` (${skipReason})` : ""}`,
  () => {
    it.live(
      "marks a runner whose address refuses connections unhealthy, and leaves a listening one alone",
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`CREATE TABLE cluster_runners (
          machine_id SERIAL PRIMARY KEY, address VARCHAR(255) NOT NULL UNIQUE, runner TEXT NOT NULL,
          healthy BOOLEAN NOT NULL DEFAULT TRUE, last_heartbeat TIMESTAMP NOT NULL DEFAULT NOW())`
          const alive = yield* listening
          // A port that was listening and no longer is: nothing answers there.
          const gone = yield* Effect.scoped(Effect.map(listening, portOf))
          const self = yield* listening
          const runners = [`127.0.0.1:${portOf(alive)}`, `127.0.0.1:${gone}`, `127.0.0.1:${portOf(self)}`]
          for (
            const address of runners
          ) yield* sql`INSERT INTO cluster_runners (address, runner) VALUES (${address}, 'x')`
          expect(yield* Watchdog.check(runners[2]!)).toEqual([runners[1]])
          const rows = yield* sql<{ address: string; healthy: boolean }>`SELECT address, healthy FROM cluster_runners
          ORDER BY machine_id`
          expect(rows.map((row) => row.healthy)).toEqual([true, false, true])
          // Already marked: not checked again.
          expect(yield* Watchdog.check(runners[2]!)).toEqual([])
        }).pipe(Effect.scoped, Effect.provide(freshDatabase(testDatabaseUrl!))),
      30_000
    )

    it.live(
      "ends exactly the connections of a runner whose heartbeat is stale, and marks it unhealthy",
      () =>
        Effect.gen(function*() {
          const database = yield* clusterDatabase(testDatabaseUrl!)
          const sql = database.sql
          yield* sql`CREATE TABLE cluster_runners (
            machine_id SERIAL PRIMARY KEY, address VARCHAR(255) NOT NULL UNIQUE, runner TEXT NOT NULL,
            healthy BOOLEAN NOT NULL DEFAULT TRUE, last_heartbeat TIMESTAMP NOT NULL DEFAULT NOW())`
          const [lost, live, self] = ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"]
          const lostPid = yield* connectionOf(database.url, lost!)
          const livePid = yield* connectionOf(database.url, live!)
          // The lost runner's last heartbeat: when its connection opened. The live one and this node beat now.
          yield* sql`INSERT INTO cluster_runners (address, runner, last_heartbeat) VALUES
            (${lost!}, 'x', (SELECT backend_start FROM pg_stat_activity WHERE pid = ${lostPid})),
            (${live!}, 'x', NOW()), (${self!}, 'x', NOW())`
          // Silent for longer than the window (1 s here); then a node is started again on its address.
          yield* Effect.sleep("1500 millis")
          const restartedPid = yield* connectionOf(database.url, lost!)
          yield* sql`UPDATE cluster_runners SET last_heartbeat = NOW() WHERE address = ${live!} OR address = ${self!}`

          const ended = yield* Effect.provideService(Watchdog.endLost(self!, 1_000), SqlClient.SqlClient, sql)
          expect(ended).toEqual([lost])
          // The lost runner's old connection goes (pg_terminate_backend signals it: polled); the restarted node's,
          // the live runner's and this test's remain.
          const pids = yield* eventually(
            "the lost runner's connection to end",
            Effect.map(
              sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`,
              (rows) => rows.some((row) => row.pid === lostPid) ? undefined : rows.map((row) => row.pid)
            ),
            "5 seconds"
          )
          expect(pids).toContain(restartedPid)
          expect(pids).toContain(livePid)
          const rows = yield* sql<{ address: string; healthy: boolean }>`SELECT address, healthy FROM cluster_runners
            ORDER BY machine_id`
          expect(rows.map((row) => row.healthy)).toEqual([false, true, true])
        }).pipe(Effect.scoped),
      30_000
    )
  }
)
