/**
 * Protocol — one MCP connection (an HTTP session at `/mcp`, or `corral mcp` on stdio): an SDK `Server` whose
 * handlers answer from the `Catalog` as one principal. The SDK speaks the protocol (initialize, ping, cancellation,
 * JSON-RPC errors); this module maps requests to the catalog and back:
 *
 * - `tools/call` runs on an Effect fiber tied to the request's abort signal, so `notifications/cancelled` interrupts
 *   it (and `Runs` cancels the session's burst). Progress notifications go out when the request carried a
 *   `progressToken`, one per persisted turn, numbered from 1.
 * - A pending write is put to the person through `elicitation/create` when the client declared the elicitation
 *   capability; its answer waits at most `approvalWaitMs` (then the write stays pending, never a hang).
 * - `logging/setLevel` sets the level below which log notifications are not sent (default `info`).
 * - `resources/subscribe` watches a session resource: `notifications/resources/updated` per new turn and landing,
 *   at most 100 subscriptions per connection, all ended when the connection closes.
 * - `completion/complete` completes the resource templates' `id` and `agent` arguments.
 *
 * Errors: an unknown tool is JSON-RPC -32602, an unknown resource -32002, a store that fails -32603 (message kept).
 *
 * `make` registers the handlers; a call's host (progress, logs, elicited approvals) is internal/callHost.ts, the
 * subscriptions internal/subscriptions.ts.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  ErrorCode,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Either, Runtime } from "effect"
import type { Principal } from "../../domain/Principal.js"
import type * as AgentFeed from "./AgentFeed.js"
import type * as Catalog from "./Catalog.js"
import * as CallHost from "./internal/callHost.js"
import * as Subscriptions from "./internal/subscriptions.js"

/** Bounds of one connection. */
export interface Options {
  /** How long an approval asked through elicitation waits for the person's answer (then it stays pending). */
  readonly approvalWaitMs?: number
  /** The server's version, as `serverInfo.version`. */
  readonly version?: string
  /** Agent publications: each one of `by`'s org sends the host `notifications/tools/list_changed`. */
  readonly feed?: AgentFeed.Service
}

/** The default wait for an elicited approval: long enough for a person to read the call, short of forever. */
export const defaultApprovalWaitMs = 10 * 60_000

/** JSON-RPC code of "resource not found" (MCP). */
export const RESOURCE_NOT_FOUND = -32002

const instructions = "Corral runs bounded LLM agent sessions. Each `run_<agent>` tool runs one published agent in a " +
  "scope and returns its landed report with the exit reason; progress arrives per turn when you send a progress " +
  "token, and cancelling the call cancels the session. A write an agent wants to make waits for a person: it is " +
  "asked through elicitation when you support it, otherwise the answer carries an approval token for the `approve` " +
  "tool. Sessions are resources (corral://sessions/{id}: transcript and report)."

/**
 * An SDK server for one connection of `by`, answering from `catalog`; effects run on `runtime` (its logger). The
 * caller connects it to a transport; a caller that sets `onclose` must call the one set here first (it ends the
 * subscriptions).
 */
export const make = (
  catalog: Catalog.Service,
  by: Principal,
  runtime: Runtime.Runtime<never>,
  options: Options = {}
): Server => {
  const server = new Server(
    { name: "corral", title: "Corral", version: options.version ?? "0.1.0" },
    {
      capabilities: {
        tools: { listChanged: options.feed !== undefined },
        resources: { subscribe: true },
        logging: {},
        completions: {}
      },
      instructions
    }
  )
  // What the SDK cannot answer itself (a response for a stream that dropped, a transport failure) is logged.
  server.onerror = (error) => Runtime.runFork(runtime)(Effect.logWarning(`MCP: ${error.message}`))
  const connection: CallHost.Connection = {
    level: "info",
    approvalWaitMs: options.approvalWaitMs ?? defaultApprovalWaitMs
  }
  const run = <A, E extends { readonly _tag: string; readonly message: string }>(
    effect: Effect.Effect<A, E>,
    signal?: AbortSignal
  ) => runAsRpc(runtime, effect, signal)

  server.setRequestHandler(SetLevelRequestSchema, (request) => {
    connection.level = request.params.level
    return {}
  })

  server.setRequestHandler(
    ListToolsRequestSchema,
    () => run(Effect.map(catalog.listTools(by), (tools) => ({ tools: [...tools] })))
  )

  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const host = CallHost.make(server, connection, request.params._meta?.progressToken, extra)
    return run(catalog.callTool(by, request.params.name, request.params.arguments ?? {}, host), extra.signal)
  })

  server.setRequestHandler(
    ListResourcesRequestSchema,
    (request) =>
      run(Effect.map(catalog.listResources(by, request.params?.cursor), (page) => ({
        resources: [...page.resources],
        ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor })
      })))
  )

  server.setRequestHandler(
    ListResourceTemplatesRequestSchema,
    () => Promise.resolve({ resourceTemplates: [...catalog.templates] })
  )

  server.setRequestHandler(ReadResourceRequestSchema, (request) => run(catalog.readResource(by, request.params.uri)))

  // Subscriptions: one fiber per watched session, ended by unsubscribe or when the connection closes.
  const watching: Subscriptions.Watching = new Map()
  server.setRequestHandler(
    SubscribeRequestSchema,
    (request) =>
      Subscriptions.subscribe(server, runtime, watching, request.params.uri, (uri) => run(catalog.watch(by, uri)))
  )
  server.setRequestHandler(
    UnsubscribeRequestSchema,
    (request) => Subscriptions.unsubscribe(runtime, watching, request.params.uri)
  )
  // A published agent is a new (or changed) `run_<agent>` tool of this org: tell the host to list again. Sent only
  // once the connection is initialized; a failed send (the connection is going away) is dropped.
  const stopListening = options.feed?.listen(by.orgId, () => {
    if (server.getClientCapabilities() === undefined) return
    server.sendToolListChanged().catch(() => undefined)
  })
  server.onclose = () => {
    Subscriptions.unwatchAll(runtime, watching)
    stopListening?.()
  }

  server.setRequestHandler(CompleteRequestSchema, (request) =>
    run(
      Effect.map(
        catalog.complete(by, request.params.ref, request.params.argument.name, request.params.argument.value),
        (values) => ({
          completion: { values: values.slice(0, 100), total: values.length, hasMore: values.length > 100 }
        })
      )
    ))

  return server
}

/** Runs `effect` on `runtime`, interrupted when `signal` aborts; typed failures become JSON-RPC errors. */
const runAsRpc = <A, E extends { readonly _tag: string; readonly message: string }>(
  runtime: Runtime.Runtime<never>,
  effect: Effect.Effect<A, E>,
  signal?: AbortSignal
): Promise<A> =>
  Runtime.runPromise(runtime)(Effect.either(effect), signal === undefined ? undefined : { signal }).then(
    (result) => {
      if (Either.isRight(result)) return result.right
      const error = result.left
      switch (error._tag) {
        case "UnknownTool":
          throw new McpError(ErrorCode.InvalidParams, error.message)
        case "ResourceNotFound":
          throw new McpError(RESOURCE_NOT_FOUND, error.message)
        default:
          throw new McpError(ErrorCode.InternalError, error.message)
      }
    }
  )
