/**
 * A Corral server for the money tests: two orgs' API keys (acme, globex), one provider `gpt` priced at $2 / $8 per
 * million tokens behind a fake over real HTTP, on `database`; and a JSON caller with a key, answering status,
 * `Retry-After` and body.
 */
import { Effect, Layer } from "effect"
import type { Settings } from "../../src/config/Config.js"
import { sha256 } from "../../src/server/Authentication.js"
import * as Server from "../../src/server/Server.js"
import { baseUrl, settings } from "./ServerHarness.js"

export const acme = "ck_money_acme_0123456789abcdef"
export const globex = "ck_money_globex_0123456789abcde"

/** The server's base URL, up for the scope. */
export const pricedServer = (openAiBaseUrl: string, overrides: Partial<Settings> = {}) =>
  Effect.flatMap(
    Layer.build(Server.layer(settings({
      apiKeys: [
        { sha256: sha256(acme), orgId: "acme", userId: "ops" },
        { sha256: sha256(globex), orgId: "globex", userId: "ops" }
      ],
      models: {
        providers: {
          gpt: {
            api: "openai",
            baseUrl: openAiBaseUrl,
            model: "gpt-4.1",
            pricing: { inputPerMTok: 2, outputPerMTok: 8 }
          }
        },
        tiers: { default: ["gpt"] }
      },
      ...overrides
    }))),
    (context) => Effect.provide(baseUrl, context)
  )

/** A JSON call to the server at `url` with API key `key`. */
export const caller = (url: string) => (key: string, method: string, path: string, body?: unknown) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    })
    return {
      status: response.status,
      retryAfter: response.headers.get("retry-after"),
      body: await response.json() as Record<string, unknown>
    }
  })
