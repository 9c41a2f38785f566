/**
 * Every route of the HTTP API, through a real listening server and the client generated from the contract.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { SessionView } from "../../src/domain/Session.js"
import * as Server from "../../src/server/Server.js"
import { baseUrl, client, eventually, raw, settings } from "../support/ServerHarness.js"

const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tier: "demo",
  tools: ["demo_status", "demo_logs"]
}

const start = (scope: string, prompt = "Why is checkout failing?") => ({
  payload: { agentId: "demo", scope, prompt },
  urlParams: {}
})

const landed = (id: string) =>
  Effect.flatMap(client(), (api) =>
    eventually(
      `session ${id} to land`,
      Effect.map(
        api.sessions.getSession({ path: { id } }),
        (view): SessionView | undefined => view.status !== "running" && view.exitReason !== undefined ? view : undefined
      )
    ))

layer(Server.layer(settings({ server: { ...settings().server, bodyLimitBytes: 64 * 1024 } })), {
  excludeTestServices: true
})("HTTP API", (it) => {
  it.effect("answers the probes, the OpenAPI document, the docs page and the viewer; unknown routes are 404", () =>
    Effect.gen(function*() {
      const url = yield* baseUrl
      const api = yield* client()
      expect(yield* api.system.healthz()).toEqual({ status: "ok" })
      expect(yield* api.system.readyz()).toEqual({ status: "ready", checks: { store: "memory" } })
      const openapi = yield* raw(`${url}/openapi.json`)
      expect(openapi.status).toBe(200)
      const paths = Object.keys(JSON.parse(openapi.text).paths)
      for (
        const path of [
          "/v1/agents",
          "/v1/agents/{id}",
          "/v1/sessions",
          "/v1/sessions/{id}",
          "/v1/sessions/{id}/messages",
          "/v1/sessions/{id}/approvals",
          "/v1/sessions/{id}/cancel",
          "/v1/sessions/{id}/turns",
          "/v1/sessions/{id}/trajectory",
          "/v1/sessions/{id}/report",
          "/v1/sessions/{id}/events",
          "/healthz",
          "/readyz"
        ]
      ) expect(paths).toContain(path)
      const docs = yield* raw(`${url}/docs`)
      expect(docs.status).toBe(200)
      expect(docs.contentType).toContain("text/html")
      for (const page of ["/ui", "/ui/sessions/ses_x"]) {
        const html = yield* raw(`${url}${page}`)
        expect(html.status).toBe(200)
        expect(html.text).toContain("/ui/assets/viewer.js")
      }
      expect((yield* raw(`${url}/ui/assets/viewer.js`)).contentType).toContain("javascript")
      expect((yield* raw(`${url}/no/such/route`)).status).toBe(404)
      expect((yield* raw(`${url}/v1/sessions/x/nope`)).status).toBe(404)
    }))

  it.effect("publishes, lists and reads agents; a bad spec is a 422 naming every field", () =>
    Effect.gen(function*() {
      const api = yield* client()
      const published = yield* api.agents.publishAgent({ payload: agent })
      expect(published.id).toBe("triage")
      yield* api.agents.publishAgent({ payload: { ...agent, version: 2, name: "Triage v2" } })
      const { agents } = yield* api.agents.listAgents()
      expect(agents.map((a) => `${a.id}@${a.version}`)).toEqual(["demo@1", "triage@2"])
      expect((yield* api.agents.getAgent({ path: { id: "triage" }, urlParams: {} })).version).toBe(2)
      expect((yield* api.agents.getAgent({ path: { id: "triage" }, urlParams: { version: 1 } })).name).toBe("Triage")
      const missing = yield* Effect.flip(api.agents.getAgent({ path: { id: "nobody" }, urlParams: {} }))
      expect(missing._tag).toBe("AgentNotFound")

      const invalid = yield* Effect.flip(api.agents.publishAgent({
        payload: { id: "Bad Id", version: 0, instructions: "x", tools: ["demo_logs", "rm_rf"], tier: "gold", extra: 1 }
      }))
      expect(invalid._tag).toBe("InvalidRequest")
      if (invalid._tag !== "InvalidRequest") return
      expect(invalid.issues.map((i) => i.path)).toEqual(expect.arrayContaining(["id", "version", "name", "extra"]))
      const semantic = yield* Effect.flip(api.agents.publishAgent({
        payload: { ...agent, tools: ["demo_logs", "rm_rf"], tier: "gold", limits: { modelCallsPerBurst: 500 } }
      }))
      if (semantic._tag !== "InvalidRequest") throw new Error(`expected InvalidRequest, got ${semantic._tag}`)
      expect(semantic.issues.map((i) => i.path)).toEqual(["tools.1", "tier", "limits.modelCallsPerBurst"])
      expect(semantic.issues[0]?.message).toContain("rm_rf")
      const url = yield* baseUrl
      const status = yield* raw(`${url}/v1/agents`, {
        method: "POST",
        body: JSON.stringify({ ...agent, tools: ["nope"] }),
        headers: { "content-type": "application/json" }
      })
      expect(status.status).toBe(422)
    }))

  it.effect("starts a session (202 with links), follows it to its landing, and reads turns, trajectory, report", () =>
    Effect.gen(function*() {
      const api = yield* client()
      const accepted = yield* api.sessions.startSession(start("incident:A-1"))
      if (!("sessionId" in accepted)) throw new Error("expected 202 Accepted")
      expect(accepted.viewer).toBe(`/ui/sessions/${accepted.sessionId}`)
      expect(accepted.events).toBe(`/v1/sessions/${accepted.sessionId}/events`)
      const view = yield* landed(accepted.sessionId)
      expect(view.exitReason).toBe("completed")
      const { turns } = yield* api.sessions.turns({ path: { id: view.id }, urlParams: {} })
      expect(turns.map((t) => t.seq)).toEqual(turns.map((_, i) => i + 1))
      expect(turns.map((t) => t.entry.kind)).toEqual([
        "user",
        "assistant",
        "tool_results",
        "assistant",
        "tool_results",
        "assistant"
      ])
      const after = yield* api.sessions.turns({ path: { id: view.id }, urlParams: { after: 4 } })
      expect(after.turns.map((t) => t.seq)).toEqual([5, 6])
      const { trajectories } = yield* api.sessions.trajectory({ path: { id: view.id } })
      expect(trajectories).toHaveLength(1)
      expect(trajectories[0]?.exitReason).toBe("completed")
      expect(trajectories[0]?.tier).toBe("demo")
      const report = yield* api.sessions.report({ path: { id: view.id } })
      expect(report.exitReason).toBe("completed")
      expect(JSON.stringify(report.data)).toContain("pool")
    }))

  it.effect("answers ?wait=true with the landed view; many demo sessions run at once", () =>
    Effect.gen(function*() {
      const api = yield* client()
      const views = yield* Effect.forEach(
        Array.from({ length: 12 }, (_, i) => i),
        (i) =>
          api.sessions.startSession({
            payload: {
              agentId: "demo",
              scope: `incident:W-${i}`,
              prompt: `Why is ${i % 2 ? "payments" : "search"} down?`
            },
            urlParams: { wait: true }
          }),
        { concurrency: "unbounded" }
      )
      for (const [i, view] of views.entries()) {
        if (!("id" in view)) throw new Error("expected the landed view")
        expect(view.exitReason).toBe("completed")
        expect(view.modelCalls).toBe(4)
        expect(JSON.stringify(view.report?.data)).toContain(i % 2 ? "payments" : "search")
      }
    }))

  it.effect("lists sessions newest first by scope and status, in pages", () =>
    Effect.gen(function*() {
      const api = yield* client()
      const ids: Array<string> = []
      for (let i = 0; i < 5; i++) {
        const view = yield* api.sessions.startSession({ ...start("incident:LIST"), urlParams: { wait: true } })
        if ("id" in view) ids.push(view.id)
      }
      const seen: Array<string> = []
      let cursor: string | undefined
      for (let page = 0; page < 5; page++) {
        const result = yield* api.sessions.listSessions({
          urlParams: { scope: "incident:LIST", limit: 2, ...(cursor === undefined ? {} : { cursor }) }
        })
        seen.push(...result.sessions.map((s) => s.id))
        cursor = result.nextCursor
        if (cursor === undefined) break
      }
      expect(seen).toEqual([...ids].reverse())
      const idle = yield* api.sessions.listSessions({ urlParams: { scope: "incident:LIST", status: "idle" } })
      expect(idle.sessions).toHaveLength(5)
      const running = yield* api.sessions.listSessions({ urlParams: { scope: "incident:LIST", status: "running" } })
      expect(running.sessions).toHaveLength(0)
      const bad = yield* Effect.flip(api.sessions.listSessions({ urlParams: { cursor: "nonsense!" } }))
      expect(bad._tag).toBe("HttpApiDecodeError")
      const url = yield* baseUrl
      expect((yield* raw(`${url}/v1/sessions?limit=0`)).status).toBe(400)
      expect((yield* raw(`${url}/v1/sessions?status=sleeping`)).status).toBe(400)
    }))

  it.effect("continues a session with a follow-up, at once (202) or awaited", () =>
    Effect.gen(function*() {
      const api = yield* client()
      const first = yield* api.sessions.startSession({ ...start("incident:C-1"), urlParams: { wait: true } })
      if (!("id" in first)) throw new Error("expected the landed view")
      const accepted = yield* api.sessions.sendMessage({
        path: { id: first.id },
        payload: { text: "And payments?" },
        urlParams: {}
      })
      expect("sessionId" in accepted).toBe(true)
      const second = yield* eventually(
        "the follow-up to land",
        Effect.map(api.sessions.getSession({ path: { id: first.id } }), (v) =>
          v.bursts === 2 && v.status === "idle" ? v : undefined)
      )
      expect(second.exitReason).toBe("completed")
      const third = yield* api.sessions.sendMessage({
        path: { id: first.id },
        payload: { text: "Anything else?" },
        urlParams: { wait: true }
      })
      if (!("id" in third)) {
        throw new Error("expected the landed view")
      }
      expect(third.bursts).toBe(3)
      // The generated client refuses an empty text before sending; the server refuses it too.
      expect(
        (yield* Effect.flip(api.sessions.sendMessage({
          path: { id: first.id },
          payload: { text: "" },
          urlParams: {}
        })))._tag
      ).toBe("ParseError")
      const empty = yield* raw(`${yield* baseUrl}/v1/sessions/${first.id}/messages`, {
        method: "POST",
        body: JSON.stringify({ text: "" }),
        headers: { "content-type": "application/json" }
      })
      expect(empty.status).toBe(400)
      expect(JSON.parse(empty.text).issues[0].path).toEqual(["text"])
    }))

  it.effect("waits for a person on a write: 409 for follow-ups and unknown tokens, then approve or reject", () =>
    Effect.gen(function*() {
      const api = yield* client()
      const pending = yield* api.sessions.startSession({
        ...start("incident:F-1", "Please fix checkout"),
        urlParams: { wait: true }
      })
      if (!("id" in pending)) throw new Error("expected the landed view")
      expect(pending.exitReason).toBe("confirmation_pending")
      expect(pending.status).toBe("awaiting_confirmation")
      const token = pending.pending[0]?.token ?? ""
      expect(pending.pending[0]?.tool).toBe("demo_restart")
      const busy = yield* Effect.flip(api.sessions.sendMessage({
        path: { id: pending.id },
        payload: { text: "status?" },
        urlParams: {}
      }))
      expect(busy._tag).toBe("InvalidSessionState")
      const wrong = yield* Effect.flip(api.sessions.decide({
        path: { id: pending.id },
        payload: { token: "tok_nope", decision: "approve" },
        urlParams: {}
      }))
      expect(wrong._tag).toBe("InvalidSessionState")
      const done = yield* api.sessions.decide({
        path: { id: pending.id },
        payload: { token, decision: "approve" },
        urlParams: { wait: true }
      })
      if (!("id" in done)) throw new Error("expected the landed view")
      expect(done.exitReason).toBe("completed")
      expect(JSON.stringify(done.report?.data)).toContain("restarted")

      const other = yield* api.sessions.startSession({
        ...start("incident:F-2", "Please fix payments"),
        urlParams: { wait: true }
      })
      if (!("id" in other)) throw new Error("expected the landed view")
      const accepted = yield* api.sessions.decide({
        path: { id: other.id },
        payload: { token: other.pending[0]?.token ?? "", decision: "reject" },
        urlParams: {}
      })
      expect("sessionId" in accepted).toBe(true)
      const rejected = yield* landed(other.id).pipe(
        Effect.flatMap((v) => v.bursts === 2 ? Effect.succeed(v) : Effect.fail("pending")),
        Effect.retry({ times: 500 })
      )
      expect(rejected.exitReason).toBe("completed")
      const { turns } = yield* api.sessions.turns({ path: { id: other.id }, urlParams: {} })
      const last = turns[turns.length - 1]?.entry
      expect(last?.kind === "assistant" ? last.text : "").toContain("declined")
    }))

  it.effect("cancels a running burst: it lands `cancelled` with its transcript kept", () =>
    Effect.gen(function*() {
      const api = yield* client()
      const accepted = yield* api.sessions.startSession(start("incident:X-1"))
      if (!("sessionId" in accepted)) throw new Error("expected 202")
      const id = accepted.sessionId
      yield* eventually(
        "the burst to persist its first turn",
        Effect.map(api.sessions.turns({ path: { id }, urlParams: {} }), (r) => r.turns.length > 0 ? true : undefined)
      )
      yield* api.sessions.cancel({ path: { id } })
      const view = yield* landed(id)
      expect(view.exitReason).toBe("cancelled")
      expect(view.report?.exitReason).toBe("cancelled")
      const { turns } = yield* api.sessions.turns({ path: { id }, urlParams: {} })
      expect(turns[0]?.entry.kind).toBe("user")
    }))

  it.effect("says 404 for unknown sessions and 409 for a report not landed yet", () =>
    Effect.gen(function*() {
      const api = yield* client()
      const calls: ReadonlyArray<Effect.Effect<unknown, { readonly _tag: string }>> = [
        api.sessions.getSession({ path: { id: "ses_nope" } }),
        api.sessions.cancel({ path: { id: "ses_nope" } }),
        api.sessions.report({ path: { id: "ses_nope" } }),
        api.sessions.trajectory({ path: { id: "ses_nope" } }),
        api.sessions.turns({ path: { id: "ses_nope" }, urlParams: {} }),
        api.sessions.sendMessage({ path: { id: "ses_nope" }, payload: { text: "hi" }, urlParams: {} })
      ]
      for (const call of calls) expect((yield* Effect.flip(call))._tag).toBe("SessionNotFound")
      const url = yield* baseUrl
      expect((yield* raw(`${url}/v1/sessions/ses_nope/events`)).status).toBe(404)
      const accepted = yield* api.sessions.startSession({
        ...start("incident:R-1"),
        payload: { agentId: "demo", scope: "incident:R-1", prompt: "Why is checkout failing?" }
      })
      if (!("sessionId" in accepted)) throw new Error("expected 202")
      const early = yield* Effect.flip(api.sessions.report({ path: { id: accepted.sessionId } }))
      expect(early._tag).toBe("InvalidSessionState")
      const missingAgent = yield* Effect.flip(api.sessions.startSession({
        payload: { agentId: "ghost", scope: "s", prompt: "p" },
        urlParams: {}
      }))
      expect(missingAgent._tag).toBe("AgentNotFound")
      const crossScope = yield* Effect.flip(api.sessions.startSession({
        payload: { agentId: "demo", scope: "other", prompt: "p", inheritedArtifacts: [accepted.sessionId] },
        urlParams: {}
      }))
      expect(crossScope._tag).toBe("ScopeMismatch")
    }))

  it.effect("refuses bad input with 4xx and the path of each problem: schema, JSON, media type, size", () =>
    Effect.gen(function*() {
      const url = yield* baseUrl
      const post = (body: string, contentType = "application/json") =>
        raw(`${url}/v1/sessions`, { method: "POST", body, headers: { "content-type": contentType } })
      const schema = yield* post(JSON.stringify({ agentId: "Bad Id", scope: "", extra: 1 }))
      expect(schema.status).toBe(400)
      const body = JSON.parse(schema.text)
      expect(body._tag).toBe("HttpApiDecodeError")
      expect(body.issues.map((i: { path: Array<string> }) => i.path.join("."))).toEqual(
        expect.arrayContaining(["agentId", "scope", "prompt", "extra"])
      )
      const malformed = yield* post("{\"agentId\": ")
      expect(malformed.status).toBe(400)
      expect(JSON.parse(malformed.text).message).toContain("not valid JSON")
      expect((yield* post("null")).status).toBe(400)
      expect((yield* post("")).status).toBe(400)
      expect((yield* post("agentId=demo", "application/x-www-form-urlencoded")).status).toBe(415)
      const huge = yield* post(JSON.stringify({ agentId: "demo", scope: "s", prompt: "x".repeat(100 * 1024) }))
      expect(huge.status).toBe(413)
      expect(JSON.parse(huge.text)._tag).toBe("PayloadTooLarge")
      for (const response of [schema, malformed, huge]) expect(response.text).not.toMatch(/\bat .*\.ts:\d+/)
      expect((yield* raw(`${url}/healthz`)).status).toBe(200)
    }))

  it.effect("ignores a bearer key when no keys are configured: everyone is the local principal", () =>
    Effect.gen(function*() {
      const api = yield* client("whatever")
      const { agents } = yield* api.agents.listAgents()
      expect(agents.map((a) => a.id)).toContain("demo")
    }))
})
