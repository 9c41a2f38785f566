/**
 * `/mcp` shared by several orgs (issue 42, item 3): places are held per org, so one org that opens sessions and
 * never ends them — raw `initialize` calls, or SDK clients whose `close()` sends no DELETE — recycles its own places
 * and never locks another org out. Against the real bundled server with API keys, over real HTTP, with the default
 * bounds (20 per org, 100 in all, 10 minutes of idleness), and with a small global backstop.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Config from "../../src/config/Config.js"
import { sha256 } from "../../src/server/Authentication.js"
import * as McpHttp from "../../src/server/mcp/Http.js"
import * as Server from "../../src/server/Server.js"
import { http, initialize, mcpHeaders } from "../support/McpHost.js"
import type { Host } from "../support/McpHost.js"
import { baseUrl, eventually, raw, settings } from "../support/ServerHarness.js"

const keys = {
  alice: "ck_orgs_alice_0123456789",
  ann: "ck_orgs_ann_0123456789",
  bob: "ck_orgs_bob_0123456789",
  carol: "ck_orgs_carol_0123456789"
}

const apiKeys = [
  { sha256: sha256(keys.alice), orgId: "acme", userId: "alice" },
  { sha256: sha256(keys.ann), orgId: "acme", userId: "ann" },
  { sha256: sha256(keys.bob), orgId: "bravo", userId: "bob" },
  { sha256: sha256(keys.carol), orgId: "cargo", userId: "carol" }
]

const mcpUrl = Effect.map(baseUrl, (url) => `${url}/mcp`)

const bearer = (key: string) => ({ ...mcpHeaders, authorization: `Bearer ${key}` })

/** A raw `initialize` with `key`: its status, session id and error message. */
const open = (url: string, key: string) =>
  Effect.map(raw(url, { method: "POST", body: initialize, headers: bearer(key) }), (r) => ({
    status: r.status,
    id: r.headers["mcp-session-id"],
    retryAfter: r.headers["retry-after"],
    message: r.status === 200 ? undefined : (JSON.parse(r.text) as { error: { message: string } }).error.message
  }))

/** `tools/list` on session `id` with `key`: the status and the error message. */
const list = (url: string, key: string, id: string) =>
  Effect.map(
    raw(url, {
      method: "POST",
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      headers: { ...bearer(key), "mcp-session-id": id }
    }),
    (r) => ({
      status: r.status,
      message: r.status === 200 ? undefined : (JSON.parse(r.text) as { error: { message: string } }).error.message
    })
  )

/** Org B is served: an SDK host connects, lists its tools, and leaves (scoped). */
const served = (url: string, key: string) =>
  Effect.scoped(Effect.gen(function*() {
    const host = yield* http(url, key)
    const tools = yield* Effect.promise(() => host.client.listTools())
    expect(tools.tools.map((t) => t.name)).toContain("run_demo")
  }))

layer(Server.layer(settings({ apiKeys })), { excludeTestServices: true, timeout: "120 seconds" })(
  "MCP sessions per org, default bounds",
  (it) => {
    it.effect("120 initialize calls of one org, never closed, leave it 20 places and another org served", () =>
      Effect.gen(function*() {
        const url = yield* mcpUrl
        const mcp = yield* McpHttp.McpHttp
        const opened: Array<{ status: number; id: string | undefined }> = []
        for (let i = 0; i < 120; i++) opened.push(yield* open(url, i % 2 === 0 ? keys.alice : keys.ann))
        expect(opened.filter((o) => o.status !== 200)).toEqual([])
        expect(mcp.sessions()).toBe(McpHttp.defaults.maxSessionsPerOrg)
        // The oldest were closed to make room, and their host is told why; the newest still answer.
        const first = yield* list(url, keys.alice, opened[0]!.id!)
        expect(first.status).toBe(404)
        expect(first.message).toMatch(
          /closed to make room for a new session \(its org acme is at 20 sessions \(server\.mcp\.maxSessionsPerOrg\)/
        )
        expect((yield* list(url, keys.ann, opened[119]!.id!)).status).toBe(200)
        // Another org is served while acme holds all its places.
        yield* served(url, keys.bob)
        expect((yield* open(url, keys.bob)).status).toBe(200)
      }))

    it.scoped("an org whose 20 hosts hold their streams open and never close makes room from its oldest listener", () =>
      Effect.gen(function*() {
        const url = yield* mcpUrl
        const mcp = yield* McpHttp.McpHttp
        // 20 SDK hosts of acme, each holding its GET /mcp stream open and never closed (as a host that fails between
        // connect and close leaves it): listeners, not busy.
        const hosts: Array<Host> = []
        for (let i = 0; i < McpHttp.defaults.maxSessionsPerOrg; i++) {
          hosts.push(yield* http(url, keys.alice))
          // Its stream is opened after the connection returns.
          yield* eventually(
            "the host's stream to be open",
            Effect.sync(() => mcp.listeningSessions() + mcp.busySessions() > i ? true : undefined)
          )
        }
        expect(mcp.busySessions()).toBe(0)
        const before = mcp.sessions()
        // A 21st host of acme is served: the least recently used listener (the first host) is closed for it.
        yield* served(url, keys.ann)
        expect(mcp.sessions()).toBe(before)
        const first = yield* Effect.promise(() => hosts[0]!.client.listTools().then(() => "answered", String))
        expect(first).toMatch(/404|Session not found|closed to make room/)
        expect(yield* Effect.promise(() => hosts[1]!.client.listTools().then(() => "answered", String))).toBe(
          "answered"
        )
        // Another org is served throughout.
        yield* served(url, keys.bob)
      }))
  }
)

// A small backstop: 4 sessions in all, 3 per org.
const backstop = settings({
  apiKeys,
  server: { ...Config.defaults.server, mcp: { maxSessions: 4, maxSessionsPerOrg: 3 } }
})

layer(Server.layer(backstop), { excludeTestServices: true, timeout: "60 seconds" })(
  "MCP sessions at the global backstop",
  (it) => {
    it.effect("a newcomer closes the least recently used idle session of the org holding the most, never a smaller org's", () =>
      Effect.gen(function*() {
        const url = yield* mcpUrl
        const mcp = yield* McpHttp.McpHttp
        const acme = [yield* open(url, keys.alice), yield* open(url, keys.alice), yield* open(url, keys.alice)]
        const bravo = yield* open(url, keys.bob)
        expect([...acme, bravo].map((o) => o.status)).toEqual([200, 200, 200, 200])
        expect(mcp.sessions()).toBe(4)
        // cargo's first session: the server is full; acme holds the most, its oldest makes room.
        expect((yield* open(url, keys.carol)).status).toBe(200)
        const gone = yield* list(url, keys.alice, acme[0]!.id!)
        expect(gone.status).toBe(404)
        expect(gone.message).toMatch(
          /the server is at 4 sessions \(server\.mcp\.maxSessions\) .* org acme, which holds the most/
        )
        // bravo's second: acme (2) still holds more than bravo (1): acme's next oldest makes room, not bravo's own.
        expect((yield* open(url, keys.bob)).status).toBe(200)
        expect((yield* list(url, keys.alice, acme[1]!.id!)).status).toBe(404)
        expect((yield* list(url, keys.bob, bravo.id!)).status).toBe(200)
        expect((yield* list(url, keys.alice, acme[2]!.id!)).status).toBe(200)
        expect(mcp.sessions()).toBe(4)
      }))
  }
)
