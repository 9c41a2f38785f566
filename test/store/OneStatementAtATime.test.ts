/**
 * A held Postgres connection given two statements at once runs them one after the other, in order, without
 * node-postgres's "already executing a query" deprecation (issue 46: every cluster node printed it, from the
 * cluster's shard-lock connection). Postgres only; skipped without CORRAL_TEST_DATABASE_URL. Its own file: Node
 * prints a deprecation once per process.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { freshDatabase, skipReason, testDatabaseUrl } from "./PostgresFixture.js"

describe.skipIf(testDatabaseUrl === undefined)(
  `a held Postgres connection${testDatabaseUrl === undefined ? ` (${skipReason})` : ""}`,
  () => {
    it.live(
      "runs statements given at once one at a time, in order, with no deprecation warning",
      () =>
        Effect.gen(function*() {
          const warnings: Array<string> = []
          const onWarning = (warning: Error) => warnings.push(warning.message)
          process.on("warning", onWarning)
          yield* Effect.addFinalizer(() => Effect.sync(() => process.off("warning", onWarning)))
          const sql = yield* SqlClient.SqlClient
          const connection = yield* sql.reserve
          const order: Array<number> = []
          const results = yield* Effect.all(
            [0, 1, 2, 3].map((n) =>
              connection.executeRaw(`SELECT pg_sleep(${n === 0 ? 0.1 : 0}), ${n}::int AS n`, []).pipe(
                Effect.tap(() => Effect.sync(() => order.push(n)))
              )
            ),
            { concurrency: "unbounded" }
          )
          expect(results.map((result) => (result as unknown as { rows: Array<{ n: number }> }).rows[0]!.n))
            .toEqual([0, 1, 2, 3])
          expect(order).toEqual([0, 1, 2, 3])
          // Deprecations are emitted on the next tick.
          yield* Effect.sleep("50 millis")
          expect(warnings.filter((w) => w.includes("already executing a query"))).toEqual([])
        }).pipe(Effect.scoped, Effect.provide(freshDatabase(testDatabaseUrl!))),
      30_000
    )
  }
)
