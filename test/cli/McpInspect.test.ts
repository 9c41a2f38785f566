/**
 * `corral mcp inspect` as a person runs it (a child process of bin/corral.js): a stdio server given by its command
 * and a Streamable HTTP server given by its URL and a header, what each lists, what Corral would offer an agent
 * (prefixed names, effects and why, read_resource, refusals), a tool called as an agent would, and the failures.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as path from "node:path"
import { splitCommand } from "../../src/cli/McpInspect.js"
import * as McpHttpFixture from "../support/McpHttpFixture.js"
import { root } from "../support/McpServers.js"
import { corralRun } from "../support/ServerHarness.js"

const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")

describe("corral mcp inspect", () => {
  it.live(
    "inspects a stdio server: its listings, and what an agent gets under a prefix (JSON)",
    () =>
      Effect.gen(function*() {
        const run = yield* corralRun([
          "mcp",
          "inspect",
          "--command",
          `"${process.execPath}" ${EVERYTHING} stdio`,
          "--prefix",
          "ev",
          "--json"
        ])
        expect(run.code, run.stderr).toBe(0)
        const report = JSON.parse(run.stdout)
        expect(report.server).toMatchObject({
          transport: "stdio",
          state: "up",
          info: { name: "mcp-servers/everything" }
        })
        expect(report.server.capabilities).toEqual(expect.arrayContaining(["prompts", "resources", "tools"]))
        expect(report.tools.map((t: { name: string }) => t.name)).toContain("get-sum")
        expect(report.prompts.map((p: { name: string }) => p.name)).toContain("args-prompt")
        expect(report.templates.map((t: { uriTemplate: string }) => t.uriTemplate)).toContain(
          "demo://resource/dynamic/text/{resourceId}"
        )
        expect(report.resources.length).toBeGreaterThan(0)
        const offered = new Map(report.offered.map((o: { name: string }) => [o.name, o]))
        expect(offered.get("ev_get-sum")).toMatchObject({
          remote: "get-sum",
          effect: "read",
          why: "the server marks it read-only (readOnlyHint)"
        })
        expect(offered.get("ev_toggle-simulated-logging")).toMatchObject({
          effect: "write",
          why: "not marked read-only by the server: every call waits for a person's approval"
        })
        expect(offered.get("read_resource")).toMatchObject({ effect: "read" })
        expect(offered.has("get-sum")).toBe(false)
      }),
    { timeout: 120_000 }
  )

  it.scopedLive(
    "inspects a Streamable HTTP server with a header, and calls one of its tools as an agent would",
    () =>
      Effect.gen(function*() {
        const server = yield* McpHttpFixture.start({ token: "s3cret" })
        const run = yield* corralRun([
          "mcp",
          "inspect",
          server.url,
          "--header",
          "Authorization: Bearer s3cret",
          "--call",
          "echo",
          "--args",
          "{\"message\":\"hello\"}"
        ])
        expect(run.code, run.stderr).toBe(0)
        expect(run.stdout).toContain(`server     remote (http: ${server.url})`)
        expect(run.stdout).toContain("state      up")
        expect(run.stdout).toMatch(/\nCorral would offer an agent \(\d+\)\n {2}chatty +write {2}not marked read-only/)
        expect(run.stdout).toContain("\nresources (0)\n  (none)")
        expect(run.stdout).toMatch(/\ncall echo: ok\necho: hello\n$/)
      }),
    { timeout: 120_000 }
  )

  it.scopedLive("says why a server cannot be inspected, and exits 1", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ token: "s3cret" })
      const unauthorized = yield* corralRun(["mcp", "inspect", server.url, "--timeout", "10000"])
      expect(unauthorized.code).toBe(1)
      expect(unauthorized.stdout).toMatch(/state {6}down: .*HTTP 401/)
      const none = yield* corralRun(["mcp", "inspect"])
      expect(none.code).toBe(1)
      expect(none.stderr).toContain("corral mcp inspect: give exactly one of URL, --command CMD or --server NAME")
      const badPrefix = yield* corralRun(["mcp", "inspect", server.url, "--prefix", "no spaces"])
      expect(badPrefix.code).toBe(1)
      expect(badPrefix.stderr).toContain("server.remote.prefix: a tool-name prefix")
    }), { timeout: 120_000 })

  it("splits a command line on spaces, keeping quoted arguments whole", () => {
    expect(splitCommand(`npx -y "my server" 'a b' c`)).toEqual(["npx", "-y", "my server", "a b", "c"])
  })
})
