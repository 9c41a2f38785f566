/**
 * The /docs page: Scalar's API reference, rendered on its first request rather than at start-up.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Server from "../../src/server/Server.js"
import { baseUrl, raw, settings } from "../support/ServerHarness.js"

layer(Server.layer(settings()), { excludeTestServices: true })("GET /docs", (it) => {
  it.effect("serves Scalar's page with the OpenAPI document inlined, the same page on every request", () =>
    Effect.gen(function*() {
      const url = yield* baseUrl
      const [first, second] = yield* Effect.all([raw(`${url}/docs`), raw(`${url}/docs`)], { concurrency: 2 })
      expect(first.status).toBe(200)
      expect(first.contentType).toContain("text/html")
      expect(first.text).toContain("<script id=\"api-reference\" type=\"application/json\">")
      const spec = /<script id="api-reference" type="application\/json">([\s\S]*?)<\/script>/.exec(first.text)?.[1]
      const openapi = JSON.parse((yield* raw(`${url}/openapi.json`)).text) as { paths: object }
      expect(Object.keys((JSON.parse(spec ?? "{}") as { paths: object }).paths)).toEqual(Object.keys(openapi.paths))
      // Scalar's own script, inlined (no CDN).
      expect(first.text).toContain("@scalar/api-reference")
      expect(first.text.length).toBeGreaterThan(1_000_000)
      expect(second.text).toBe(first.text)
      expect((yield* raw(`${url}/docs`)).text).toBe(first.text)
    }))
})
