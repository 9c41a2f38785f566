/**
 * A property-based fuzz of the whole HTTP surface, driven by the server's own OpenAPI document: every route and
 * method in /openapi.json, with hostile methods, ids, query values, headers, media types and bodies (random JSON,
 * mutations of a valid body, malformed and deeply nested JSON, NULs and lone surrogates, oversized bodies). Seeded,
 * so a failure replays. Every request must be answered within a bound, never with a 5xx, and every error answer
 * must be a short JSON body with a `_tag` and a `message`; the server must be alive and its heap back near its
 * baseline afterwards (a request that is never answered holds its buffers: the +json hang grew RSS by 100 MB per
 * 2,000 requests). A few hundred requests here; `FUZZ_RUNS` scales a run up by hand.
 */
import { expect, layer } from "@effect/vitest"
import { Config, Effect, FastCheck as fc } from "effect"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import * as Server from "../../src/server/Server.js"
import type { Raw } from "../support/ServerHarness.js"
import { baseUrl, client, raw, settings } from "../support/ServerHarness.js"

const SEED = 20_261_201
/** Requests per run (two measured bursts of half each); `FUZZ_RUNS=20000` for a longer run by hand. */
const RUNS = 2 * Math.ceil(Effect.runSync(Config.integer("FUZZ_RUNS").pipe(Config.withDefault(600))) / 2)
const LIMIT = 16 * 1024
/** An answer later than this is a failure: nothing the fuzz sends may make the server wait (2 shared cores). */
const ANSWER_WITHIN_MS = 15_000

setFlagsFromString("--expose-gc")
const gc = runInNewContext("gc") as () => void

const heapAfterGc = () =>
  Effect.sync(() => {
    for (let i = 0; i < 3; i++) gc()
    return process.memoryUsage().heapUsed
  })

interface Route {
  readonly method: string
  /** OpenAPI path template (`/v1/sessions/{id}`). */
  readonly path: string
  readonly query: ReadonlyArray<string>
  readonly hasBody: boolean
}

/** Every operation of the OpenAPI document. */
const routesOf = (document: unknown): ReadonlyArray<Route> => {
  const paths = (document as { paths: Record<string, Record<string, unknown>> }).paths
  return Object.entries(paths).flatMap(([path, operations]) =>
    Object.entries(operations).map(([method, operation]) => {
      const op = operation as { parameters?: ReadonlyArray<{ in: string; name: string }>; requestBody?: unknown }
      return {
        method: method.toUpperCase(),
        path,
        query: (op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name),
        hasBody: op.requestBody !== undefined
      }
    })
  )
}

interface Request {
  readonly method: string
  readonly target: string
  readonly headers: Record<string, string>
  readonly body: string | undefined
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** One mutation of a valid body: drop, retype, add, deepen or lengthen a field, or replace the whole. */
const mutation = (valid: Record<string, unknown>): fc.Arbitrary<unknown> => {
  const keys = Object.keys(valid)
  const key = keys.length > 0 ? fc.constantFrom(...keys) : fc.constant("x")
  const anyValue = fc.jsonValue({ maxDepth: 3 })
  return fc.oneof(
    fc.constant(valid),
    key.map((k) => Object.fromEntries(Object.entries(valid).filter(([name]) => name !== k))),
    fc.tuple(key, anyValue).map(([k, v]) => ({ ...valid, [k]: v })),
    fc.tuple(fc.string({ maxLength: 12 }), anyValue).map(([k, v]) => ({ ...valid, [k]: v })),
    fc.tuple(key, fc.integer({ min: 1, max: 90 })).map(([k, depth]) => {
      let nested: unknown = valid[k]
      for (let i = 0; i < depth; i++) nested = { [k]: nested }
      return { ...valid, [k]: nested }
    }),
    fc.tuple(key, fc.integer({ min: 200, max: 6_000 })).map(([k, n]) => ({ ...valid, [k]: "é".repeat(n) })),
    fc.tuple(key, fc.constantFrom(null, true, 0, -1, 1.5, "", [], {}, "\u0000", "\ud800", "<script>", "../../etc"))
      .map(([k, v]) => ({ ...valid, [k]: v })),
    fc.constantFrom<unknown>([valid], "text", 42, null, true, [])
  )
}

const jsonTypes = [
  "application/json",
  "application/json; charset=utf-8",
  "application/vnd.api+json",
  "application/merge-patch+json",
  "application/problem+json; charset=UTF-8"
]

/** Bodies: random JSON, mutations of `valid`, malformed or deeply nested text, hostile strings, oversized. */
const bodies = (valid: Record<string, unknown>): fc.Arbitrary<{ readonly text: string; readonly json: boolean }> =>
  fc.oneof(
    { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v) => ({ text: JSON.stringify(v), json: true })) },
    { weight: 4, arbitrary: mutation(valid).map((v) => ({ text: JSON.stringify(v), json: true })) },
    {
      weight: 2,
      arbitrary: fc.oneof(
        fc.integer({ min: 1, max: Math.max(1, JSON.stringify(valid).length - 1) }).map((n) =>
          JSON.stringify(valid).slice(0, n)
        ),
        fc.string({ maxLength: 200 }),
        fc.integer({ min: 50, max: 6_000 }).map((n) => `${"[".repeat(n)}${"]".repeat(n)}`),
        fc.integer({ min: 50, max: 6_000 }).map((n) => "{\"a\":".repeat(n)),
        fc.constantFrom("{", "[", "{\"a\":}", "{'a':1}", "\"\\u12\"", "NaN", "{\"a\":1,}", "\uFEFF{}", "\"\\u0000\"")
      ).map((text) => ({ text, json: true }))
    },
    {
      weight: 1,
      arbitrary: fc.integer({ min: LIMIT + 1, max: LIMIT * 3 }).map((n) => ({
        text: JSON.stringify({ ...valid, padding: "x".repeat(n) }),
        json: true
      }))
    },
    { weight: 1, arbitrary: fc.string({ maxLength: 100 }).map((text) => ({ text, json: false })) }
  )

