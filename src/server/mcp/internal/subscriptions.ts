/**
 * subscriptions — the resources one MCP connection (Protocol) watches: one fiber per watched session resource,
 * sending `notifications/resources/updated` per new turn and landing, ended by unsubscribe or when the connection
 * closes. At most `MAX_SUBSCRIPTIONS` per connection: each is a live subscription to a session's events.
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Fiber, Runtime, Stream } from "effect"

/** How many resources one connection may watch at once. */
export const MAX_SUBSCRIPTIONS = 100

/** The watched resources of one connection, by URI. */
export type Watching = Map<string, Fiber.RuntimeFiber<void, unknown>>

/** Watches `uri` (a second subscription to it is a no-op); a JSON-RPC error past the limit. */
export const subscribe = async (
  server: Server,
  runtime: Runtime.Runtime<never>,
  watching: Watching,
  uri: string,
  updates: (uri: string) => Promise<Stream.Stream<unknown, { readonly message: string }>>
): Promise<Record<string, never>> => {
  if (watching.has(uri)) return {}
  if (watching.size >= MAX_SUBSCRIPTIONS) {
    throw new McpError(
      ErrorCode.InvalidParams,
      `at most ${MAX_SUBSCRIPTIONS} subscriptions per connection: unsubscribe one first`
    )
  }
  const stream = await updates(uri)
  watching.set(
    uri,
    Runtime.runFork(runtime)(
      stream.pipe(
        Stream.runForEach(() => Effect.promise(() => server.sendResourceUpdated({ uri }).catch(() => undefined))),
        Effect.catchAll((error) => Effect.logWarning(`MCP: the subscription to ${uri} ended: ${error.message}`))
      )
    )
  )
  return {}
}

/** Stops watching `uri`, if it was watched. */
export const unsubscribe = (
  runtime: Runtime.Runtime<never>,
  watching: Watching,
  uri: string
): Record<string, never> => {
  const fiber = watching.get(uri)
  watching.delete(uri)
  if (fiber !== undefined) Runtime.runFork(runtime)(Fiber.interrupt(fiber))
  return {}
}

/** Stops watching everything (the connection closed). */
export const unwatchAll = (runtime: Runtime.Runtime<never>, watching: Watching): void => {
  for (const fiber of watching.values()) Runtime.runFork(runtime)(Fiber.interrupt(fiber))
  watching.clear()
}
