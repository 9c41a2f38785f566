/**
 * `Idempotency-Key` over HTTP (issue 12): the two POSTs that create something answer a retry with the first answer
 * and create nothing; a key reused for another request, or a malformed key, is a 422 naming the header.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Server from "../../src/server/Server.js"
import { baseUrl, eventually, raw, settings } from "../support/ServerHarness.js"

const post = (path: string, body: unknown, key?: string) =>
  Effect.flatMap(baseUrl, (url) =>
    raw(`${url}${path}`, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": key }) },
      timeoutMs: 20_000
    }))

const get = (path: string) => Effect.flatMap(baseUrl, (url) => raw(`${url}${path}`, { timeoutMs: 20_000 }))

layer(Server.layer(settings({ demo: { enabled: true, delayMs: 0 } })), { excludeTestServices: true })(
  "Idempotency-Key",
  (it) => {
    it.effect("a start retried with the same key answers the first 202 and creates one session", () =>
      Effect.gen(function*() {
        const scope = `idem:${Math.random()}`
        const start = { agentId: "demo", scope, prompt: "Why is checkout failing?" }
        const [a, b] = yield* Effect.all([
          post("/v1/sessions", start, `k-${scope}`),
          post("/v1/sessions", start, `k-${scope}`)
        ], { concurrency: 2 })
        expect([a.status, b.status]).toEqual([202, 202])
        expect(JSON.parse(b.text).sessionId).toBe(JSON.parse(a.text).sessionId)
        const listed = JSON.parse((yield* get(`/v1/sessions?scope=${encodeURIComponent(scope)}`)).text)
        expect(listed.sessions.length).toBe(1)

        const other = yield* post("/v1/sessions", { ...start, prompt: "something else" }, `k-${scope}`)
        expect(other.status).toBe(422)
        expect(JSON.parse(other.text).issues[0].path).toBe("Idempotency-Key")
        const bad = yield* post("/v1/sessions", start, "not a key")
        expect(bad.status).toBe(422)
        expect(JSON.parse(bad.text).issues[0].path).toBe("Idempotency-Key")
      }))

    it.effect("a follow-up retried with the same key is sent once", () =>
      Effect.gen(function*() {
        const scope = `idem:${Math.random()}`
        const landed = yield* post("/v1/sessions?wait=true", { agentId: "demo", scope, prompt: "Why?" })
        const id = JSON.parse(landed.text).id as string
        const first = yield* post(`/v1/sessions/${id}/messages`, { text: "and now?" }, `m-${scope}`)
        const again = yield* post(`/v1/sessions/${id}/messages`, { text: "and now?" }, `m-${scope}`)
        expect(first.status).toBe(202)
        // The retry answers the session as it stands: still running (the first 202), or landed already (its view).
        if (again.status === 202) expect(again.text).toBe(first.text)
        else expect([again.status, JSON.parse(again.text).id]).toEqual([200, id])
        // Wait for the follow-up's burst, then count the user turns that carry its text.
        yield* eventually(
          "the follow-up to land",
          Effect.map(get(`/v1/sessions/${id}`), (r) => {
            const view = JSON.parse(r.text)
            return view.bursts >= 2 && view.status !== "running" ? true : undefined
          }),
          "20 seconds"
        )
        const turns = JSON.parse((yield* get(`/v1/sessions/${id}/turns`)).text).turns as Array<
          { entry: { kind: string; text?: string } }
        >
        expect(turns.filter((t) => t.entry.kind === "user" && t.entry.text === "and now?").length).toBe(1)
        // Retried once it has landed: 200 with the landed view, not the first answer's stale `running`.
        const late = yield* post(`/v1/sessions/${id}/messages`, { text: "and now?" }, `m-${scope}`)
        expect(late.status).toBe(200)
        expect(JSON.parse(late.text)).toMatchObject({ id, status: "idle", exitReason: "completed", bursts: 2 })
      }))

    it.effect("a start retried after its session landed answers 200 with the landed view", () =>
      Effect.gen(function*() {
        const scope = `idem:${Math.random()}`
        const start = { agentId: "demo", scope, prompt: "Why is checkout failing?" }
        const first = yield* post("/v1/sessions", start, `s-${scope}`)
        expect(first.status).toBe(202)
        const id = JSON.parse(first.text).sessionId as string
        yield* eventually(
          "the session to land",
          Effect.map(get(`/v1/sessions/${id}`), (r) => JSON.parse(r.text).status === "idle" ? true : undefined),
          "20 seconds"
        )
        const again = yield* post("/v1/sessions", start, `s-${scope}`)
        expect(again.status).toBe(200)
        expect(JSON.parse(again.text)).toMatchObject({ id, status: "idle", exitReason: "completed", bursts: 1 })
        const listed = JSON.parse((yield* get(`/v1/sessions?scope=${encodeURIComponent(scope)}`)).text)
        expect(listed.sessions.length).toBe(1)
      }))
  }
)
