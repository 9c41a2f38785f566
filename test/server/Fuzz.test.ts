/**
 * Fuzzing the write routes: for each one, 2,000+ request bodies (seeded, so a failure replays) — random JSON,
 * mutations of a valid body (fields dropped, retyped, added, deepened, lengthened), malformed JSON, wrong media
 * types, oversized bodies. The server must answer every one with a 2xx (a mutation may stay valid) or a 4xx,
 * never a 5xx, and still be alive at the end.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import * as Server from "../../src/server/Server.js"
import { baseUrl, client, raw, settings } from "../support/ServerHarness.js"

const SEED = 20_261_129
const PER_ROUTE = 2_000
const LIMIT = 16 * 1024

interface Body {
  readonly text: string
  readonly contentType: string
}

const json = (value: unknown): Body => ({ text: JSON.stringify(value), contentType: "application/json" })

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** One mutation of a valid body: drop, retype, add, deepen or lengthen a field, or replace the whole. */
const mutation = (valid: Record<string, unknown>): fc.Arbitrary<unknown> => {
  const keys = Object.keys(valid)
  const key = keys.length > 0 ? fc.constantFrom(...keys) : fc.constant("x")
  const anyValue = fc.jsonValue({ maxDepth: 3 })
  return fc.oneof(
    key.map((k) => Object.fromEntries(Object.entries(valid).filter(([name]) => name !== k))),
    fc.tuple(key, anyValue).map(([k, v]) => ({ ...valid, [k]: v })),
    fc.tuple(fc.string({ maxLength: 12 }), anyValue).map(([k, v]) => ({ ...valid, [k]: v })),
    fc.tuple(key, fc.integer({ min: 1, max: 40 })).map(([k, depth]) => {
      let nested: unknown = valid[k]
      for (let i = 0; i < depth; i++) nested = { [k]: nested }
      return { ...valid, [k]: nested }
    }),
    fc.tuple(key, fc.integer({ min: 200, max: 4000 })).map(([k, n]) => ({ ...valid, [k]: "é".repeat(n) })),
    fc.tuple(key, fc.constantFrom(null, true, 0, -1, 1.5, "", [], {}, "\u0000", "<script>", "../../etc/passwd"))
      .map(([k, v]) => ({ ...valid, [k]: v })),
    fc.constantFrom<unknown>([valid], "text", 42, null, true, [])
  )
}

/** Bodies for one route: random JSON, mutations of `valid`, malformed JSON, wrong media types, oversized. */
const bodies = (valid: Record<string, unknown>): fc.Arbitrary<Body> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }).map(json) },
    { weight: 4, arbitrary: mutation(valid).map(json) },
    {
      weight: 2,
      arbitrary: fc.oneof(
        fc.integer({ min: 1, max: Math.max(1, JSON.stringify(valid).length - 1) }).map((n) =>
          JSON.stringify(valid).slice(0, n)
        ),
        fc.string({ maxLength: 200 }),
        fc.constantFrom("{", "}", "[", "{\"a\":}", "{'a':1}", "\"\\u12\"", "NaN", "{\"a\":1,}", "\uFEFF{}", "undefined")
      ).map((text) => ({ text, contentType: "application/json" }))
    },
    {
      weight: 1,
      arbitrary: fc.tuple(
        fc.constantFrom(
          "text/plain",
          "multipart/form-data; boundary=x",
          "application/x-www-form-urlencoded",
          "application/xml",
          "application/json; charset=utf-16",
          "image/png",
          "garbage"
        ),
        fc.string({ maxLength: 100 })
      ).map(([contentType, text]) => ({ contentType, text: text.length > 0 ? text : JSON.stringify(valid) }))
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: LIMIT + 1, max: LIMIT * 3 }).map((n) =>
        json(isRecord(valid) ? { ...valid, padding: "x".repeat(n) } : "x".repeat(n))
      )
    }
  )

layer(
  Server.layer(
    settings({ demo: { enabled: true, delayMs: 0 }, server: { ...settings().server, bodyLimitBytes: LIMIT } })
  ),
  { excludeTestServices: true }
)("Fuzzed write routes", (it) => {
  it.effect(
    `answer ${PER_ROUTE} random and mutated bodies per route with 2xx/4xx only, never 5xx`,
    () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const api = yield* client()
        const view = yield* api.sessions.startSession({
          payload: { agentId: "demo", scope: "fuzz:1", prompt: "Please fix checkout" },
          urlParams: { wait: true }
        })
        if (!("id" in view)) throw new Error("expected the landed view")
        const id = view.id
        const routes: ReadonlyArray<{ readonly path: string; readonly valid: Record<string, unknown> }> = [
          {
            path: "/v1/agents",
            valid: { id: "fuzzed", version: 1, name: "Fuzzed", instructions: "Investigate.", tier: "demo", tools: [] }
          },
          { path: "/v1/sessions", valid: { agentId: "demo", scope: "fuzz:2", prompt: "Why is search slow?" } },
          { path: `/v1/sessions/${id}/messages`, valid: { text: "And now?" } },
          { path: `/v1/sessions/${id}/approvals`, valid: { token: view.pending[0]?.token ?? "t", decision: "reject" } },
          { path: `/v1/sessions/${id}/cancel`, valid: {} }
        ]
        for (const [index, route] of routes.entries()) {
          const samples = fc.sample(bodies(route.valid), { seed: SEED + index, numRuns: PER_ROUTE })
          const statuses = yield* Effect.forEach(
            samples,
            (body) =>
              Effect.map(
                raw(`${url}${route.path}`, {
                  method: "POST",
                  body: body.text,
                  headers: { "content-type": body.contentType }
                }),
                (response) => ({ body, response })
              ),
            { concurrency: 16 }
          )
          const histogram: Record<number, number> = {}
          for (const { body, response } of statuses) {
            histogram[response.status] = (histogram[response.status] ?? 0) + 1
            if (response.status >= 500 || response.status < 200 || (response.status >= 300 && response.status < 400)) {
              throw new Error(
                `POST ${route.path} answered ${response.status} to ${body.contentType} ${body.text.slice(0, 300)}: ${
                  response.text.slice(0, 300)
                }`
              )
            }
            if (response.status >= 400) expect(JSON.parse(response.text)).toHaveProperty("_tag")
          }
          expect(samples).toHaveLength(PER_ROUTE)
          expect(Object.keys(histogram).filter((s) => Number(s) >= 400).length, JSON.stringify(histogram))
            .toBeGreaterThanOrEqual(3)
        }
        expect((yield* raw(`${url}/healthz`)).status).toBe(200)
        expect((yield* api.system.readyz()).status).toBe("ready")
      }),
    { timeout: 240_000 }
  )
})
