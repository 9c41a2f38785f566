/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance 0.1.16), every server scenario of its active
 * suite, against `/mcp` of a real bundled server without API keys (the suite's client sends none; it also tests the
 * DNS-rebinding protection of such a local server). The scenarios that test fixtures of the reference server are
 * listed, with the reason, in scripts/conformance/server-expected-failures.yml: the CLI fails the run on any other
 * failure AND on a listed scenario that starts passing, so the list stays exact. The CLI runs on Node 20 through the
 * `globSync` hook (scripts/conformance/globsync.mjs).
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as Server from "../../src/server/Server.js"
import { baseUrl, settings } from "../support/ServerHarness.js"

const root = fileURLToPath(new URL("../../", import.meta.url))
const cli = path.join(root, "node_modules/@modelcontextprotocol/conformance/dist/index.js")
const hook = path.join(root, "scripts/conformance/globsync.mjs")
const baseline = path.join(root, "scripts/conformance/server-expected-failures.yml")

/** The scenarios that apply to any MCP server with Corral's capabilities: each must pass every check. */
const applicable = [
  "server-initialize",
  "logging-set-level",
  "ping",
  "completion-complete",
  "tools-list",
  "server-sse-multiple-streams",
  "resources-list",
  "dns-rebinding-protection"
]

const runCli = (args: ReadonlyArray<string>) =>
  Effect.promise(() =>
    new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, ["--import", hook, cli, ...args], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
      child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")))
      const timer = setTimeout(() => child.kill("SIGKILL"), 90_000)
      child.on("exit", (code) => {
        clearTimeout(timer)
        resolve({ code, output })
      })
    })
  )

/** Every check of every scenario the run saved under `dir`: scenario → statuses. */
const checksIn = (dir: string): Record<string, ReadonlyArray<{ id: string; status: string }>> =>
  Object.fromEntries(
    readdirSync(dir).map((entry) => {
      const scenario = /^server-(.*)-\d{4}-\d\d-\d\dT/.exec(entry)?.[1] ?? entry
      return [scenario, JSON.parse(readFileSync(path.join(dir, entry, "checks.json"), "utf8"))]
    })
  )

// The default bounds: the suite runs its ~30 scenarios as one org, and a scenario that fails (the fixture ones, listed)
// never closes its client, so its `GET /mcp` stream stays open until the CLI exits. Past 20 such sessions, newcomers
// take the place of the oldest listener (internal/admission); were listeners never closed, the later scenarios would
// be refused (429).
layer(Server.layer(settings()), { excludeTestServices: true, timeout: "120 seconds" })(
  "MCP conformance",
  (it) => {
    it.effect(
      "passes every server scenario that applies; the rest are exactly the listed fixture scenarios",
      () =>
        Effect.gen(function*() {
          const url = `${yield* baseUrl}/mcp`
          const out = mkdtempSync(path.join(tmpdir(), "corral-conformance-"))
          const run = yield* runCli(["server", "--url", url, "--expected-failures", baseline, "-o", out])
          expect(run.output).toMatch(/Running active suite \(\d+ scenarios\)/)
          if (run.code !== 0) expect.fail(`the conformance run failed (exit ${run.code}):\n${run.output.slice(-4000)}`)
          const checks = checksIn(out)
          for (const scenario of applicable) {
            const statuses = checks[scenario]?.filter((c) => c.status !== "INFO").map((c) => `${c.id}: ${c.status}`)
            expect(statuses, scenario).toBeDefined()
            expect(statuses!.length, scenario).toBeGreaterThan(0)
            expect(statuses!.every((s) => s.endsWith("SUCCESS")), `${scenario}: ${statuses!.join(", ")}`).toBe(true)
          }
        }),
      { timeout: 120_000 }
    )
  }
)
