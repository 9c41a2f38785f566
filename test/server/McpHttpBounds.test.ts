/**
 * The bounds of `/mcp` on a local server (no API keys): a host that cancels its call cancels the session's burst
 * (it lands `cancelled`, transcript kept), a page reached through DNS rebinding (another `Host`) is refused, the
 * number of open MCP sessions is bounded (a new one closes the least recently used idle one), and an idle session expires (the host
 * learns it with a 404 and opens a new one). Sessions of several orgs: McpOrgs.test.ts.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import * as Config from "../../src/config/Config.js"
import * as McpHttp from "../../src/server/mcp/Http.js"
import * as Server from "../../src/server/Server.js"
import { call, http, initialize, mcpHeaders, textOf } from "../support/McpHost.js"
import { baseUrl, eventually, raw, settings } from "../support/ServerHarness.js"
import * as TcpProxy from "../support/TcpProxy.js"

const mcpUrl = Effect.map(baseUrl, (url) => `${url}/mcp`)

// A slow demo model (a cancel lands mid-run), at most 3 MCP sessions, idle ones closed after 1.5 s, an elicited
// approval waited for 300 ms: the configuration's `server.mcp` keys, as an operator sets them.
const slow = settings({
  demo: { enabled: true, delayMs: 400 },
  server: { ...Config.defaults.server, mcp: { maxSessions: 3, idleMs: 1_500, elicitationWaitMs: 300 } }
})

layer(Server.layer(slow), {
  excludeTestServices: true,
  timeout: "60 seconds"
})(
  "MCP over Streamable HTTP: bounds",
  (it) => {
    it.scoped("a cancelled call cancels the session's burst: it lands cancelled with its transcript", () =>
      Effect.gen(function*() {
        const host = yield* http(yield* mcpUrl)
        const controller = new AbortController()
        const progress: Array<string> = []
        const cancelled = yield* Effect.flip(
          Effect.tryPromise(() =>
            host.client.callTool(
              { name: "run_demo", arguments: { scope: "incident:C-1", prompt: "Why is cart failing?" } },
              undefined,
              {
                timeout: 30_000,
                onprogress: (p) => {
                  progress.push(p.message ?? "")
                  // Cancel once the agent's first reply (and its tool call) is persisted: mid-run.
                  if (/assistant/.test(p.message ?? "")) controller.abort("the person changed their mind")
                },
                signal: controller.signal
              }
            )
          )
        )
        expect(String(cancelled.error)).toMatch(/changed their mind|abort/i)
        const listed = yield* Effect.promise(() => host.client.listResources())
        const uri = listed.resources.find((r) => r.uri.startsWith("corral://sessions/"))!.uri
        const landed = yield* eventually(
          "the cancelled session to land",
          Effect.map(
            Effect.promise(() => host.client.readResource({ uri })),
            (read) => {
              const session = JSON.parse(textOf(read.contents[0])) as { status: string; exitReason?: string }
              return session.exitReason === undefined ? undefined : session
            }
          )
        )
        expect(landed).toMatchObject({ status: "idle", exitReason: "cancelled" })
        const read = yield* Effect.promise(() => host.client.readResource({ uri: `${uri}/transcript` }))
        const turns = JSON.parse(textOf(read.contents[0])) as ReadonlyArray<{ entry: { kind: string } }>
        expect(turns.map((t) => t.entry.kind).slice(0, 2)).toEqual(["user", "assistant"])
        expect(progress.length).toBeLessThan(6)
      }))

    it.scoped("a run whose stream is cut mid-call still answers: the host resumes with Last-Event-ID", () =>
      Effect.gen(function*() {
        const port = Number(new URL(yield* mcpUrl).port)
        const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port })
        const host = yield* http(`http://127.0.0.1:${proxy.port}/mcp`)
        const progress: Array<string> = []
        const running = yield* Effect.fork(
          call(host, "run_demo", { scope: "incident:C-4", prompt: "Why is auth failing?" }, {
            onProgress: (p) => progress.push(p.message ?? "")
          })
        )
        yield* eventually("the run to be under way", Effect.sync(() => progress.length >= 2 ? true : undefined))
        // Every connection through the proxy is reset (RST): the call's SSE stream dies mid-run.
        yield* proxy.set("reset")
        yield* proxy.set("pass")
        const result = yield* Fiber.join(running)
        expect(result.structuredContent).toMatchObject({ exitReason: "completed", landed: true })
        // The progress after the cut arrived too (replayed or live), numbered without a gap.
        expect(progress.length).toBeGreaterThanOrEqual(5)
        expect(progress.at(-1)).toMatch(/^turn \d+ · assistant: /)
      }))

    it.scoped("an elicited approval nobody answers times out: the write stays pending, the answer carries its token", () =>
      Effect.gen(function*() {
        const host = yield* http(yield* mcpUrl, undefined, { elicit: () => new Promise(() => {}) })
        const result = yield* call(host, "run_demo", { scope: "incident:C-2", prompt: "Cart fails: fix it." })
        expect(host.elicited).toHaveLength(1)
        const out = result.structuredContent!
        expect(out["status"]).toBe("awaiting_confirmation")
        expect((out["pending"] as ReadonlyArray<{ tool: string; token?: string }>)[0]).toMatchObject({
          tool: "demo_restart",
          token: expect.stringMatching(/.{16,}/)
        })
        expect(result.content[0]?.text).toMatch(/The approval was not answered .*: the write stays pending/)
      }))

    it.effect("refuses a request whose Host is not local (DNS rebinding) with 403, and accepts localhost", () =>
      Effect.gen(function*() {
        const url = yield* mcpUrl
        const port = new URL(url).port
        const { request } = yield* Effect.promise(() => import("undici"))
        const send = (host: string) =>
          Effect.promise(async () => {
            const response = await request(url, {
              method: "POST",
              headers: { ...mcpHeaders, host, origin: `http://${host}` },
              body: initialize
            })
            const text = await response.body.text()
            return {
              status: response.statusCode,
              body: (response.statusCode === 200 ? {} : JSON.parse(text)) as { error?: { message: string } }
            }
          })
        const evil = yield* send(`evil.example.com:${port}`)
        expect(evil.status).toBe(403)
        expect(evil.body.error?.message).toMatch(
          /Host "evil.example.com:\d+" is not allowed \(DNS rebinding protection\)/
        )
        expect((yield* send(`localhost:${port}`)).status).toBe(200)
        expect((yield* send(`127.0.0.1:${port}`)).status).toBe(200)
      }))

    it.effect("bounds the open sessions: a new one closes the least recently used idle one, and idle ones expire", () =>
      Effect.gen(function*() {
        const url = yield* mcpUrl
        const mcp = yield* McpHttp.McpHttp
        // The sessions of the tests before expire within the idle bound.
        yield* eventually("earlier sessions to expire", Effect.sync(() => mcp.sessions() === 0 ? true : undefined))
        const opened = [yield* raw(url, { method: "POST", body: initialize, headers: mcpHeaders })]
        while (opened.length < 3) {
          opened.push(yield* raw(url, { method: "POST", body: initialize, headers: mcpHeaders }))
        }
        expect(opened.map((o) => o.status)).toEqual([200, 200, 200])
        // A fourth: the server holds its 3, all idle (never closed by their host): the oldest makes room.
        const fourth = yield* raw(url, { method: "POST", body: initialize, headers: mcpHeaders })
        expect(fourth.status).toBe(200)
        expect(mcp.sessions()).toBe(3)
        const list = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" })
        const listWith = (o: { readonly headers: Readonly<Record<string, string>> }) =>
          raw(url, {
            method: "POST",
            body: list,
            headers: { ...mcpHeaders, "mcp-session-id": o.headers["mcp-session-id"]! }
          })
        const closed = yield* listWith(opened[0]!)
        expect(closed.status).toBe(404)
        expect(JSON.parse(closed.text).error.message).toMatch(
          /Session not found: it was idle and was closed to make room for a new session \(the server is at 3 sessions \(server\.mcp\.maxSessions\)/
        )
        expect((yield* listWith(opened[1]!)).status).toBe(200)
        // Idle sessions expire: an expired id is then unknown (404), and the host opens a new session.
        yield* eventually("the idle sessions to expire", Effect.sync(() => mcp.sessions() === 0 ? true : undefined))
        const expired = yield* listWith(opened[1]!)
        expect(expired.status).toBe(404)
        expect(JSON.parse(expired.text).error.message).toMatch(/Session not found: it expired or was closed/)
        expect((yield* raw(url, { method: "POST", body: initialize, headers: mcpHeaders })).status).toBe(200)
      }))
  }
)

describe("Server.mcpOptions", () => {
  it("takes the configuration's server.mcp keys, an embedder's options winning key by key", () => {
    const configured = settings({
      server: { ...Config.defaults.server, mcp: { maxSessions: 3, idleMs: 1_500, elicitationWaitMs: 300 } }
    })
    expect(Server.mcpOptions(configured)).toEqual({ maxSessions: 3, idleMs: 1_500, protocol: { approvalWaitMs: 300 } })
    expect(Server.mcpOptions(configured, { maxSessions: 9, protocol: { approvalWaitMs: 50 } })).toEqual({
      maxSessions: 9,
      idleMs: 1_500,
      protocol: { approvalWaitMs: 50 }
    })
    expect(Server.mcpOptions(settings())).toEqual({ protocol: {} })
  })
})
