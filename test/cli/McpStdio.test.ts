/**
 * `corral mcp` — Corral as an MCP server over stdio, driven by the SDK's own Client through a spawned `corral mcp`
 * process (the way Claude Desktop or an IDE runs it): the agents as tools, a run landing with progress, a write
 * approved through elicitation, a cancelled call, stdout carrying nothing but the protocol, and the end of stdin
 * ending the process.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { call, stdio, textOf } from "../support/McpHost.js"
import { bin, corralRun, eventually } from "../support/ServerHarness.js"

/** An empty configuration file, so no corral.json of the developer's is read. */
const config = path.join(mkdtempSync(path.join(tmpdir(), "corral-mcp-")), "corral.json")
writeFileSync(config, "{}")

/** A local Corral in memory with a quick demo model. */
const env = (delayMs: number) => ({
  CORRAL_CONFIG: config,
  CORRAL_STORE: "memory",
  CORRAL_DEMO: "true",
  CORRAL_DEMO_DELAY_MS: String(delayMs)
})

describe("corral mcp (stdio)", () => {
  it.scopedLive(
    "runs an agent with progress, approves a write through elicitation, and keeps stdout to the protocol",
    () =>
      Effect.gen(function*() {
        const host = yield* stdio([], env(20), {
          elicit: () => ({ action: "accept", content: { decision: "approve" } })
        })
        const protocolErrors: Array<string> = []
        host.client.onerror = (error) => protocolErrors.push(String(error))
        const tools = yield* Effect.promise(() => host.client.listTools())
        expect(tools.tools.map((t) => t.name)).toEqual(["run_demo", "approve"])

        const progress: Array<string> = []
        const ran = yield* call(host, "run_demo", { scope: "incident:S-1", prompt: "Why is checkout failing?" }, {
          onProgress: (p) => progress.push(p.message ?? "")
        })
        expect(ran.structuredContent?.["exitReason"]).toBe("completed")
        expect(progress[0]).toMatch(/^turn 1 · user: Why is checkout failing\?/)
        expect(progress.length).toBeGreaterThanOrEqual(5)

        const fixed = yield* call(host, "run_demo", { scope: "incident:S-2", prompt: "Checkout fails: fix it." })
        expect(host.elicited.map((e) => e.message)).toEqual([
          expect.stringMatching(/"demo_restart" with these arguments/)
        ])
        expect(fixed.structuredContent?.["exitReason"]).toBe("completed")
        expect((fixed.structuredContent?.["report"] as { summary: string }).summary).toMatch(/restarted/)

        const read = yield* Effect.promise(() =>
          host.client.readResource({ uri: `corral://sessions/${fixed.structuredContent?.["sessionId"]}` })
        )
        expect(JSON.parse(textOf(read.contents[0]))).toMatchObject({ exitReason: "completed", scope: "incident:S-2" })
        // Anything but JSON-RPC on stdout would have been a parse error on the client; the logs went to stderr.
        expect(protocolErrors).toEqual([])
        expect(host.stderr()).toMatch(/MCP|session/)
      }),
    { timeout: 120_000 }
  )

  it.scopedLive("a cancelled call over stdio cancels the session's burst", () =>
    Effect.gen(function*() {
      const host = yield* stdio([], env(400))
      const controller = new AbortController()
      const outcome = yield* Effect.either(Effect.tryPromise(() =>
        host.client.callTool(
          { name: "run_demo", arguments: { scope: "incident:S-3", prompt: "Why is cart failing?" } },
          undefined,
          {
            timeout: 30_000,
            onprogress: (p) => {
              if (/assistant/.test(p.message ?? "")) controller.abort("cancelled by the test")
            },
            signal: controller.signal
          }
        )
      ))
      expect(outcome._tag).toBe("Left")
      const landed = yield* eventually(
        "the cancelled session to land",
        Effect.promise(async () => {
          const listed = await host.client.listResources()
          const uri = listed.resources.find((r) => r.uri.startsWith("corral://sessions/"))?.uri
          if (uri === undefined) {
            return undefined
          }
          const session = JSON.parse(textOf((await host.client.readResource({ uri })).contents[0])) as {
            exitReason?: string
          }
          return session.exitReason
        })
      )
      expect(landed).toBe("cancelled")
    }), { timeout: 120_000 })

  it.live(
    "answers a line that is not JSON-RPC with its error and goes on; exits 0 when stdin closes, stdout all protocol",
    () =>
      Effect.promise(async () => {
        const child = spawn(process.execPath, [bin, "mcp"], {
          env: { ...process.env, ...env(20) },
          stdio: ["pipe", "pipe", "pipe"]
        })
        let out = ""
        child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
        const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
        child.stdin.write("this is not json\n{\"hello\":1}\n")
        child.stdin.write(
          JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "initialize",
            params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } }
          }) + "\n"
        )
        const deadline = Date.now() + 60_000
        while (out.split("\n").length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
        child.stdin.end()
        const timer = setTimeout(() => child.kill("SIGKILL"), 30_000)
        const code = await exited
        clearTimeout(timer)
        expect(code).toBe(0)
        const lines = out.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
        expect(lines.slice(0, 2)).toEqual([
          { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error: a line that is not JSON" } },
          { jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request: not a JSON-RPC message" } }
        ])
        expect(lines).toHaveLength(3)
        expect(lines[2]).toMatchObject({ jsonrpc: "2.0", id: 1, result: { serverInfo: { name: "corral" } } })
      }),
    { timeout: 120_000 }
  )

  it.live("refuses a subcommand it does not have with a usage error", () =>
    Effect.gen(function*() {
      const result = yield* corralRun(["mcp", "frobnicate"], env(20))
      expect(result.code).toBe(1)
      expect(result.stderr).toMatch(
        /corral mcp: unknown subcommand or argument "frobnicate"\nUsage: corral mcp \[serve\]/
      )
      expect(result.stdout).toBe("")
    }), { timeout: 120_000 })
})
