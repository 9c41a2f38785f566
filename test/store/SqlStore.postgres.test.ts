import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schedule } from "effect"
import * as Migrations from "../../src/store/Migrations.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import { awaitLockWaiter, freshDatabase, holdCounterRow, skipReason, testDatabaseUrl } from "./PostgresFixture.js"
import { closingOf, sessionStoreContract, withCalls } from "./SessionStoreContract.js"
import { sqlDriverSuite } from "./SqlDriverSuite.js"
import { newOrg, newSession, user } from "./StoreFixtures.js"

const url = testDatabaseUrl ?? "postgres://unused"
/** Each suite builds its own layer, so each runs in its own fresh database. */
const onPostgres = () => SqlStore.layer().pipe(Layer.provideMerge(freshDatabase(url)))

describe.skipIf(testDatabaseUrl === undefined)(
  `Postgres store (${testDatabaseUrl === undefined ? skipReason : "fresh database per suite"})`,
  () => {
    sessionStoreContract("sql on Postgres", onPostgres())
    sqlDriverSuite("Postgres", onPostgres())

    layer(freshDatabase(url), { excludeTestServices: true })("Migrations on a fresh Postgres database", (it) => {
      it.effect("applies 0001 once when two first runs race, then nothing", () =>
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
        }))
    })

    layer(onPostgres(), { excludeTestServices: true })("SqlStore on Postgres: outage", (it) => {
      it.effect("fails the appends an outage catches with PersistenceFailed, keeps no partial turn, then recovers", () =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const sql = yield* SqlClient.SqlClient
          const session = newSession(newOrg())
          const org = session.principal.orgId
          yield* store.createSession(session)
          yield* Effect.forEach([1, 2, 3], (n) => store.appendTurn(session.id, user(`m${n}`), n), { discard: true })

          // Hold the session's counter row in another transaction, so the next appends are in flight inside the
          // database (waiting on the row lock) when the connections are cut. The holder survives the cut: if it died
          // too, its lock could be released before the waiting append's own termination lands, and the append would
          // commit.
          const holder = yield* holdCounterRow(sql, session.id)
          const caught = yield* Effect.forEach(
            [4, 5, 6],
            (n) => Effect.fork(store.appendTurn(session.id, user(`caught ${n}`), n))
          )
          yield* awaitLockWaiter(sql)

          const terminated = yield* sql`SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> ${holder.pid}`
          expect(terminated.length).toBeGreaterThanOrEqual(1)
          for (const fiber of caught) expect((yield* Effect.flip(Fiber.join(fiber)))._tag).toBe("PersistenceFailed")
          yield* holder.release

          // The pool replaces the dead connections; an append may still meet one it has not discarded yet.
          const after = yield* store.appendTurn(session.id, user("after the outage"), 7).pipe(
            Effect.retry({ schedule: Schedule.spaced("20 millis"), times: 20 })
          )
          expect(after.seq).toBe(4)
          const stored = yield* store.turns(org, session.id)
          expect(stored.map((t) => [t.seq, t.entry.kind === "user" ? t.entry.text : ""])).toEqual([
            [1, "m1"],
            [2, "m2"],
            [3, "m3"],
            [4, "after the outage"]
          ])
        }))
    })

    layer(onPostgres(), { excludeTestServices: true })("SqlStore on Postgres: pairing", (it) => {
      it.effect("closes calls committed while the next turn's statement waited on the session's lock", () =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const sql = yield* SqlClient.SqlClient
          const session = newSession(newOrg())
          yield* store.createSession(session)
          const stored = yield* Deferred.make<void>()
          const commit = yield* Deferred.make<void>()
          // Another writer's transaction stores the open calls and holds the session's counter row until `commit`.
          const writer = yield* Effect.fork(sql.withTransaction(Effect.gen(function*() {
            yield* store.appendTurn(session.id, withCalls("c1"), 1)
            yield* Deferred.succeed(stored, undefined)
            yield* Deferred.await(commit)
          })))
          yield* Deferred.await(stored)
          // This statement starts (and takes its snapshot) before that commit, and waits on the lock.
          const next = yield* Effect.fork(store.appendTurn(session.id, user("next"), 2))
          yield* awaitLockWaiter(sql)
          yield* Deferred.succeed(commit, undefined)
          yield* Fiber.join(writer)
          const turn = yield* Fiber.join(next)
          expect(turn.closed?.entry).toEqual(closingOf("c1"))
          expect((yield* store.turns(session.principal.orgId, session.id)).map((t) => t.entry.kind))
            .toEqual(["assistant", "tool_results", "user"])
        }))
    })
  }
)