/** A hostile path parameter, already encoded for the URL. */
const ids = (real: string): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(real, "ses_nope", "demo") },
    { weight: 3, arbitrary: fc.string({ unit: "binary", maxLength: 40 }).map((s) => encodeURIComponent(s || "x")) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        "a%00b",
        "%00",
        "%",
        "%zz",
        "%E0%A4%A",
        "%ED%A0%80",
        "..",
        "%2E%2E%2Fetc",
        "a%2Fb",
        "x".repeat(101),
        "ses_%F0%9F%90%91",
        "%0d%0aSet-Cookie:%20x",
        "' OR 1=1 --"
      )
    }
  )

/** A hostile query value, already encoded. */
const queryValues: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("true", "false", "1", "10", "0", "-1", "1e400", "incident:1", "idle", "running", ""),
  fc.string({ unit: "binary", maxLength: 30 }).map(encodeURIComponent),
  fc.constantFrom("%00", "%", "%zz", "%ED%A0%80", "x".repeat(3_000), "AAAA", "MTox")
)

const methods = fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD")

/** One request against `route`, with hostile parts. */
const requests = (route: Route, real: string, valid: Record<string, unknown>): fc.Arbitrary<Request> =>
  fc.record({
    method: fc.oneof({ weight: 4, arbitrary: fc.constant(route.method) }, { weight: 1, arbitrary: methods }),
    id: ids(real),
    query: fc.array(
      fc.tuple(
        fc.oneof(
          { weight: 3, arbitrary: route.query.length > 0 ? fc.constantFrom(...route.query) : fc.constant("q") },
          { weight: 1, arbitrary: fc.string({ maxLength: 8 }).map(encodeURIComponent) }
        ),
        queryValues
      ),
      { maxLength: 3 }
    ),
    contentType: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom(...jsonTypes) },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          "",
          "text/plain",
          "multipart/form-data; boundary=x",
          "application/x-www-form-urlencoded",
          "application/json; charset=utf-16",
          "application/jsonx",
          "image/png",
          "garbage"
        )
      }
    ),
    lastEventId: fc.option(fc.constantFrom("3", "-1", "abc", "1e999", "9".repeat(400)), { nil: undefined }),
    authorization: fc.option(fc.string({ unit: "grapheme-ascii", maxLength: 60 }).map((s) => `Bearer ${s}`), {
      nil: undefined
    }),
    body: bodies(valid)
  }).map(({ authorization, body, contentType, id, lastEventId, method, query }) => {
    const path = route.path.replace("{id}", id)
    const search = query.map(([name, value]) => `${name}=${value}`).join("&")
    const headers: Record<string, string> = {}
    const sendsBody = method !== "GET" && method !== "HEAD"
    if (sendsBody && contentType !== "") headers["content-type"] = body.json ? contentType : "text/plain"
    if (lastEventId !== undefined) headers["last-event-id"] = lastEventId
    if (authorization !== undefined) headers.authorization = authorization.replace(/[\r\n]/g, "")
    return {
      method,
      target: search === "" ? path : `${path}?${search}`,
      headers,
      body: sendsBody && (route.hasBody || body.text.length < 200) ? body.text : undefined
    }
  })

