/**
 * McpCredentials — where the OAuth state of MCP servers lives between connections and restarts: the client
 * registration, the access and refresh tokens, and the discovered authorization server (`auth` in `mcpServers`).
 *
 * The failure it prevents: tokens written into the configuration file (or a plain file next to it) leak with every
 * copy of it, and tokens kept only in memory make every restart ask a person to sign in again. So the config names
 * only the variable holding a client secret, and the tokens go to this port: in memory for the memory store, in the
 * database (`mcp_credentials`) for the SQL stores — sealed there with AES-256-GCM under a key from the environment
 * (`CORRAL_SECRET_KEY`), so a database dump or backup holds no usable token. Without that key a SQL store keeps them
 * in memory only (and says so at start): an unsealed token is never written.
 *
 * A value that does not open with the current key (the key changed, a row was tampered with) reads as absent, with
 * a warning: the server then asks for authorization again instead of Corral presenting garbage.
 */
import { Context, Effect, Layer, Option } from "effect"
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto"
import { PersistenceFailed } from "../domain/Errors.js"

/** The port: one opaque JSON document per key (Corral uses `<server name> <server URL>`). */
export interface Service {
  /** The document kept for `key`, if any. */
  readonly load: (key: string) => Effect.Effect<Option.Option<string>, PersistenceFailed>
  /** Replaces the document kept for `key`. */
  readonly save: (key: string, value: string) => Effect.Effect<void, PersistenceFailed>
  /** Forgets the document kept for `key` (`corral mcp logout`); whether there was one. */
  readonly remove: (key: string) => Effect.Effect<boolean, PersistenceFailed>
}

/**
 * The key of server `name`'s OAuth state: its name AND its URL, so the tokens of one server are never presented to
 * another one the name now points at (a server whose URL changes starts over).
 */
export const keyFor = (name: string, url: string): string => `${name} ${url}`

/** The OAuth state of MCP servers (see the module header); optional: without it, tokens live as long as the process. */
export class McpCredentials extends Context.Tag("corral/tools/McpCredentials")<McpCredentials, Service>() {}

/** A map in memory (the memory store, `corral mcp inspect`): gone with the process. */
export const makeMemory = (): Service => {
  const kept = new Map<string, string>()
  return {
    load: (key) => Effect.sync(() => Option.fromNullable(kept.get(key))),
    save: (key, value) => Effect.sync(() => void kept.set(key, value)),
    remove: (key) => Effect.sync(() => kept.delete(key))
  }
}

/** `makeMemory` as a layer. */
export const layerMemory: Layer.Layer<McpCredentials> = Layer.sync(McpCredentials, makeMemory)

const VERSION = "v1"
const IV_BYTES = 12

/**
 * The 32-byte AES key derived from `secret` (HKDF-SHA-256), so any long random string works as `CORRAL_SECRET_KEY`.
 * Fails (as a defect: it is a configuration check made at start) on a secret shorter than 16 characters.
 */
export const keyOf = (secret: string): Buffer => {
  if (secret.length < 16) {
    throw new Error("CORRAL_SECRET_KEY: expected at least 16 characters (e.g. `openssl rand -hex 32`)")
  }
  return Buffer.from(hkdfSync("sha256", secret, "corral", "mcp-credentials", 32))
}

/** Seals `plain` with AES-256-GCM: `v1.<iv>.<tag>.<ciphertext>`, base64url parts; `key` names the row (bound as AAD). */
export const seal = (aesKey: Buffer, key: string, plain: string): string => {
  const iv = randomBytes(IV_BYTES)
  const cipher = createCipheriv("aes-256-gcm", aesKey, iv)
  cipher.setAAD(Buffer.from(key))
  const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final()])
  return [VERSION, iv, cipher.getAuthTag(), body].map((p) => typeof p === "string" ? p : p.toString("base64url"))
    .join(".")
}

/** Opens what `seal` made for the same `key`; `undefined` when it does not open (another key, tampered, garbage). */
export const open = (aesKey: Buffer, key: string, sealed: string): string | undefined => {
  const [version, iv, tag, body] = sealed.split(".")
  if (version !== VERSION || iv === undefined || tag === undefined || body === undefined) return undefined
  try {
    const decipher = createDecipheriv("aes-256-gcm", aesKey, Buffer.from(iv, "base64url"))
    decipher.setAAD(Buffer.from(key))
    decipher.setAuthTag(Buffer.from(tag, "base64url"))
    return Buffer.concat([decipher.update(Buffer.from(body, "base64url")), decipher.final()]).toString("utf8")
  } catch {
    return undefined
  }
}

/**
 * `inner` with every value sealed before it is saved and opened after it is loaded (see `seal`). A value that does
 * not open is absent, with a warning naming the key (not the value).
 */
export const sealed = (inner: Service, aesKey: Buffer): Service => ({
  load: (key) =>
    Effect.flatMap(inner.load(key), (found) => {
      if (Option.isNone(found)) return Effect.succeed(Option.none())
      const plain = open(aesKey, key, found.value)
      return plain === undefined
        ? Effect.as(
          Effect.logWarning(
            `stored MCP credentials of "${key}" do not open with CORRAL_SECRET_KEY (the key changed?): ignored; the ` +
              "server will ask for authorization again"
          ),
          Option.none()
        )
        : Effect.succeed(Option.some(plain))
    }),
  save: (key, value) => inner.save(key, seal(aesKey, key, value)),
  remove: inner.remove
})

/** A failure to read or write credentials, for adapters that have no `PersistenceFailed` of their own. */
export const failed = (operation: string, message: string): PersistenceFailed =>
  new PersistenceFailed({ operation, message })
