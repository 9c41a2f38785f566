/**
 * The persistence timeout on Postgres, in its own file: `layer(...)` of @effect/vitest replaces the module-wide
 * `it.effect`/`it.scoped` with its own (test services excluded), so a TestClock test must not share a file with one.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, TestClock } from "effect"
import { randomUUID } from "node:crypto"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope } from "../../src/domain/Scope.js"
import { initialState } from "../../src/domain/Session.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "./PostgresFixture.js"

const url = testDatabaseUrl ?? "postgres://unused"

describe.skipIf(testDatabaseUrl === undefined)(
  `Postgres store: persistence timeout (${testDatabaseUrl === undefined ? skipReason : "fresh database"})`,
  () => {
    it.scoped("fails an append the database holds past its timeout; the statement may still commit later", () =>
      Effect.gen(function*() {
        // Built inside the test, so the store's deadline sweeper runs on this test's TestClock.
        const context = yield* Layer.build(SqlStore.layer().pipe(Layer.provideMerge(freshDatabase(url))))
        const store = Context.get(context, SessionStore)
        const sql = Context.get(context, SqlClient.SqlClient)
        const org = `org_${randomUUID().slice(0, 8)}`
        const id = SessionId.make(`ses_${randomUUID().replaceAll("-", "")}`)
        yield* store.createSession({
          id,
          principal: new Principal({ orgId: org, userId: "u1" }),
          scope: Scope.make("incident:INC-7"),
          agentId: AgentId.make("triage"),
          agentVersion: 1,
          createdAt: 1,
          updatedAt: 1,
          state: initialState
        })
        const user = (text: string) => ({ kind: "user" as const, text })
        yield* store.appendTurn(id, user("first"), 1, 10_000)

        // Another transaction holds the session's counter row: the next append's statement waits on its lock.
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const locker = yield* Effect.fork(
          sql.withTransaction(Effect.gen(function*() {
            yield* sql`SELECT 1 FROM session_counters WHERE session_id = ${id} FOR UPDATE`
            yield* Deferred.succeed(locked, undefined)
            yield* Deferred.await(release)
          }))
        )
        yield* Deferred.await(locked)
        const held = yield* Effect.fork(store.appendTurn(id, user("held"), 2, 10_000))
        yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`.pipe(
          Effect.repeat({ until: (rows) => (rows[0]?.n ?? 0) >= 1, times: 100_000 })
        )

        yield* TestClock.adjust("9900 millis")
        expect(held.unsafePoll()).toBeNull()
        yield* TestClock.adjust("100 millis")
        const failure = yield* Effect.flip(Fiber.join(held))
        expect(failure._tag).toBe("PersistenceFailed")
        expect(failure.message).toBe("the store did not answer within 10000 ms")

        // Once the lock is released the statement that was in flight commits: the caller was told it failed, and
        // the transcript is what the next read shows (no gap, no duplicate).
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(locker)
        expect((yield* store.appendTurn(id, user("after"), 3, 10_000)).seq).toBe(3)
        const stored = yield* store.turns(org, id)
        expect(stored.map((t) => [t.seq, t.entry.kind === "user" ? t.entry.text : ""])).toEqual([
          [1, "first"],
          [2, "held"],
          [3, "after"]
        ])
      }))
  }
)
