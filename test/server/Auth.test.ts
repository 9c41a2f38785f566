/**
 * Authentication and org isolation: bearer keys (stored as SHA-256) map to principals; a missing or wrong key is a
 * 401; another org's session is a 404 on every route, exactly like a missing one.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { sha256 } from "../../src/server/Authentication.js"
import * as Server from "../../src/server/Server.js"
import { baseUrl, client, raw, settings } from "../support/ServerHarness.js"

const aliceKey = "ck_alice_0123456789"
const malloryKey = "ck_mallory_9876543210"

const keyed = settings({
  apiKeys: [
    { sha256: sha256(aliceKey), orgId: "acme", userId: "alice" },
    { sha256: sha256(malloryKey), orgId: "evil", userId: "mallory" }
  ]
})

describe("Server.bindHost", () => {
  it("binds 127.0.0.1 whatever server.host says while no API keys are configured", () => {
    const open = settings({ server: { ...settings().server, host: "0.0.0.0" } })
    expect(Server.bindHost(open)).toBe("127.0.0.1")
    expect(Server.bindHost({ ...open, apiKeys: keyed.apiKeys })).toBe("0.0.0.0")
  })
})

layer(Server.layer(keyed), { excludeTestServices: true })("HTTP API with API keys", (it) => {
  it.effect("answers 401 for a missing or unknown key, on every /v1 route; the probes need none", () =>
    Effect.gen(function*() {
      const url = yield* baseUrl
      for (
        const [method, path] of [
          ["GET", "/v1/agents"],
          ["POST", "/v1/agents"],
          ["GET", "/v1/agents/demo"],
          ["POST", "/v1/sessions"],
          ["GET", "/v1/sessions"],
          ["GET", "/v1/sessions/ses_x"],
          ["POST", "/v1/sessions/ses_x/messages"],
          ["POST", "/v1/sessions/ses_x/approvals"],
          ["POST", "/v1/sessions/ses_x/cancel"],
          ["GET", "/v1/sessions/ses_x/turns"],
          ["GET", "/v1/sessions/ses_x/trajectory"],
          ["GET", "/v1/sessions/ses_x/report"],
          ["GET", "/v1/sessions/ses_x/events"]
        ] as const
      ) {
        const body = method === "POST" ? { body: "{}", headers: { "content-type": "application/json" } } : {}
        const missing = yield* raw(`${url}${path}`, { method, ...body })
        expect(missing.status, `${method} ${path} without a key`).toBe(401)
        expect(JSON.parse(missing.text)._tag).toBe("Unauthorized")
        const wrong = yield* raw(`${url}${path}`, {
          method,
          ...body,
          headers: { ...("headers" in body ? body.headers : {}), authorization: "Bearer ck_wrong" }
        })
        expect(wrong.status, `${method} ${path} with a wrong key`).toBe(401)
      }
      expect((yield* raw(`${url}/healthz`)).status).toBe(200)
      expect((yield* raw(`${url}/readyz`)).status).toBe(200)
      const typed = yield* client("ck_wrong")
      expect((yield* Effect.flip(typed.agents.listAgents()))._tag).toBe("Unauthorized")
    }))

  it.effect("scopes every route to the key's org: another org's session is a 404", () =>
    Effect.gen(function*() {
      const alice = yield* client(aliceKey)
      const mallory = yield* client(malloryKey)
      // The demo agent is published into every configured org.
      expect((yield* mallory.agents.listAgents()).agents.map((a) => a.id)).toEqual(["demo"])
      yield* alice.agents.publishAgent({
        payload: { id: "secret", version: 1, name: "Secret", instructions: "x", tier: "demo" }
      })
      expect((yield* Effect.flip(mallory.agents.getAgent({ path: { id: "secret" }, urlParams: {} })))._tag).toBe(
        "AgentNotFound"
      )
      const view = yield* alice.sessions.startSession({
        payload: { agentId: "demo", scope: "incident:ACME-1", prompt: "Please fix checkout" },
        urlParams: { wait: true }
      })
      if (!("id" in view)) throw new Error("expected the landed view")
      const id = view.id
      const token = view.pending[0]?.token ?? ""
      const calls: ReadonlyArray<Effect.Effect<unknown, { readonly _tag: string }>> = [
        mallory.sessions.getSession({ path: { id } }),
        mallory.sessions.turns({ path: { id }, urlParams: {} }),
        mallory.sessions.trajectory({ path: { id } }),
        mallory.sessions.report({ path: { id } }),
        mallory.sessions.cancel({ path: { id } }),
        mallory.sessions.sendMessage({ path: { id }, payload: { text: "hi" }, urlParams: {} }),
        mallory.sessions.decide({ path: { id }, payload: { token, decision: "approve" }, urlParams: {} }),
        mallory.sessions.startSession({
          payload: { agentId: "demo", scope: "incident:ACME-1", prompt: "p", inheritedArtifacts: [id] },
          urlParams: {}
        })
      ]
      for (const call of calls) expect((yield* Effect.flip(call))._tag).toBe("SessionNotFound")
      const url = yield* baseUrl
      const events = yield* raw(`${url}/v1/sessions/${id}/events`, {
        headers: { authorization: `Bearer ${malloryKey}` }
      })
      expect(events.status).toBe(404)
      expect((yield* mallory.sessions.listSessions({ urlParams: {} })).sessions.map((s) => s.id)).not.toContain(id)
      expect((yield* alice.sessions.listSessions({ urlParams: {} })).sessions.map((s) => s.id)).toContain(id)
      // Mallory's attempt changed nothing: the write still waits for Alice.
      const after = yield* alice.sessions.getSession({ path: { id } })
      expect(after.status).toBe("awaiting_confirmation")
    }))
})
