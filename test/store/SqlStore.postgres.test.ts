import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope } from "../../src/domain/Scope.js"
import { initialState } from "../../src/domain/Session.js"
import * as Migrations from "../../src/store/Migrations.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "./PostgresFixture.js"
import { sessionStoreContract } from "./SessionStoreContract.js"
import { sqlDriverSuite } from "./SqlDriverSuite.js"

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
          expect([a, b].sort((x, y) => x.length - y.length)).toEqual([[], [[1, "init"], [2, "approvals"], [
            3,
            "append_function"
          ]]])
          expect(yield* Migrations.run).toEqual([])
        }))
    })

    layer(onPostgres(), { excludeTestServices: true })("SqlStore on Postgres: outage", (it) => {
      it.effect("fails the appends an outage catches with PersistenceFailed, keeps no partial turn, then recovers", () =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const sql = yield* SqlClient.SqlClient
          const org = `org_${randomUUID().slice(0, 8)}`
          const session = {
            id: SessionId.make(`ses_${randomUUID().replaceAll("-", "")}`),
            principal: new Principal({ orgId: org, userId: "u1" }),
            scope: Scope.make("incident:INC-42"),
            agentId: AgentId.make("triage"),
            agentVersion: 1,
            createdAt: 1,
            updatedAt: 1,
            state: initialState
          }
          const user = (text: string) => ({ kind: "user" as const, text })
          yield* store.createSession(session)
          yield* Effect.forEach([1, 2, 3], (n) => store.appendTurn(session.id, user(`m${n}`), n), { discard: true })

          // Hold the session's counter row in another transaction, so the next appends are in flight inside the
          // database (waiting on the row lock) when the connections are cut. The holder survives the cut: if it died
          // too, its lock could be released before the waiting append's own termination lands, and the append would
          // commit.
          const locked = yield* Deferred.make<number>()
          const release = yield* Deferred.make<void>()
          const locker = yield* Effect.fork(
            sql.withTransaction(Effect.gen(function*() {
              const [me] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid FROM session_counters
              WHERE session_id = ${session.id} FOR UPDATE`
              yield* Deferred.succeed(locked, me?.pid ?? 0)
              yield* Deferred.await(release)
            }))
          )
          const lockerPid = yield* Deferred.await(locked)
          const caught = yield* Effect.forEach(
            [4, 5, 6],
            (n) => Effect.fork(store.appendTurn(session.id, user(`caught ${n}`), n))
          )
          yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`.pipe(
            Effect.repeat({
              schedule: Schedule.spaced("20 millis"),
              until: (rows) => (rows[0]?.n ?? 0) >= 1,
              times: 500
            })
          )

          const terminated = yield* sql`SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> ${lockerPid}`
          expect(terminated.length).toBeGreaterThanOrEqual(1)
          for (const fiber of caught) expect((yield* Effect.flip(Fiber.join(fiber)))._tag).toBe("PersistenceFailed")
          yield* Deferred.succeed(release, undefined)
          yield* Fiber.join(locker)

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
  }
)
