/**
 * Authentication — bearer API keys to a `Principal`, as an HttpApi security middleware.
 *
 * Keys live in the configuration only as their SHA-256 (a leaked config file leaks no key); a request's key is
 * hashed and looked up. A missing or unknown key is a 401 that says which: the org is never revealed. With no keys
 * configured at all the server is a local tool: it binds 127.0.0.1 only (see `Server`), every request acts as the
 * one local principal, and a warning says so at start.
 */
import { HttpApiMiddleware, HttpApiSecurity } from "@effect/platform"
import { Context, Effect, Layer, Redacted } from "effect"
import { createHash } from "node:crypto"
import type { ApiKey } from "../config/Config.js"
import { Principal } from "../domain/Principal.js"
import { Unauthorized } from "./HttpErrors.js"

/** The principal a request acts as. */
export class CurrentPrincipal extends Context.Tag("corral/server/CurrentPrincipal")<CurrentPrincipal, Principal>() {}

/** The principal of a server without API keys. */
export const localPrincipal = new Principal({ orgId: "local", userId: "local" })

/** The security middleware: bearer key in, `CurrentPrincipal` out, `Unauthorized` (401) otherwise. */
export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("corral/server/Authentication", {
  failure: Unauthorized,
  provides: CurrentPrincipal,
  security: { bearer: HttpApiSecurity.bearer }
}) {}

/** Lowercase hex SHA-256 of a key: the form `apiKeys[].sha256` holds. */
export const sha256 = (key: string): string => createHash("sha256").update(key, "utf8").digest("hex")

/** The orgs a server serves: each key's org, or the local org when there are no keys. */
export const orgs = (keys: ReadonlyArray<ApiKey>): ReadonlyArray<Principal> => {
  if (keys.length === 0) return [localPrincipal]
  const seen = new Map<string, Principal>()
  for (const key of keys) {
    if (!seen.has(key.orgId)) seen.set(key.orgId, new Principal({ orgId: key.orgId, userId: key.userId }))
  }
  return [...seen.values()]
}

/**
 * The middleware over `keys`. No keys: every request is `localPrincipal`, whatever it sends. Otherwise a request
 * without a bearer key, or with one whose hash is not configured, fails with `Unauthorized`.
 */
export const layer = (keys: ReadonlyArray<ApiKey>): Layer.Layer<Authentication> => {
  const byHash = new Map(keys.map((k) => [k.sha256, new Principal({ orgId: k.orgId, userId: k.userId })]))
  return Layer.succeed(
    Authentication,
    Authentication.of({
      bearer: (token) =>
        Effect.suspend(() => {
          if (byHash.size === 0) return Effect.succeed(localPrincipal)
          const key = Redacted.value(token).trim()
          if (key.length === 0) {
            return Effect.fail(
              new Unauthorized({ message: "missing API key: send `Authorization: Bearer <key>`" })
            )
          }
          const principal = byHash.get(sha256(key))
          return principal === undefined
            ? Effect.fail(new Unauthorized({ message: "unknown API key" }))
            : Effect.succeed(principal)
        })
    })
  )
}
