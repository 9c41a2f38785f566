/**
 * An org's daily budget across processes: two processes on one Postgres database each start 25 sessions of the same
 * org at once (test/support/spend-child.ts) against a budget that buys a fraction of them. Between them they never
 * spend more than the budget plus one call per process (the bound docs/money.md states; the holds make it the budget
 * itself while a call's real input stays under its estimate, as it does here), every call's cost is in the day's
 * tally, and the other org's sessions run whole. Skipped without CORRAL_TEST_DATABASE_URL (two processes cannot
 * share the embedded database).
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schedule, Schema } from "effect"
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as Migrations from "../../src/store/Migrations.js"
import { MAX_OUTPUT, prices } from "../support/spendModel.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "./PostgresFixture.js"

const repoRoot = fileURLToPath(new URL("../..", import.meta.url))
const BUDGET = 150_000
// The most one call can cost: a long transcript's input (well under 4,000 tokens here) and the provider's cap.
const ONE_CALL = 4_000 * prices.inputPerMTok + MAX_OUTPUT * prices.outputPerMTok

const Result = Schema.parseJson(Schema.Struct({
  sessions: Schema.Array(Schema.Struct({ org: Schema.String, exitReason: Schema.String, costMicros: Schema.Number })),
  refused: Schema.Array(Schema.String)
}))

/** A child started and READY (bounded); `go` lets it start its sessions, `result` is its RESULT line. */
const child = (url: string, label: string) =>
  Effect.gen(function*() {
    const proc = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(
          process.execPath,
          ["--import", "tsx", "test/support/spend-child.ts", url, label, "25", String(BUDGET)],
          { cwd: repoRoot, stdio: ["pipe", "pipe", "pipe"] }
        )
      ),
      (proc) => Effect.sync(() => proc.kill("SIGKILL"))
    )
    let out = ""
    let err = ""
    proc.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
    proc.stderr.on("data", (chunk: Buffer) => (err += chunk.toString("utf8")))
    const exited = Effect.async<number | null>((resume) => {
      if (proc.exitCode !== null) return resume(Effect.succeed(proc.exitCode))
      proc.once("exit", (code) => resume(Effect.succeed(code)))
    })
    const failed = (what: string) => new Error(`child ${label}: ${what}; stderr:\n${err.slice(-4_000)}`)
    // READY within a minute (a child that died is reported with its stderr).
    yield* Effect.suspend(() =>
      out.includes("READY\n")
        ? Effect.void
        : proc.exitCode !== null
        ? Effect.fail(failed(`exited ${proc.exitCode} before READY`))
        : Effect.fail(failed("not READY within 60 s"))
    ).pipe(Effect.retry(Schedule.spaced("50 millis").pipe(Schedule.upTo("60 seconds"))))
    return {
      go: Effect.sync(() => proc.stdin.end("GO\n")),
      result: Effect.flatMap(exited, (code) => {
        const line = out.split("\n").find((l) => l.startsWith("RESULT "))
        return code !== 0 || line === undefined
          ? Effect.fail(failed(`exited ${code} without a result`))
          : Effect.succeed(Schema.decodeUnknownSync(Result)(line.slice("RESULT ".length)))
      }).pipe(Effect.timeoutFail({ duration: "120 seconds", onTimeout: () => failed("no result within 120 s") }))
    }
  })

const suite = testDatabaseUrl === undefined ? describe.skip : describe

suite(`Org budgets across two processes on Postgres${testDatabaseUrl === undefined ? ` (${skipReason})` : ""}`, () => {
  it.live(
    "50 sessions of one org at once in two processes: at most the budget plus one call each",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* Migrations.run
        const [current] = yield* sql<{ db: string }>`SELECT current_database() AS db`
        const url = new URL(testDatabaseUrl!)
        url.pathname = `/${current?.db}`
        const children = yield* Effect.all([child(url.toString(), "a"), child(url.toString(), "b")], {
          concurrency: 2
        })
        yield* Effect.forEach(children, (c) => c.go, { discard: true })
        const [a, b] = yield* Effect.all(children.map((c) => c.result), { concurrency: 2 })
        const sessions = [...a!.sessions, ...b!.sessions]
        const acme = sessions.filter((s) => s.org === "acme")
        const spent = acme.reduce((sum, s) => sum + s.costMicros, 0)
        expect(spent).toBeLessThanOrEqual(BUDGET + 2 * ONE_CALL)
        // The model bills under Corral's input estimate (4 characters a token against 3), as real tokenizers do: the
        // holds then keep the two processes within the budget itself.
        expect(spent).toBeLessThanOrEqual(BUDGET)
        // The budget did its work, in both processes.
        expect(spent).toBeGreaterThan(BUDGET * 0.8)
        expect(a!.sessions.some((s) => s.org === "acme") && b!.sessions.some((s) => s.org === "acme")).toBe(true)
        expect(acme.some((s) => s.exitReason === "cost_budget")).toBe(true)
        expect([...a!.refused, ...b!.refused].every((tag) => tag === "BudgetExhausted")).toBe(true)
        // Every call's cost reached the day's tally, and nothing is held once all have settled.
        const rows = yield* sql<{ spent: string; held: string }>`
        SELECT spent_micros::text AS spent, held_micros::text AS held FROM org_spend WHERE org_id = 'acme'`
        expect(rows.map((r) => Number(r.spent))).toEqual([spent])
        expect(rows.map((r) => Number(r.held))).toEqual([0])
        // The other org is untouched.
        expect(sessions.filter((s) => s.org === "beta").map((s) => s.exitReason)).toEqual(
          ["completed", "completed", "completed", "completed"]
        )
      }).pipe(Effect.scoped, Effect.provide(Layer.orDie(freshDatabase(testDatabaseUrl!)))),
    180_000
  )
})
