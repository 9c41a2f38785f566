/**
 * A sealed `McpCredentials` store over a plain Map whose raw (sealed) values the test can read: what the OAuth and
 * login suites use to check that tokens are stored, and stored sealed.
 */
import { Effect, Layer, Option } from "effect"
import * as McpCredentials from "../../src/tools/McpCredentials.js"

export const inspectable = () => {
  const raw = new Map<string, string>()
  const inner: McpCredentials.Service = {
    load: (key) => Effect.sync(() => Option.fromNullable(raw.get(key))),
    save: (key, value) => Effect.sync(() => void raw.set(key, value)),
    remove: (key) => Effect.sync(() => raw.delete(key))
  }
  const key = McpCredentials.keyOf("a test key of enough length")
  return { raw, layer: Layer.succeed(McpCredentials.McpCredentials, McpCredentials.sealed(inner, key)) }
}
