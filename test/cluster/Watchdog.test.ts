/**
 * The watchdog (cluster/Watchdog, issue 46): a runner whose address refuses connections is marked unhealthy in the
 * cluster's runner table; one that listens, and this node itself, are left alone. On a fresh Postgres database with
 * the table as @effect/cluster makes it; skipped without CORRAL_TEST_DATABASE_URL. Real sockets on 127.0.0.1.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { createServer } from "node:net"
import type { Server } from "node:net"
import * as Watchdog from "../../src/cluster/Watchdog.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"

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
  }
)