/** The problem with one answer, if any: a 5xx, an error that is not short JSON with `_tag` and `message`. */
const problem = (request: Request, response: Raw): string | undefined => {
  if (response.status >= 500) return `answered ${response.status}`
  if (response.status < 400) return undefined
  // A HEAD answer has no body by definition; its status and headers are what is checked.
  if (request.method === "HEAD") {
    return response.status === 405 && !response.headers.allow
      ? "405 without Allow"
      : undefined
  }
  if (response.contentType.length > 0 && !response.contentType.includes("application/json")) {
    return `error answered as ${response.contentType}`
  }
  if (response.text.length === 0) return "empty error"
  if (response.text.length > 4_096) return `error body of ${response.text.length} chars`
  try {
    const body = JSON.parse(response.text) as unknown
    if (!isRecord(body) || typeof body._tag !== "string") return "error body without _tag"
    if (typeof body.message !== "string" || body.message.length === 0) return "error body without message"
  } catch {
    return "error body is not JSON"
  }
  if (response.status === 405 && response.headers.allow === undefined) return "405 without Allow"
  return undefined
}

layer(
  Server.layer(
    settings({ demo: { enabled: true, delayMs: 0 }, server: { ...settings().server, bodyLimitBytes: LIMIT } })
  ),
  { excludeTestServices: true }
)("Fuzzed HTTP surface", (it) => {
  it.effect(
    `answers ${RUNS} hostile requests over every route of /openapi.json: in time, never 5xx, errors as short JSON`,
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
        const routes = routesOf(JSON.parse((yield* raw(`${url}/openapi.json`)).text))
        // Every route of the contract is in the document, so the fuzz covers each one.
        expect(routes.length).toBeGreaterThanOrEqual(16)
        const valid: Record<string, Record<string, unknown>> = {
          "/v1/agents": { id: "fuzzed", name: "Fuzzed", instructions: "Investigate.", tier: "demo", tools: [] },
          "/v1/sessions": { agentId: "demo", scope: "fuzz:2", prompt: "Why is search slow?" },
          "/v1/sessions/{id}/messages": { text: "And now?" },
          "/v1/sessions/{id}/approvals": { token: view.pending[0]?.token ?? "t", decision: "reject" }
        }
        const all = fc.oneof(...routes.map((route) => requests(route, id, valid[route.path] ?? {})))
        // Each answer is judged as it arrives and only its verdict kept: the heap measured is the server's.
        const send = (request: Request) =>
          Effect.map(
            raw(`${url}${request.target}`, {
              method: request.method,
              headers: request.headers,
              timeoutMs: ANSWER_WITHIN_MS,
              ...(request.body === undefined ? {} : { body: request.body })
            }),
            (response) => {
              const found = problem(request, response)
              return {
                status: response.status,
                failure: found === undefined ?
                  undefined :
                  `${request.method} ${request.target.slice(0, 120)} ${JSON.stringify(request.headers).slice(0, 200)} ${
                    (request.body ?? "").slice(0, 120)
                  } → ${found}: ${response.text.slice(0, 200)}`
              }
            }
          )
        const burst = (seed: number) =>
          Effect.suspend(() => Effect.forEach(fc.sample(all, { seed, numRuns: RUNS / 2 }), send, { concurrency: 16 }))

        // Warm up (JIT, caches, the first sessions), then measure two bursts against that baseline.
        yield* burst(SEED - 1)
        const baseline = yield* heapAfterGc()
        const answers = [...(yield* burst(SEED)), ...(yield* burst(SEED + 1))]
        const after = yield* heapAfterGc()

        const statuses: Record<number, number> = {}
        const failures: Array<string> = []
        for (const { failure, status } of answers) {
          statuses[status] = (statuses[status] ?? 0) + 1
          if (failure !== undefined) failures.push(failure)
        }
        expect(failures.slice(0, 5), JSON.stringify(statuses)).toEqual([])
        expect(answers).toHaveLength(RUNS)
        // The fuzz reaches past the front door: some requests succeed, and every kind of refusal the generator aims
        // at is met — a bad body or parameter, an unknown id, a wrong method, an oversized body, a wrong media type.
        expect(Object.keys(statuses).filter((s) => Number(s) < 300).length).toBeGreaterThan(0)
        expect(Object.keys(statuses).map(Number), JSON.stringify(statuses)).toEqual(
          expect.arrayContaining([400, 404, 405, 413, 415])
        )
        // Memory back near its baseline: what the bursts added is the sessions they created, not their requests.
        expect((after - baseline) / 1024 / 1024, `heap ${baseline} → ${after}`).toBeLessThan(24)
        expect((yield* raw(`${url}/healthz`)).status).toBe(200)
        expect((yield* api.system.readyz()).status).toBe("ready")
      }),
    { timeout: 240_000 }
  )
})
