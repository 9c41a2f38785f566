/**
 * Hostile input, one regression per failure found (issue 13): every request gets an answer, bad input is a 4xx
 * that names what was wrong without echoing it back, nothing unbounded reaches the store, and a path or method the
 * server does not serve is a JSON 404 or a 405 with `Allow`. The id and filter checks also run against Postgres
 * when `CORRAL_TEST_DATABASE_URL` is set: there a NUL byte used to come back as a 503 "store unavailable".
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, layer } from "@effect/vitest"
import { Context, Effect, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import type { Settings } from "../../src/config/Config.js"
import * as InputLimits from "../../src/server/InputLimits.js"
import * as Server from "../../src/server/Server.js"
import * as Database from "../../src/store/Database.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import type { Raw } from "../support/ServerHarness.js"
import { baseUrl, client, raw, settings } from "../support/ServerHarness.js"

const start = { agentId: "demo", scope: "hostile:1", prompt: "Why is checkout failing?" }

// Bounds are generous (the machine is shared): the failure they catch is a request that is never answered.
const post = (path: string, body: string, contentType = "application/json") =>
  Effect.flatMap(
    baseUrl,
    (url) => raw(`${url}${path}`, { method: "POST", body, headers: { "content-type": contentType }, timeoutMs: 20_000 })
  )

const get = (path: string, init: { readonly method?: string } = {}) =>
  Effect.flatMap(baseUrl, (url) => raw(`${url}${path}`, { ...init, timeoutMs: 20_000 }))

/** The error body of `response`: JSON with `_tag` and `message`, and short (an excerpt at most). */
const errorBody = (response: Raw): Record<string, unknown> => {
  expect(response.contentType).toContain("application/json")
  expect(response.text.length, response.text.slice(0, 300)).toBeLessThan(4_096)
  const body = JSON.parse(response.text) as Record<string, unknown>
  expect(typeof body._tag).toBe("string")
  expect(typeof body.message).toBe("string")
  expect(String(body.message).length).toBeGreaterThan(0)
  return body
}

/** The id and filter checks: 400 before any store call, never a 503. */
const idsAndFilters = () =>
  Effect.gen(function*() {
    for (
      const path of ["/v1/sessions/a%00b", "/v1/sessions/a%00b/turns", "/v1/agents/x%00", "/v1/sessions?scope=%00"]
    ) {
      const response = yield* get(path)
      expect(response.status, `${path}: ${response.text}`).toBe(400)
      expect(errorBody(response)._tag).toBe("HttpApiDecodeError")
    }
    const long = yield* get(`/v1/sessions/${"s".repeat(InputLimits.maxIdChars + 1)}`)
    expect(long.status).toBe(400)
    expect(String(errorBody(long).message)).toContain(`at most ${InputLimits.maxIdChars}`)
    expect((yield* get("/v1/sessions/%E0%A4%A")).status).toBe(400)
    expect((yield* get("/v1/sessions/ses_%F0%9F%90%91")).status).toBe(400)
    expect((yield* get(`/v1/sessions?scope=${"x".repeat(201)}`)).status).toBe(400)
    expect((yield* get(`/v1/sessions?cursor=${Buffer.from("1:\u0000").toString("base64url")}`)).status).toBe(400)
    // A NUL or a lone surrogate inside a body string: 400 naming where, before the store could refuse it.
    const nul = yield* post("/v1/sessions", JSON.stringify({ ...start, scope: "incident:\u0000" }))
    expect(nul.status).toBe(400)
    expect(errorBody(nul).message).toContain("NUL")
    const surrogate = yield* post("/v1/sessions", `{"agentId":"demo","scope":"s","prompt":"\\ud800 half"}`)
    expect(surrogate.status).toBe(400)
    expect(errorBody(surrogate).message).toContain("surrogate")
    // A well-formed id that names nothing is still a 404, and it says so.
    const missing = yield* get("/v1/sessions/ses_nope")
    expect(missing.status).toBe(404)
    expect(errorBody(missing)).toMatchObject({ _tag: "SessionNotFound", sessionId: "ses_nope" })
    expect((yield* get("/v1/sessions?scope=incident%3A1")).status).toBe(200)
  })

