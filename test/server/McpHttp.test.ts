/**
 * Corral as an MCP server over Streamable HTTP at `/mcp`, seen by an MCP host (the SDK's own Client) against the
 * real bundled server: the principal's agents as `run_<agent>` tools, a run landing with its report and exit reason
 * and progress per turn, approvals through elicitation and through the token, sessions as resources, completion,
 * and the front door (bearer keys, Origin, malformed bodies, session ids).
 */
import { expect, layer } from "@effect/vitest"
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { sha256 } from "../../src/server/Authentication.js"
import * as Server from "../../src/server/Server.js"
import { call, http, initialize, mcpHeaders, textOf } from "../support/McpHost.js"
import { baseUrl, client, eventually, raw, settings } from "../support/ServerHarness.js"

const aliceKey = "ck_alice_mcp_0123456789"
const malloryKey = "ck_mallory_mcp_9876543210"

const keyed = settings({
  apiKeys: [
    { sha256: sha256(aliceKey), orgId: "acme", userId: "alice" },
    { sha256: sha256(malloryKey), orgId: "evil", userId: "mallory" }
  ]
})

const mcpUrl = Effect.map(baseUrl, (url) => `${url}/mcp`)

/** A second agent, published into acme only. */
const triage = {
  id: "triage",
  version: 1,
  name: "Triage",
  description: "Triage an incident on canned data.",
  instructions: "Investigate the incident.",
  tier: "demo",
  tools: ["demo_status", "demo_logs"]
}

