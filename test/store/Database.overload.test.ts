/**
 * The Postgres pool under a flood of its own statements (store/Database.ts `PatientPool`, internal/overload.ts): a
 * caller queued for a connection longer than the persistence timeout, while the pool keeps answering the callers
 * ahead of it, is served — not failed with "timeout exceeded when trying to connect" as if the database were down.
 * The outage side (a partition fails waiters at the timeout, and the pool works again once the network does) is
 * test/store/SqlStore.outage.test.ts. Real time, because a real pool is the subject; every wait is bounded.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { freshDatabase, skipReason, testDatabaseUrl } from "./PostgresFixture.js"

const url = testDatabaseUrl ?? "postgres://unused"
const TIMEOUT_MS = 300

describe.skipIf(testDatabaseUrl === undefined)(
  `Postgres pool under a flood (${testDatabaseUrl === undefined ? skipReason : "fresh database"})`,
  () => {
    it.live(
      "callers queued past the timeout behind a busy pool are served, in the order they came",
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          // One connection and 40 statements of 30 ms each: the last callers wait ~1.2 s, four timeouts, for a
          // connection that is busy answering the ones ahead of them all along.
          const served: Array<number> = []
          const outcomes = yield* Effect.forEach(
            Array.from({ length: 40 }, (_, i) => i),
            (i) =>
              Effect.either(
                Effect.tap(sql`SELECT pg_sleep(0.03), ${i}::int AS i`, () => Effect.sync(() => served.push(i)))
              ),
            { concurrency: "unbounded" }
          )
          const failures = outcomes.flatMap((outcome) => Either.isLeft(outcome) ? [String(outcome.left)] : [])
          expect(failures).toEqual([])
          expect(served).toEqual(Array.from({ length: 40 }, (_, i) => i))
        }).pipe(Effect.provide(freshDatabase(url, { timeoutMs: TIMEOUT_MS, maxConnections: 1 }))),
      30_000
    )
  }
)
