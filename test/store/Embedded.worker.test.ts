/**
 * The embedded PGlite runs in a worker thread (issue 42): its statements never stop the server's event loop, every
 * wait on it is bounded, and closing it does not wait for a statement it cannot cancel. Real HTTP, a real worker.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it, layer } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Layer, Scope } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Server from "../../src/server/Server.js"
import * as Embedded from "../../src/store/Embedded.js"
import { describe as describeFailure } from "../../src/store/internal/failure.js"
import { baseUrl, raw, settings } from "../support/ServerHarness.js"

/** One statement that keeps PGlite busy for a while (a few hundred ms on the CI machine). */
// At least 200 ms on any machine (a sleep inside the statement: it holds the database's thread like real work does),
// plus some real work.
const busy = (sql: SqlClient.SqlClient) =>
  sql`SELECT pg_sleep(0.2) AS slept, (SELECT count(*) FROM generate_series(1, 100000)) AS n`

const sinceMs = (start: number) => performance.now() - start

describe("Embedded (worker thread)", () => {
  layer(Layer.merge(Server.layer(settings()), Embedded.layerEmbedded({ timeoutMs: 30_000 })), {
    excludeTestServices: true
  })("alongside the server", (it) => {
    // excludeTestServices: the live clock, as everywhere in this file (real threads, real sockets).
    it.effect(
      "/healthz answers at once while the embedded database runs a burst of long statements",
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const url = yield* baseUrl
          yield* busy(sql) // warm: the first run pays for compiling the plan
          const latencies: Array<number> = []
          let running = true
          const prober = yield* Effect.fork(Effect.gen(function*() {
            while (running) {
              const answer = yield* raw(`${url}/healthz`, { timeoutMs: 5_000 })
              expect(answer.status).toBe(200)
              latencies.push(answer.elapsedMs)
              yield* Effect.sleep(Duration.millis(20))
            }
          }))
          const started = performance.now()
          // Several fibers at once, as sessions would: they queue for the one connection.
          yield* Effect.all(Array.from({ length: 8 }, () => busy(sql)), { concurrency: "unbounded" })
          const burstMs = sinceMs(started)
          running = false
          yield* Fiber.join(prober)
          // The burst was long enough to be seen. With PGlite on the server's thread a probe waited for whole
          // statements (the one sent as the burst began, for all of them: one probe answered in the whole burst);
          // here none waits as long as one statement and most answer at once (the bound is relative: this machine's
          // load stretches statements and probes alike).
          const statementMs = burstMs / 8
          expect(statementMs).toBeGreaterThan(150)
          expect(latencies.length).toBeGreaterThan(burstMs / 100)
          expect(Math.max(...latencies)).toBeLessThan(Math.max(500, statementMs))
          expect(latencies.sort((a, b) => a - b)[Math.floor(latencies.length / 2)]).toBeLessThan(100)
        }),
      60_000
    )
  })

  layer(Embedded.layerEmbedded({ timeoutMs: 500 }), { excludeTestServices: true })(
    "with a 500 ms persistence timeout",
    (it) => {
      it.effect(
        "a statement the database does not answer within the timeout fails with an error naming it; the next one runs",
        () =>
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const started = performance.now()
            const exit = yield* Effect.exit(sql`SELECT pg_sleep(2)`)
            const waited = sinceMs(started)
            expect(Exit.isFailure(exit)).toBe(true)
            if (Exit.isFailure(exit)) {
              expect(describeFailure(Cause.squash(exit.cause))).toContain("did not answer within 500 ms")
            }
            expect(waited).toBeGreaterThanOrEqual(450)
            expect(waited).toBeLessThan(1_500)
            // The sleep cannot be cancelled: it runs out in the worker, then the next statement is answered.
            const later = yield* sql<{ one: number }>`SELECT 1 AS one`.pipe(
              Effect.retry({ times: 10 }),
              Effect.timeout(Duration.seconds(10))
            )
            expect(later).toEqual([{ one: 1 }])
          }),
        30_000
      )
    }
  )

  it.live(
    "closing while a statement runs takes at most 3 s, and the directory opens again with what was committed",
    () =>
      Effect.gen(function*() {
        const dir = mkdtempSync(join(tmpdir(), "corral-embedded-worker-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(Embedded.layerEmbedded({ dataDir: dir }), scope)
        const sql = context.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient
        yield* sql`CREATE TABLE kept (n int)`
        yield* sql`INSERT INTO kept VALUES (42)`
        // Timed from the statement's start: PGlite on this thread would have held everything, the close included,
        // until the sleep ended.
        const started = performance.now()
        yield* Effect.fork(sql`SELECT pg_sleep(20)`)
        // Its client is connected already, so the statement is in the worker well within this.
        yield* Effect.sleep(Duration.millis(500))
        yield* Scope.close(scope, Exit.void)
        expect(sinceMs(started)).toBeLessThan(3_500)

        const rows = yield* Effect.scoped(Effect.gen(function*() {
          const again = yield* Layer.build(Embedded.layerEmbedded({ dataDir: dir }))
          const sql = again.unsafeMap.get(SqlClient.SqlClient.key) as SqlClient.SqlClient
          return yield* sql<{ n: number }>`SELECT n FROM kept`
        }))
        expect(rows).toEqual([{ n: 42 }])
      }).pipe(Effect.scoped),
    90_000
  )
})