layer(Server.layer(keyed), { excludeTestServices: true, timeout: "90 seconds" })("MCP over Streamable HTTP", (it) => {
  it.scoped("lists run_<agent> for the principal's org only, with the approve tool", () =>
    Effect.gen(function*() {
      const api = yield* client(aliceKey)
      yield* api.agents.publishAgent({ payload: triage })
      const url = yield* mcpUrl
      const alice = yield* http(url, aliceKey)
      const mallory = yield* http(url, malloryKey)
      const names = (tools: ReadonlyArray<{ name: string }>) => tools.map((t) => t.name)
      const ofAlice = yield* Effect.promise(() => alice.client.listTools())
      expect(names(ofAlice.tools)).toEqual(["run_demo", "run_triage", "approve"])
      const run = ofAlice.tools.find((t) => t.name === "run_triage")!
      expect(run.title).toBe("Triage")
      expect(run.inputSchema.required).toEqual(["scope", "prompt"])
      expect(run.outputSchema?.properties).toHaveProperty("exitReason")
      expect(names((yield* Effect.promise(() => mallory.client.listTools())).tools)).toEqual(["run_demo", "approve"])
      // Another org's agent is not callable either: an unknown tool is a JSON-RPC error.
      const refused = yield* Effect.flip(
        Effect.tryPromise(() => mallory.client.callTool({ name: "run_triage", arguments: { scope: "s", prompt: "p" } }))
      )
      expect(String(refused.error)).toMatch(/-32602.*Unknown tool: run_triage/)
    }))

  it.scoped("tells the org's connected hosts that the tool list changed when an agent is published", () =>
    Effect.gen(function*() {
      const url = yield* mcpUrl
      const alice = yield* http(url, aliceKey)
      const mallory = yield* http(url, malloryKey)
      expect(alice.client.getServerCapabilities()?.tools).toEqual({ listChanged: true })
      const heard = { alice: 0, mallory: 0 }
      alice.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void heard.alice++)
      mallory.client.setNotificationHandler(ToolListChangedNotificationSchema, () => void heard.mallory++)
      const api = yield* client(aliceKey)
      yield* api.agents.publishAgent({ payload: { ...triage, id: "announced", name: "Announced" } })
      yield* eventually("the host to hear of the change", Effect.sync(() => heard.alice > 0 || undefined))
      const tools = (yield* Effect.promise(() => alice.client.listTools())).tools.map((t) => t.name)
      expect(tools).toContain("run_announced")
      // Another org's host is told nothing (its list did not change): a publication of its own reaches it.
      yield* Effect.flatMap(
        client(malloryKey),
        (evil) => evil.agents.publishAgent({ payload: { ...triage, id: "evil-only", name: "Evil" } })
      )
      yield* eventually(
        "mallory's host to hear of its own org's change",
        Effect.sync(() => heard.mallory > 0 || undefined)
      )
      expect(heard.mallory).toBe(1)
    }))

  it.scoped("runs an agent to its landing: the report and exit reason as structured content, progress per turn", () =>
    Effect.gen(function*() {
      const host = yield* http(yield* mcpUrl, aliceKey)
      const progress: Array<{ progress: number; message?: string | undefined }> = []
      const result = yield* call(host, "run_demo", { scope: "incident:MCP-1", prompt: "Why is checkout failing?" }, {
        onProgress: (p) => progress.push(p)
      })
      expect(result.isError).toBe(false)
      const out = result.structuredContent!
      expect(out["exitReason"]).toBe("completed")
      expect(out["status"]).toBe("idle")
      expect(out["landed"]).toBe(true)
      expect(out["scope"]).toBe("incident:MCP-1")
      expect((out["report"] as { summary: string }).summary).toMatch(/connection pool of checkout is exhausted/)
      expect(out["resource"]).toBe(`corral://sessions/${out["sessionId"]}`)
      expect(result.content[0]?.text).toMatch(/exit completed/)
      expect(result.content[1]).toMatchObject({ type: "resource_link", uri: out["resource"] })
      // One notification per persisted turn: user, assistant → demo_status, results, assistant → demo_logs, …
      expect(progress.length).toBeGreaterThanOrEqual(5)
      expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1))
      expect(progress[0]?.message).toMatch(/^turn 1 · user: Why is checkout failing\?/)
      expect(progress.some((p) => /assistant: .*→ demo_logs/.test(p.message ?? ""))).toBe(true)
    }))

  it.scoped("asks for a write's approval through elicitation, showing the exact call, and runs it once approved", () =>
    Effect.gen(function*() {
      const host = yield* http(yield* mcpUrl, aliceKey, {
        elicit: () => ({ action: "accept", content: { decision: "approve" } })
      })
      const result = yield* call(host, "run_demo", { scope: "incident:MCP-2", prompt: "Checkout fails: fix it." })
      expect(host.elicited).toHaveLength(1)
      expect(host.elicited[0]?.message).toMatch(
        /write tool "demo_restart" with these arguments:\n\{"service":"checkout"\}/
      )
      expect(host.elicited[0]).toMatchObject({ requestedSchema: { required: ["decision"] } })
      const out = result.structuredContent!
      expect(out["exitReason"]).toBe("completed")
      expect(out["pending"]).toEqual([])
      expect((out["report"] as { summary: string }).summary).toMatch(/the service was restarted/)
    }))

  it.scoped("a host that declines the elicitation rejects the write; the agent is told it did not run", () =>
    Effect.gen(function*() {
      const host = yield* http(yield* mcpUrl, aliceKey, { elicit: () => ({ action: "decline" }) })
      const result = yield* call(host, "run_demo", { scope: "incident:MCP-3", prompt: "Checkout fails: fix it." })
      expect(host.elicited).toHaveLength(1)
      expect(result.structuredContent?.["exitReason"]).toBe("completed")
      expect((result.structuredContent?.["report"] as { summary: string }).summary).not.toMatch(/restarted/)
    }))

  it.scoped("without elicitation the answer carries the approval token, and the approve tool decides with it", () =>
    Effect.gen(function*() {
      const host = yield* http(yield* mcpUrl, aliceKey)
      const waiting = yield* call(host, "run_demo", { scope: "incident:MCP-4", prompt: "Checkout fails: fix it." })
      const out = waiting.structuredContent!
      expect(out["status"]).toBe("awaiting_confirmation")
      expect(out["exitReason"]).toBe("confirmation_pending")
      expect(waiting.isError).toBe(false)
      const pending = out["pending"] as ReadonlyArray<{ tool: string; arguments: string; token: string }>
      expect(pending).toHaveLength(1)
      expect(pending[0]).toMatchObject({ tool: "demo_restart", arguments: "{\"service\":\"checkout\"}" })
      expect(pending[0]?.token).toMatch(/.{16,}/)
      expect(waiting.content[0]?.text).toMatch(
        /waiting for approval: demo_restart\(\{"service":"checkout"\}\) — token /
      )
      expect(waiting.content[0]?.text).toMatch(/`approve` tool .* POST \/v1\/sessions\/.*\/approvals/)

      // A wrong token is refused, saying why; the write still waits.
      const wrong = yield* call(host, "approve", { sessionId: out["sessionId"], token: "nope", decision: "approve" })
      expect(wrong.isError).toBe(true)
      const approved = yield* call(host, "approve", {
        sessionId: out["sessionId"],
        token: pending[0]!.token,
        decision: "approve"
      })
      expect(approved.structuredContent?.["exitReason"]).toBe("completed")
      expect((approved.structuredContent?.["report"] as { summary: string }).summary).toMatch(/restarted/)
    }))

  it.scoped("tells a bad argument as a tool error naming the field", () =>
    Effect.gen(function*() {
      const host = yield* http(yield* mcpUrl, aliceKey)
      const missing = yield* call(host, "run_demo", { prompt: "Why?" })
      expect(missing.isError).toBe(true)
      expect(missing.content[0]?.text).toMatch(/scope/)
      const extra = yield* call(host, "run_demo", { scope: "s", prompt: "Why?", model: "gpt" })
      expect(extra.content[0]?.text).toBe("unknown argument: model (expected scope, prompt)")
    }))

  it.scoped("serves sessions and agents as resources, with templates and completion; another org sees none of them", () =>
    Effect.gen(function*() {
      const url = yield* mcpUrl
      const host = yield* http(url, aliceKey)
      const ran = yield* call(host, "run_demo", { scope: "incident:MCP-5", prompt: "Why is payments failing?" })
      const id = ran.structuredContent!["sessionId"] as string
      const uri = `corral://sessions/${id}`
      const listed = yield* Effect.promise(() => host.client.listResources())
      expect(listed.resources.map((r) => r.uri)).toEqual(expect.arrayContaining([uri, "corral://agents/demo"]))
      const templates = yield* Effect.promise(() => host.client.listResourceTemplates())
      expect(templates.resourceTemplates.map((t) => t.uriTemplate)).toEqual([
        "corral://sessions/{id}",
        "corral://agents/{agent}"
      ])
      const read = yield* Effect.promise(() => host.client.readResource({ uri }))
      expect(read.contents.map((c) => c.uri)).toEqual([uri, `${uri}/transcript`])
      const session = JSON.parse(textOf(read.contents[0]))
      expect(session).toMatchObject({ id, status: "idle", exitReason: "completed", scope: "incident:MCP-5" })
      const turns = JSON.parse(textOf(read.contents[1])) as ReadonlyArray<{ entry: { kind: string } }>
      expect(turns[0]?.entry.kind).toBe("user")
      const report = yield* Effect.promise(() => host.client.readResource({ uri: `${uri}/report` }))
      expect(JSON.parse(textOf(report.contents[0]))).toMatchObject({ exitReason: "completed" })

      const completion = yield* Effect.promise(() =>
        host.client.complete({
          ref: { type: "ref/resource", uri: "corral://sessions/{id}" },
          argument: { name: "id", value: id.slice(0, 8) }
        })
      )
      expect(completion.completion.values).toContain(id)
      const agents = yield* Effect.promise(() =>
        host.client.complete({
          ref: { type: "ref/resource", uri: "corral://agents/{agent}" },
          argument: { name: "agent", value: "tr" }
        })
      )
      expect(agents.completion.values).toEqual(["triage"])

      const mallory = yield* http(url, malloryKey)
      const hidden = yield* Effect.flip(Effect.tryPromise(() => mallory.client.readResource({ uri })))
      expect(String(hidden.error)).toMatch(/-32002.*Resource not found/)
      const theirs = yield* Effect.promise(() => mallory.client.listResources())
      expect(theirs.resources.map((r) => r.uri)).not.toContain(uri)
    }))

  it.scoped("a subscribed session resource sends an update per new turn and landing; unknown URIs are refused", () =>
    Effect.gen(function*() {
      const host = yield* http(yield* mcpUrl, aliceKey)
      const waiting = yield* call(host, "run_demo", { scope: "incident:MCP-8", prompt: "Checkout fails: fix it." })
      const id = waiting.structuredContent!["sessionId"] as string
      const token = (waiting.structuredContent!["pending"] as ReadonlyArray<{ token: string }>)[0]!.token
      const uri = `corral://sessions/${id}`
      const updates: Array<string> = []
      const { ResourceUpdatedNotificationSchema } = yield* Effect.promise(() =>
        import("@modelcontextprotocol/sdk/types.js")
      )
      host.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
        updates.push(n.params.uri)
      })
      yield* Effect.promise(() => host.client.subscribeResource({ uri }))
      // A person approves over the HTTP API: the resumed burst's turns reach the subscriber.
      const api = yield* client(aliceKey)
      yield* api.sessions.decide({ path: { id }, payload: { token, decision: "approve" }, urlParams: { wait: true } })
      yield* eventually("resource updates", Effect.sync(() => updates.length >= 2 ? updates : undefined))
      expect(new Set(updates)).toEqual(new Set([uri]))
      yield* Effect.promise(() => host.client.unsubscribeResource({ uri }))
      const unknown = yield* Effect.flip(
        Effect.tryPromise(() => host.client.subscribeResource({ uri: "test://watched-resource" }))
      )
      expect(String(unknown.error)).toMatch(/-32002.*Resource not found: test:\/\/watched-resource/)
    }))

  it.scoped("answers ping, and sends log notifications at or above the level the host set", () =>
    Effect.gen(function*() {
      const host = yield* http(yield* mcpUrl, aliceKey)
      expect(yield* Effect.promise(() => host.client.ping())).toEqual({})
      const logs: Array<{ level: string; data: unknown }> = []
      const { LoggingMessageNotificationSchema } = yield* Effect.promise(() =>
        import("@modelcontextprotocol/sdk/types.js")
      )
      host.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
        logs.push(n.params)
      })
      yield* Effect.promise(() => host.client.setLoggingLevel("warning"))
      yield* call(host, "run_demo", { scope: "incident:MCP-6", prompt: "Why is search failing?" })
      expect(logs).toEqual([])
      yield* Effect.promise(() => host.client.setLoggingLevel("info"))
      yield* call(host, "run_demo", { scope: "incident:MCP-7", prompt: "Why is search failing?" })
      expect(logs.map((l) => String(l.data))).toEqual(expect.arrayContaining([
        expect.stringMatching(/^session ses_\w+ started \(agent demo v1\)$/),
        expect.stringMatching(/the burst ended: completed$/)
      ]))
    }))

  it.effect("refuses a missing or wrong bearer key with 401, and another site's Origin with 403", () =>
    Effect.gen(function*() {
      const url = yield* mcpUrl
      const none = yield* raw(url, { method: "POST", body: initialize, headers: mcpHeaders })
      expect(none.status).toBe(401)
      expect(none.headers["www-authenticate"]).toBe("Bearer")
      expect(JSON.parse(none.text)).toMatchObject({ jsonrpc: "2.0", error: { message: /missing API key/ } })
      const wrong = yield* raw(url, {
        method: "POST",
        body: initialize,
        headers: { ...mcpHeaders, authorization: "Bearer ck_guess" }
      })
      expect(wrong.status).toBe(401)
      expect(JSON.parse(wrong.text).error.message).toBe("unknown API key")
      const evil = yield* raw(url, {
        method: "POST",
        body: initialize,
        headers: { ...mcpHeaders, authorization: `Bearer ${aliceKey}`, origin: "https://evil.example.com" }
      })
      expect(evil.status).toBe(403)
      expect(JSON.parse(evil.text).error.message).toMatch(/Origin "https:\/\/evil.example.com" is not allowed/)
    }))

  it.effect("answers a malformed body with a JSON-RPC parse error, an unknown session with 404, and keeps serving", () =>
    Effect.gen(function*() {
      const url = yield* mcpUrl
      const headers = { ...mcpHeaders, authorization: `Bearer ${aliceKey}` }
      for (const body of ["{\"jsonrpc\":\"2.0\",\"id\":1,", "\u0000\u00ff not json", "[1,2"]) {
        const answer = yield* raw(url, { method: "POST", body, headers })
        expect(answer.status).toBe(400)
        expect(JSON.parse(answer.text)).toMatchObject({ jsonrpc: "2.0", error: { code: -32700 }, id: null })
      }
      const notJsonRpc = yield* raw(url, { method: "POST", body: "{\"hello\":1}", headers })
      expect(notJsonRpc.status).toBe(400)
      expect(JSON.parse(notJsonRpc.text).error.message).toMatch(/initialize/)
      const stale = yield* raw(url, {
        method: "POST",
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
        headers: { ...headers, "mcp-session-id": "no-such-session" }
      })
      expect(stale.status).toBe(404)
      expect(JSON.parse(stale.text).error.message).toMatch(/Session not found/)
      const fine = yield* raw(url, { method: "POST", body: initialize, headers })
      expect(fine.status).toBe(200)
      expect(fine.headers["mcp-session-id"]).toMatch(/^[0-9a-f-]{36}$/)
      // A session is bound to the key's principal: another org's key cannot use (or learn of) it.
      const borrowed = yield* raw(url, {
        method: "POST",
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
        headers: {
          ...mcpHeaders,
          authorization: `Bearer ${malloryKey}`,
          "mcp-session-id": fine.headers["mcp-session-id"]!
        }
      })
      expect(borrowed.status).toBe(404)
      // DELETE closes the session: its id is unknown afterwards.
      const id = fine.headers["mcp-session-id"]!
      const closed = yield* raw(url, { method: "DELETE", headers: { ...headers, "mcp-session-id": id } })
      expect(closed.status).toBe(200)
      const gone = yield* raw(url, {
        method: "POST",
        body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" }),
        headers: { ...headers, "mcp-session-id": id }
      })
      expect(gone.status).toBe(404)
    }))
})
