/**
 * The fence (cluster/Fence, issue 46): a node's actors write for a session only while one of the node's own
 * connections (its `application_name`) holds the advisory lock of the session's shard. Against a real Postgres
 * database: the lock held by another node's connection, the write is refused `PersistenceFailed` and never reaches
 * the store; taken by this node, it goes ahead (a shard just acquired, read again at once); lost to another node again
 * — what a node cut off from Postgres finds when it comes back — it is refused. Postgres only; skipped without
 * CORRAL_TEST_DATABASE_URL.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import * as Fence from "../../src/cluster/Fence.js"
import type { TurnEntry } from "../../src/domain/Message.js"
import * as Database from "../../src/store/Database.js"
import type { SessionStore } from "../../src/store/SessionStore.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { clusterDatabase } from "./support.js"

const self = "127.0.0.1:1"
const LOCK = 1_000_042

/** A store whose appends are only counted (the fence is what is under test). */
const counting = () => {
  const appended: Array<string> = []
  const store = {
    appendTurn: (sessionId: string, entry: TurnEntry, at: number) =>
      Effect.sync(() => {
        appended.push(sessionId)
        return { sessionId, seq: appended.length, at, entry }
      })
  } as unknown as Context.Tag.Service<SessionStore>
  return { store, appended }
}

const entry: TurnEntry = { kind: "user", text: "hello" } as TurnEntry

describe.skipIf(testDatabaseUrl === undefined)(
  `the cluster fence${testDatabaseUrl === undefined ? ` (${skipReason})` : ""}`,
  () => {
    it.live("writes for a session only while this node's own connection holds its shard's lock", () =>
      Effect.gen(function*() {
        const database = yield* clusterDatabase(testDatabaseUrl!)
        const other = database.sql // another node's connections ("corral")
        yield* other`CREATE TABLE cluster_runners (address text PRIMARY KEY, last_heartbeat timestamp NOT NULL)`
        yield* other`INSERT INTO cluster_runners VALUES (${self}, NOW())`
        const named = new URL(database.url)
        named.searchParams.set("application_name", Fence.applicationName(self))
        const ours = yield* Layer.build(
          Fence.layer({ self, every: "200 millis", freshMs: 400 }).pipe(
            Layer.provideMerge(Database.layerPostgres(Redacted.make(named.toString()), { maxConnections: 3 }))
          )
        )
        const fence = Context.get(ours, Fence.Fence)
        const sql = Context.get(ours, SqlClient.SqlClient)
        const { appended, store } = counting()
        const guarded = fence.guard(store, () => LOCK)

        // Another node holds the lock: refused, nothing written.
        const theirs = yield* other.reserve
        yield* theirs.executeRaw(`SELECT pg_advisory_lock(${LOCK})`, [])
        const refused = yield* Effect.flip(guarded.appendTurn("ses_a", entry, 1))
        expect(refused._tag).toBe("PersistenceFailed")
        expect(refused.message).toContain("does not hold the lock")
        expect(appended).toEqual([])

        // This node takes it: the write goes ahead.
        yield* theirs.executeRaw(`SELECT pg_advisory_unlock(${LOCK})`, [])
        const mine = yield* sql.reserve
        yield* mine.executeRaw(`SELECT pg_advisory_lock(${LOCK})`, [])
        yield* guarded.appendTurn("ses_a", entry, 2)
        expect(appended).toEqual(["ses_a"])

        // Lost to the other node (its connections ended, the lock taken): refused again once the view is fresh.
        yield* mine.executeRaw(`SELECT pg_advisory_unlock(${LOCK})`, [])
        yield* theirs.executeRaw(`SELECT pg_advisory_lock(${LOCK})`, [])
        yield* Effect.sleep("600 millis")
        const again = yield* Effect.flip(guarded.appendTurn("ses_a", entry, 3))
        expect(again._tag).toBe("PersistenceFailed")
        expect(appended).toEqual(["ses_a"])

        // Its heartbeat is written meanwhile.
        const [row] = yield* other<{ age: number }>`SELECT EXTRACT(EPOCH FROM NOW() - last_heartbeat)::float AS age
          FROM cluster_runners WHERE address = ${self}`
        expect(row!.age).toBeLessThan(2)
      }).pipe(Effect.scoped))
  }
)
