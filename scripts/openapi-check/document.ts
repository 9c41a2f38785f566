/**
 * Writes the OpenAPI document the server serves at `/openapi.json` to the file named by the first argument. It is
 * built in-process exactly as `HttpApiBuilder.middlewareOpenApi` builds it (`OpenApi.fromApi(Api)`, no options),
 * so the check needs no server, no store and no port; test/server/OpenApi.test.ts asserts the two are equal.
 */
import { OpenApi } from "@effect/platform"
import { writeFileSync } from "node:fs"
import { Api } from "../../src/server/Api.js"

const out = process.argv[2]
if (out === undefined) {
  console.error("usage: tsx scripts/openapi-check/document.ts OUT.json")
  process.exit(2)
}
writeFileSync(out, JSON.stringify(OpenApi.fromApi(Api), null, 2) + "\n")
