/**
 * The rails in the viewer, in a real headless Chromium, on a server with bearer keys: a session whose first provider
 * fails (a 500 with Retry-After: the session waits and retries; then a 429 whose Retry-After is beyond the cap: it
 * fails over) and whose second provider keeps calling tools until the per-burst ceiling ends the burst. The session
 * page shows that ceiling's gauge in red, the retry wait and the failover arrow in the waterfall; the operations page
 * shows the first provider throttled (its storm gate closed for the 50 s it asked for) and an MCP server that is down
 * (its command exits at once), with its last error. The session list shows the session.
 *
 * Real HTTP everywhere: two fake providers on 127.0.0.1, the server, the browser. On the embedded store (PGlite)
 * always, and on Postgres when CORRAL_TEST_DATABASE_URL is set. Screenshots of both pages go to
 * `test-artifacts/viewer/` (gitignored). Skipped, saying why, without /usr/bin/chromium.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { chromium } from "playwright-core"
import type { Settings } from "../../src/config/Config.js"
import { sha256 } from "../../src/server/Authentication.js"
import * as Server from "../../src/server/Server.js"
import * as Database from "../../src/store/Database.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import * as FakeProvider from "../support/FakeProvider.js"
import { baseUrl, settings } from "../support/ServerHarness.js"

const executablePath = "/usr/bin/chromium"
const available = existsSync(executablePath)
const artifacts = fileURLToPath(new URL("../../test-artifacts/viewer/", import.meta.url))
const key = "ck_viewer_rails_0123456789abcdef"

const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find out why checkout fails.",
  tools: ["demo_status"]
}

/** Runs the scenario on `database`; `label` names the screenshots. */
const scenario = (database: Settings["database"], label: string) =>
  Effect.gen(function*() {
    // alpha: a 500 that says "come back in 1 s" (a retry after its Retry-After), then a 429 asking for 50 s, beyond
    // the 5 s cap: the chain fails over to beta at once, and alpha's storm gate stays closed for those 50 s.
    const alpha = yield* FakeProvider.make({
      script: [
        FakeProvider.status(500, { error: { message: "upstream exploded", type: "server_error" } }, {
          "retry-after": "1"
        }),
        FakeProvider.rateLimited({ seconds: 50 })
      ]
    })
    // beta: answers, always with a tool call, until the per-burst ceiling (3) stops the burst; then the report.
    const beta = yield* FakeProvider.make({
      fallback: (request) =>
        FakeProvider.isFinalize(request)
          ? FakeProvider.demo(request)
          : FakeProvider.reply({
            text: "Checking the service.",
            toolCalls: [{ name: "demo_status", arguments: { service: "checkout" } }]
          })
    })
    const context = yield* Layer.build(Server.layer(settings({
      database,
      apiKeys: [{ sha256: sha256(key), orgId: "acme", userId: "ops" }],
      models: {
        providers: {
          alpha: { api: "openai", baseUrl: alpha.openAiBaseUrl, model: "alpha-1", maxAttempts: 3 },
          beta: { api: "openai", baseUrl: beta.openAiBaseUrl, model: "beta-1", maxAttempts: 3 }
        },
        tiers: { default: ["alpha", "beta"] }
      },
      // A real stdio MCP server command that exits at once: the server is down, and retried in the background.
      mcpServers: { tickets: { command: process.execPath, args: ["-e", "process.exit(3)"], tools: ["ticket_search"] } },
      limits: { modelCallsPerBurst: 3, retryAfterCapMs: 5_000 }
    })))
    const url = yield* Effect.provide(baseUrl, context)
    const call = (method: string, path: string, body?: unknown) =>
      Effect.promise(async () => {
        const response = await fetch(`${url}${path}`, {
          method,
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
        return { status: response.status, body: await response.json() as Record<string, unknown> }
      })
    expect((yield* call("POST", "/v1/agents", agent)).status).toBe(201)
    const started = yield* call("POST", "/v1/sessions", {
      agentId: "triage",
      scope: "incident:RAILS-1",
      prompt: "Why does checkout fail?"
    })
    expect(started.status).toBe(202)
    const sessionId = String(started.body.sessionId)

    const browser = yield* Effect.acquireRelease(
      Effect.promise(() =>
        chromium.launch({
          executablePath,
          args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        })
      ),
      (b) => Effect.promise(() => b.close())
    )
    const page = yield* Effect.promise(() => browser.newPage({ viewport: { width: 1100, height: 900 } }))
    const errors: Array<string> = []
    page.on("pageerror", (error) => errors.push(error.message))
    const run = <A>(f: () => Promise<A>) => Effect.promise(f)

    // The key, as a person enters it (kept in local storage, sent as a bearer header).
    yield* run(() => page.goto(`${url}/ui`))
    yield* run(() => page.fill("#apikey", key))
    yield* run(() => page.locator("#apikey").dispatchEvent("change"))

    mkdirSync(artifacts, { recursive: true })

    // The session page: the per-burst ceiling's gauge is the red one, and says it ended the burst.
    yield* run(() => page.goto(`${url}/ui/sessions/${sessionId}`))
    yield* run(() =>
      page.locator("[data-gauge=model_calls_burst][data-level=hit]").waitFor({ state: "attached", timeout: 60_000 })
    )
    expect(yield* run(() => page.textContent("#exit"))).toBe("burst_limit")
    const levels = yield* run(() =>
      page.$$eval(".gauge", (nodes) => nodes.map((n) => [n.getAttribute("data-gauge"), n.getAttribute("data-level")]))
    )
    expect(levels.filter(([, level]) => level === "hit")).toEqual([["model_calls_burst", "hit"]])
    expect(yield* run(() => page.textContent("[data-gauge=model_calls_burst] .numbers"))).toContain("3 / 3")
    // Three identical calls with the same result: past the repeat warning (2), short of the halt (4).
    expect(levels).toContainEqual(["repeats", "near"])

    // The waterfall: alpha's failed attempts with their kinds, the 1 s wait before the retry, the failover arrow.
    const attempts = yield* run(() =>
      page.$$eval(
        "svg.waterfall rect.attempt",
        (nodes) => nodes.map((n) => `${n.getAttribute("data-provider")}:${n.getAttribute("data-outcome")}`)
      )
    )
    expect(attempts.slice(0, 3)).toEqual(["alpha:server", "alpha:rate_limit", "beta:ok"])
    const wait = page.locator("svg.waterfall rect[data-wait=retry][data-provider=alpha]")
    expect(yield* run(() => wait.count())).toBe(1)
    expect(yield* run(() => wait.locator("title").textContent())).toContain("waits 1.0 s (Retry-After 1.0 s)")
    const arrow = page.locator("svg.waterfall line.failover[data-from=alpha][data-to=beta]")
    expect(yield* run(() => arrow.count())).toBe(1)
    expect(yield* run(() => page.locator("svg.waterfall line[data-marker=exit]").count())).toBe(1)
    expect(yield* run(() => page.locator("svg.waterfall line[data-marker=repeat]").count())).toBeGreaterThan(0)
    yield* run(() => page.screenshot({ path: join(artifacts, `session-${label}.png`), fullPage: true }))
    // The top of the page (the session, its gauges and the waterfall): the picture in the README.
    yield* run(() => page.screenshot({ path: join(artifacts, `session-top-${label}.png`) }))

    // A demo session whose write waits for a person: the operations page lists it with its age.
    const waiting = yield* call("POST", "/v1/sessions?wait=true", {
      agentId: "demo",
      scope: "demo:ops",
      prompt: "Please fix checkout"
    })
    expect(waiting.body.exitReason).toBe("confirmation_pending")

    // The operations page: alpha throttled with its gate's release time, beta healthy, the MCP server down.
    yield* run(() => page.goto(`${url}/ui/ops`))
    yield* run(() =>
      page.locator("tr[data-provider=alpha][data-state=throttled]").waitFor({ state: "attached", timeout: 20_000 })
    )
    expect(yield* run(() => page.textContent("tr[data-provider=alpha]"))).toMatch(/throttled until .* more/)
    expect(yield* run(() => page.getAttribute("tr[data-provider=beta]", "data-state"))).toBe("healthy")
    yield* run(() =>
      page.locator("tr[data-server=tickets][data-state=down]").waitFor({ state: "attached", timeout: 20_000 })
    )
    expect((yield* run(() => page.textContent("tr[data-server=tickets] td.error"))) ?? "").not.toBe("")
    yield* run(() => page.locator("[data-reason=burst_limit]").waitFor({ state: "attached", timeout: 20_000 }))
    yield* run(() => page.locator("#approvals tr[data-call]").waitFor({ state: "attached", timeout: 20_000 }))
    expect(yield* run(() => page.textContent("#approvals"))).toMatch(/demo_restart.*\d+ s$/)
    expect(yield* run(() => page.textContent("#approvals-count"))).toBe("1")
    expect(Number(yield* run(() => page.textContent("#actors")))).toBeGreaterThanOrEqual(1)
    expect(yield* run(() => page.textContent("#append"))).toMatch(/ms|s/)
    expect(yield* run(() => page.textContent("#error"))).toBe("")
    yield* run(() => page.screenshot({ path: join(artifacts, `ops-${label}.png`), fullPage: true }))
    // The session list, with the session in it.
    yield* run(() => page.goto(`${url}/ui`))
    yield* run(() => page.locator("#sessions tr", { hasText: "burst_limit" }).waitFor({ timeout: 20_000 }))
    yield* run(() => page.screenshot({ path: join(artifacts, `sessions-${label}.png`), fullPage: true }))
    expect(errors).toEqual([])
    // The fake providers saw what the waterfall says: two attempts at alpha, then beta.
    expect(alpha.count()).toBe(2)
    expect(beta.count()).toBeGreaterThanOrEqual(3)
  })

describe("the viewer shows the rails", () => {
  const title = "a session that retries, fails over and ends on a ceiling: red gauge, wait and arrow in the " +
    "waterfall; the operations page shows the throttled provider and the down MCP server"
  if (!available) {
    it.skip(`${title} — skipped: no Chromium at ${executablePath} (install Debian's \`chromium\` to run it)`, () =>
      Effect.void)
    return
  }

  it.live(`${title} (embedded PGlite)`, () =>
    Effect.gen(function*() {
      const dataDir = mkdtempSync(join(tmpdir(), "corral-rails-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dataDir, { recursive: true, force: true })))
      yield* scenario({ _tag: "Embedded", dataDir }, "embedded")
    }).pipe(Effect.scoped), { timeout: 180_000 })

  it.live.skipIf(testDatabaseUrl === undefined)(
    `${title} (Postgres)${testDatabaseUrl === undefined ? ` — ${skipReason}` : ""}`,
    () =>
      Effect.gen(function*() {
        const admin = yield* Layer.build(Database.layerPostgres(Redacted.make(testDatabaseUrl!), { maxConnections: 1 }))
        const sql = yield* Effect.provide(SqlClient.SqlClient, admin)
        const name = `corral_rails_${randomUUID().replaceAll("-", "").slice(0, 12)}`
        yield* sql`CREATE DATABASE ${sql(name)}`
        yield* Effect.addFinalizer(() => sql`DROP DATABASE IF EXISTS ${sql(name)} WITH (FORCE)`.pipe(Effect.ignore))
        const url = new URL(testDatabaseUrl!)
        url.pathname = `/${name}`
        yield* scenario({ _tag: "Postgres", url: Redacted.make(url.toString()), maxConnections: 5 }, "postgres")
      }).pipe(Effect.scoped),
    { timeout: 180_000 }
  )
})
