/**
 * SIGTERM while the database does not answer: `corral serve` (a child process) on Postgres through a `TcpProxy`,
 * demo sessions mid-burst, then a partition (blackhole) and SIGTERM. The drain must keep its bound whatever the
 * store does: exit 0 within `server.shutdownTimeoutMs` plus the close grace (2 s) plus a margin, and log every session
 * it could not settle by id. Afterwards the sessions left `running` are exactly those the log named (the next start
 * recovers them as `interrupted`).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freshDatabase, skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { corral, eventually, raw } from "../support/ServerHarness.js"
import * as TcpProxy from "../support/TcpProxy.js"

const url = testDatabaseUrl ?? "postgres://unused"
const SESSIONS = 6
const SHUTDOWN_MS = 3_000

describe.skipIf(testDatabaseUrl === undefined)(
  `SIGTERM during a database partition (${testDatabaseUrl === undefined ? skipReason : "Postgres via TcpProxy"})`,
  () => {
    it.live(
      "exits 0 within the drain bound and names every session it could not settle",
      () =>
        Effect.gen(function*() {
          const dir = mkdtempSync(join(tmpdir(), "corral-partition-"))
          yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
          // The database is created (and later read) directly; only the child goes through the proxy.
          let databaseUrl = ""
          const direct = yield* Layer.build(
            freshDatabase(url, { maxConnections: 2 }, (u) => {
              databaseUrl = u
              return u
            })
          )
          const sql = Context.get(direct, SqlClient.SqlClient)
          const target = new URL(url)
          const proxy = yield* TcpProxy.make({ host: target.hostname, port: Number(target.port || 5432) })

          const child = corral(["serve", "--port", "0"], {
            DATABASE_URL: proxy.url(databaseUrl),
            CORRAL_DEMO_DELAY_MS: "1000",
            CORRAL_SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_MS)
          }, dir)
          yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
          const base = yield* eventually(
            "the server to listen",
            Effect.sync(() => /listening on (http:\/\/[0-9.]+:\d+)/.exec(child.stdout() + child.stderr())?.[1]),
            "90 seconds"
          )
          const ids = yield* Effect.forEach(Array.from({ length: SESSIONS }, (_, i) => i), (i) =>
            Effect.map(
              raw(`${base}/v1/sessions`, {
                method: "POST",
                body: JSON.stringify({ agentId: "demo", scope: `partition:${i}`, prompt: `Why is ${i} failing?` }),
                headers: { "content-type": "application/json" }
              }),
              (response) => {
                expect(response.status).toBe(202)
                return JSON.parse(response.text).sessionId as string
              }
            ))
          yield* eventually(
            "every session to be running",
            Effect.map(raw(`${base}/v1/sessions?status=running&limit=100`), (response) =>
              JSON.parse(response.text).sessions.length === SESSIONS ? true : undefined),
            "30 seconds"
          )

          // The partition: every statement from now on goes unanswered (the store's timeout is the default 10 s,
          // longer than the drain's own bound).
          yield* proxy.set("blackhole")
          const signalled = Date.now()
          child.process.kill("SIGTERM")
          const code = yield* Effect.promise(() =>
            child.exited
          ).pipe(
            Effect.timeoutFail({ duration: "40 seconds", onTimeout: () => new Error("serve did not exit in 40 s") })
          )
          const took = Date.now() - signalled
          const log = child.stdout() + child.stderr()
          expect(code, log).toBe(0)
          expect(took, log).toBeLessThan(SHUTDOWN_MS + 2_000 + 3_000)

          // Every session the store still says is running was named in the log, and only those of ours.
          yield* proxy.set("reset")
          const left = yield* sql<{ id: string }>`SELECT id FROM sessions WHERE status = 'running'`
          expect(left.length, log).toBeGreaterThan(0)
          for (const { id } of left) {
            expect(ids).toContain(id)
            expect(log).toMatch(new RegExp(`session ${id} did not settle`))
          }
        }).pipe(Effect.scoped),
      120_000
    )
  }
)