layer(Server.layer(settings({ demo: { enabled: true, delayMs: 0 } })), { excludeTestServices: true })(
  "Hostile input",
  (it) => {
    it.effect("answers +json media types as JSON at once, with or without a charset; other charsets are 415", () =>
      Effect.gen(function*() {
        for (
          const type of [
            "application/vnd.api+json",
            "application/merge-patch+json",
            "application/problem+json",
            "application/vnd.api+json; charset=utf-8",
            "Application/Problem+JSON;charset=\"UTF-8\"",
            "application/json; charset=utf-8"
          ]
        ) {
          const good = yield* post("/v1/sessions", JSON.stringify(start), type)
          expect(good.status, `${type}: ${good.text}`).toBe(202)
          const bad = yield* post("/v1/sessions", JSON.stringify({ ...start, prompt: 42 }), type)
          expect(bad.status, `${type}: ${bad.text}`).toBe(400)
          expect(errorBody(bad)._tag).toBe("HttpApiDecodeError")
          const broken = yield* post("/v1/sessions", "{\"agentId\":", type)
          expect(broken.status).toBe(400)
        }
        for (
          const type of ["application/json; charset=utf-16", "application/jsonx", "application/+json", "text/json"]
        ) {
          const refused = yield* post("/v1/sessions", JSON.stringify(start), type)
          expect(refused.status, type).toBe(415)
          expect(errorBody(refused)._tag).toBe("UnsupportedMediaType")
        }
      }))

    it.effect("answers 1,000 +json requests in flight together, each within the bound", () =>
      Effect.gen(function*() {
        const answers = yield* Effect.forEach(
          Array.from({ length: 1_000 }, (_, i) => i),
          (i) =>
            post(
              "/v1/sessions",
              i % 2 === 0 ? "{\"agentId\":\"demo\"}" : "[[[[",
              i % 3 === 0 ? "application/merge-patch+json" : "application/vnd.api+json"
            ),
          { concurrency: 100 }
        )
        expect(answers.every((a) => a.status === 400)).toBe(true)
      }), { timeout: 60_000 })

    it.effect("refuses deep nesting before decoding: 400 naming the limit, never a 500 or an echo", () =>
      Effect.gen(function*() {
        for (const depth of [5_000, 1_000, InputLimits.maxDepth + 1]) {
          const response = yield* post(
            "/v1/sessions",
            `{"agentId":"demo","scope":"s","prompt":${"[".repeat(depth)}${"]".repeat(depth)}}`
          )
          expect(response.status, `depth ${depth}`).toBe(400)
          expect(errorBody(response)).toMatchObject({ limit: "maxDepth" })
          expect(String(errorBody(response).message)).toContain(`${InputLimits.maxDepth} levels`)
        }
        // Unclosed brackets (not even JSON) are refused by the same scan.
        expect((yield* post("/v1/agents", "[".repeat(100_000))).status).toBe(400)
        // Within the limit, a wrongly typed deep value is a decode error quoting an excerpt only.
        const deep = yield* post(
          "/v1/sessions",
          `{"agentId":"demo","scope":"s","prompt":${"[".repeat(60)}${"]".repeat(60)}}`
        )
        expect(deep.status).toBe(400)
        expect(errorBody(deep)._tag).toBe("HttpApiDecodeError")
      }))

    it.effect("quotes at most an excerpt of an offending value, however large", () =>
      Effect.gen(function*() {
        const huge = "x".repeat(150_000)
        for (
          const body of [
            { ...start, version: huge },
            { ...start, agentId: huge },
            { ...start, inheritedArtifacts: Array.from({ length: 5 }, () => huge) },
            { ...start, [huge.slice(0, 5_000)]: 1 }
          ]
        ) {
          const response = yield* post("/v1/sessions", JSON.stringify(body))
          expect(response.status).toBeGreaterThanOrEqual(400)
          expect(response.status).toBeLessThan(500)
          errorBody(response)
          expect(response.text).not.toContain("x".repeat(200))
        }
        const tooLong = yield* post("/v1/sessions", JSON.stringify({ ...start, prompt: "y".repeat(210_000) }))
        expect(tooLong.status).toBe(400)
        expect(errorBody(tooLong)).toMatchObject({ limit: "maxStringChars" })
        const agent = yield* post("/v1/agents", JSON.stringify({ id: "a", tools: [huge.slice(0, 90_000)] }))
        expect(agent.status).toBe(422)
        expect(agent.text).not.toContain("x".repeat(200))
      }))

    it.effect("validates ids and query values before any store call (400), and says 404 with a message", () =>
      idsAndFilters())

    it.effect("gives SessionNotFound and AgentNotFound a message", () =>
      Effect.gen(function*() {
        const api = yield* client()
        const session = yield* Effect.flip(api.sessions.getSession({ path: { id: "ses_missing" } }))
        expect(session).toMatchObject({ _tag: "SessionNotFound", sessionId: "ses_missing" })
        expect(session.message.length).toBeGreaterThan(0)
        const agent = yield* get("/v1/agents/nope")
        expect(agent.status).toBe(404)
        expect(errorBody(agent)).toMatchObject({ _tag: "AgentNotFound", agentId: "nope" })
        const version = yield* get("/v1/agents/demo?version=99")
        expect(errorBody(version).message).toContain("version 99")
      }))

    it.effect("answers unknown routes 404 with a JSON body and wrong methods 405 with Allow", () =>
      Effect.gen(function*() {
        for (const path of ["/no/such/route", "/v1/sessions/x/nope", "/v1", "/v1/sessions/x/approvals/tokens/y"]) {
          const response = yield* get(path)
          expect(response.status, path).toBe(404)
          expect(errorBody(response)._tag).toBe("NotFound")
        }
        const cases: ReadonlyArray<readonly [string, string, string]> = [
          ["DELETE", "/v1/sessions", "GET, HEAD, POST"],
          ["PUT", "/v1/sessions/ses_1", "GET, HEAD"],
          ["GET", "/v1/sessions/ses_1/cancel", "POST"],
          ["PATCH", "/v1/agents/demo", "GET, HEAD"],
          ["POST", "/healthz", "GET, HEAD"],
          ["DELETE", "/openapi.json", "GET, HEAD"],
          ["POST", "/ui/sessions/ses_1", "GET, HEAD"]
        ]
        for (const [method, path, allow] of cases) {
          const response = yield* get(path, { method })
          expect(response.status, `${method} ${path}`).toBe(405)
          expect(response.headers.allow).toBe(allow)
          expect(errorBody(response)).toMatchObject({ _tag: "MethodNotAllowed" })
        }
        expect((yield* get("/healthz", { method: "HEAD" })).status).toBe(200)
      }))

    it.effect("answers a second decision with a decided token 409 AlreadyDecided, naming it, and records it", () =>
      Effect.gen(function*() {
        const api = yield* client()
        const view = yield* api.sessions.startSession({
          payload: { agentId: "demo", scope: "hostile:approvals", prompt: "Please fix checkout" },
          urlParams: { wait: true }
        })
        if (!("id" in view)) throw new Error("expected the landed view")
        const token = view.pending[0]?.token ?? ""
        expect(token).not.toBe("")
        const path = `/v1/sessions/${view.id}/approvals`
        const rejected = yield* post(`${path}?wait=true`, JSON.stringify({ token, decision: "reject" }))
        expect(rejected.status).toBe(200)
        for (const wait of ["?wait=true", ""]) {
          const again = yield* post(`${path}${wait}`, JSON.stringify({ token, decision: "approve" }))
          expect(again.status).toBe(409)
          expect(errorBody(again)).toMatchObject({
            _tag: "AlreadyDecided",
            reason: "already_decided",
            decision: "reject"
          })
          expect(String(errorBody(again).message)).toContain("already rejected")
        }
        const { turns } = yield* api.sessions.turns({ path: { id: view.id }, urlParams: {} })
        const refusals = turns.flatMap((t) =>
          t.entry.kind === "notice" && t.entry.rail === "Approvals" ? [t.entry.text] : []
        )
        expect(refusals).toHaveLength(2)
        expect(refusals[0]).toContain("already rejected")
      }))
  }
)

/** A server on a brand-new Postgres database of the test server, dropped afterwards. */
const onPostgres = (adminUrl: string) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const admin = Context.get(
      yield* Layer.build(Database.layerPostgres(Redacted.make(adminUrl), { maxConnections: 1 })),
      SqlClient.SqlClient
    )
    const name = `corral_http_${randomUUID().replaceAll("-", "").slice(0, 16)}`
    yield* admin`CREATE DATABASE ${admin(name)}`
    yield* Effect.addFinalizer(() => admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`.pipe(Effect.ignore))
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    const database: Settings["database"] = { _tag: "Postgres", url: Redacted.make(url.toString()), maxConnections: 4 }
    return Server.layer(settings({ database, demo: { enabled: true, delayMs: 0 } }))
  }))

if (testDatabaseUrl === undefined) {
  describe.skip(`Hostile input on Postgres (${skipReason})`, () => {})
} else {
  layer(onPostgres(testDatabaseUrl), { excludeTestServices: true })("Hostile input on Postgres", (it) => {
    it.effect("validates ids and query values before the store: a NUL is a 400, never a 503", () => idsAndFilters())
  })
}
