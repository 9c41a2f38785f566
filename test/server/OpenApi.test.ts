/**
 * The OpenAPI document the server serves is self-contained: every `$ref` in it points at something inside it. A
 * dangling reference (a schema pasted in with its own `#/$defs/...`) makes client generators refuse the whole
 * document, so this runs with `npm test`, without the external tools `scripts/openapi-check.sh` drives.
 */
import { OpenApi } from "@effect/platform"
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Api } from "../../src/server/Api.js"
import * as Server from "../../src/server/Server.js"
import { baseUrl, raw, settings } from "../support/ServerHarness.js"

/** Every `$ref` in `node`, with the JSON pointer of the object holding it. */
const refsOf = (node: unknown, at = "#"): ReadonlyArray<{ readonly at: string; readonly ref: string }> => {
  if (Array.isArray(node)) return node.flatMap((item, i) => refsOf(item, `${at}/${i}`))
  if (typeof node !== "object" || node === null) return []
  return Object.entries(node).flatMap(([key, value]) =>
    key === "$ref" && typeof value === "string"
      ? [{ at, ref: value }]
      : refsOf(value, `${at}/${key.replace(/~/g, "~0").replace(/\//g, "~1")}`)
  )
}

/** Whether the local reference `ref` (`#/a/b`) names a value of `document`; any other reference does not. */
const resolves = (document: unknown, ref: string): boolean => {
  if (!ref.startsWith("#/")) return false
  let node: unknown = document
  for (const escaped of ref.slice(2).split("/")) {
    const token = decodeURIComponent(escaped).replace(/~1/g, "/").replace(/~0/g, "~")
    if (typeof node !== "object" || node === null || !Object.hasOwn(node, token)) return false
    node = (node as Record<string, unknown>)[token]
  }
  return node !== undefined
}

layer(Server.layer(settings()), { excludeTestServices: true })("OpenAPI document", (it) => {
  it.effect("every $ref in the served /openapi.json resolves inside the document", () =>
    Effect.gen(function*() {
      const served = yield* raw(`${yield* baseUrl}/openapi.json`)
      expect(served.status).toBe(200)
      const document: unknown = JSON.parse(served.text)
      const refs = refsOf(document)
      expect(refs.length).toBeGreaterThan(0)
      expect(refs.filter(({ ref }) => !resolves(document, ref))).toEqual([])
    }))

  it.effect("publishing an agent is described by the AgentSpec schema, exit policy included", () =>
    Effect.gen(function*() {
      const document = JSON.parse((yield* raw(`${yield* baseUrl}/openapi.json`)).text)
      const payload = document.paths["/v1/agents"].post.requestBody.content["application/json"].schema
      expect(payload).toEqual({ $ref: "#/components/schemas/AgentDocument" })
      expect(document.components.schemas.AgentDocument.$ref).toBe("#/components/schemas/AgentSpec")
      expect(Object.keys(document.components.schemas.AgentSpec.properties)).toEqual(
        expect.arrayContaining(["id", "version", "instructions", "tools", "limits", "exitPolicy"])
      )
    }))

  it.effect("the served document is the one OpenApi.fromApi builds in-process (what the CI check lints)", () =>
    Effect.gen(function*() {
      const served = JSON.parse((yield* raw(`${yield* baseUrl}/openapi.json`)).text)
      expect(served).toEqual(JSON.parse(JSON.stringify(OpenApi.fromApi(Api))))
    }))
})
