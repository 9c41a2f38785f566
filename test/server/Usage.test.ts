/**
 * `GET /v1/usage` against a hand-computed ledger: a priced provider (a fake over real HTTP) whose every reply bills
 * 1,000 input and 100 output tokens, a rate-limited attempt that bills 500 input tokens, one session of org acme.
 * The ledger row says what each attempt cost, in integer micro-dollars; another org sees none of it; a bad range is a
 * 400 naming the field. On the embedded store (PGlite) and, with CORRAL_TEST_DATABASE_URL, on Postgres.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Settings } from "../../src/config/Config.js"
import { utcDay } from "../../src/domain/Usage.js"
import * as Database from "../../src/store/Database.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import * as Fake from "../support/FakeProvider.js"
import { acme, caller, globex, pricedServer } from "../support/PricedServer.js"

const agent = { id: "triage", version: 1, name: "Triage", instructions: "Find out.", tools: ["demo_status"] }
const billed = { input: 1_000, output: 100 }

const scenario = (database: Settings["database"]) =>
  Effect.gen(function*() {
    const fake = yield* Fake.make({
      script: [
        Fake.status(429, {
          error: { message: "slow down", type: "rate_limit_error" },
          usage: { prompt_tokens: 500, completion_tokens: 0 }
        }, { "retry-after-ms": "5" })
      ],
      fallback: (request) => {
        const final = Fake.demo(request)
        return final._tag === "Reply" ? Fake.reply({ ...final.reply, usage: billed }) : final
      }
    })
    const url = yield* pricedServer(fake.openAiBaseUrl, { database })
    const call = caller(url)
    expect((yield* call(acme, "POST", "/v1/agents", agent)).status).toBe(201)
    const landed = yield* call(acme, "POST", "/v1/sessions?wait=true", {
      agentId: "triage",
      scope: "s",
      prompt: "Why?"
    })
    expect(landed.body.exitReason).toBe("completed")

    // By hand: the 429 billed 500 input tokens at $2/M = 1,000 µ$; each of the four replies (a tool call, the answer
    // after it, the finalize... as many as the fake answered) 1,000 × $2 + 100 × $8 per million = 2,800 µ$.
    const replies = fake.requests.length - 1
    const today = utcDay(Date.now())
    const usage = yield* call(acme, "GET", "/v1/usage")
    expect(usage.status).toBe(200)
    const row = {
      day: today,
      agentId: "triage",
      provider: "gpt",
      model: "gpt-4.1",
      attempts: replies + 1,
      inputTokens: 500 + replies * 1_000,
      outputTokens: replies * 100,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      costMicros: 1_000 + replies * 2_800
    }
    expect(usage.body.rows).toEqual([row])
    const { agentId: _a, day: _d, model: _m, provider: _p, ...total } = row
    expect(usage.body.total).toEqual(total)
    expect(usage.body.to).toBe(today)
    // The session says the same.
    expect(landed.body.costMicros).toBe(row.costMicros)

    // Another org sees nothing of acme's.
    expect((yield* call(globex, "GET", "/v1/usage")).body.rows).toEqual([])
    // A range that ends before today: nothing; a bad range: 400 naming the field.
    expect((yield* call(acme, "GET", "/v1/usage?from=2020-01-01&to=2020-01-31")).body.rows).toEqual([])
    const backwards = yield* call(acme, "GET", "/v1/usage?from=2026-12-05&to=2026-12-01")
    expect(backwards.status).toBe(400)
    expect(JSON.stringify(backwards.body)).toContain("from: a day on or before to (2026-12-01)")
    const notADay = yield* call(acme, "GET", "/v1/usage?from=yesterday")
    expect(notADay.status).toBe(400)
    expect(JSON.stringify(notADay.body)).toContain("a UTC day, YYYY-MM-DD")
    const tooLong = yield* call(acme, "GET", "/v1/usage?from=2024-01-01&to=2026-01-01")
    expect(tooLong.status).toBe(400)
    expect(JSON.stringify(tooLong.body)).toContain("at most 366 days")
  })

describe("GET /v1/usage", () => {
  it.live(
    "the org's ledger, by day, agent, provider and model, as computed by hand (embedded PGlite)",
    () =>
      Effect.acquireUseRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "corral-usage-"))),
        (dir) => scenario({ _tag: "Embedded", dataDir: join(dir, "data") }).pipe(Effect.scoped),
        (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
      ),
    { timeout: 120_000 }
  )

  it.live.skipIf(testDatabaseUrl === undefined)(
    `the same on Postgres${testDatabaseUrl === undefined ? ` — ${skipReason}` : ""}`,
    () =>
      Effect.gen(function*() {
        // A database of its own: the ledger is the org's across every session the database holds.
        const admin = yield* Layer.build(Database.layerPostgres(Redacted.make(testDatabaseUrl!), { maxConnections: 1 }))
        const sql = yield* Effect.provide(SqlClient.SqlClient, admin)
        const name = `corral_usage_${randomUUID().replaceAll("-", "").slice(0, 12)}`
        yield* sql`CREATE DATABASE ${sql(name)}`
        yield* Effect.addFinalizer(() => sql`DROP DATABASE IF EXISTS ${sql(name)} WITH (FORCE)`.pipe(Effect.ignore))
        const url = new URL(testDatabaseUrl!)
        url.pathname = `/${name}`
        yield* scenario({ _tag: "Postgres", url: Redacted.make(url.toString()), maxConnections: 4 })
      }).pipe(Effect.scoped),
    { timeout: 120_000 }
  )
})
