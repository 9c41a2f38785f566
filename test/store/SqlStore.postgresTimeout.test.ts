/**
 * The persistence timeout on Postgres, in its own file: `layer(...)` of @effect/vitest replaces the module-wide
 * `it.effect`/`it.scoped` with its own (test services excluded), so a TestClock test must not share a file with one.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, TestClock } from "effect"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import { awaitLockWaiter, freshDatabase, holdCounterRow, skipReason, testDatabaseUrl } from "./PostgresFixture.js"
import { newOrg, newSession, user } from "./StoreFixtures.js"

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
        const session = newSession(newOrg())
        const { id } = session
        const org = session.principal.orgId
        yield* store.createSession(session)
        yield* store.appendTurn(id, user("first"), 1, 10_000)

        // Another transaction holds the session's counter row: the next append's statement waits on its lock.
        const holder = yield* holdCounterRow(sql, id)
        const held = yield* Effect.fork(store.appendTurn(id, user("held"), 2, 10_000))
        yield* awaitLockWaiter(sql)

        yield* TestClock.adjust("9900 millis")
        expect(held.unsafePoll()).toBeNull()
        yield* TestClock.adjust("100 millis")
        const failure = yield* Effect.flip(Fiber.join(held))
        expect(failure._tag).toBe("PersistenceFailed")
        expect(failure.message).toBe("the store did not answer within 10000 ms")

        // Once the lock is released the statement that was in flight commits: the caller was told it failed, and
        // the transcript is what the next read shows (no gap, no duplicate).
        yield* holder.release
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
