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
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  ElicitResultSchema,
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
import type { LoggingLevel, ServerNotification } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Either, Fiber, Runtime, Stream } from "effect"
import type { Principal } from "../../domain/Principal.js"
import type * as AgentFeed from "./AgentFeed.js"
import type * as Catalog from "./Catalog.js"
import type * as Runs from "./Runs.js"

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

/** How many resources one connection may watch at once (each is a live subscription to a session's events). */
const MAX_SUBSCRIPTIONS = 100

/** JSON-RPC code of "resource not found" (MCP). */
export const RESOURCE_NOT_FOUND = -32002

const severity: ReadonlyArray<LoggingLevel> = [
  "debug",
  "info",
  "notice",
  "warning",
  "error",
  "critical",
  "alert",
  "emergency"
]

const instructions = "Corral runs bounded LLM agent sessions. Each `run_<agent>` tool runs one published agent in a " +
  "scope and returns its landed report with the exit reason; progress arrives per turn when you send a progress " +
  "token, and cancelling the call cancels the session. A write an agent wants to make waits for a person: it is " +
  "asked through elicitation when you support it, otherwise the answer carries an approval token for the `approve` " +
  "tool. Sessions are resources (corral://sessions/{id}: transcript and report)."

/** The form of an approval: one required choice, approve or reject (titled single-select, SEP-1330). */
const approvalSchema = {
  type: "object" as const,
  properties: {
    decision: {
      type: "string" as const,
      title: "Decision",
      description: "Approve runs the call exactly as shown; reject tells the agent it was not run.",
      oneOf: [
        { const: "approve", title: "Approve: run it as shown" },
        { const: "reject", title: "Reject: do not run it" }
      ]
    }
  },
  required: ["decision"]
}

/** The elicitation message of a pending write: the exact call. */
const approvalMessage = (request: Runs.ApprovalRequest): string =>
  `Corral agent "${request.agentId}" (session ${request.sessionId}) wants to run the write tool "${request.tool}" ` +
  `with these arguments:\n${request.arguments}\n\nApprove it?`

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
  const approvalWaitMs = options.approvalWaitMs ?? defaultApprovalWaitMs
  let level: LoggingLevel = "info"

  /** Runs `effect` on the runtime, interrupted when `signal` aborts; typed failures become JSON-RPC errors. */
  const run = <A, E extends { readonly _tag: string; readonly message: string }>(
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

  server.setRequestHandler(SetLevelRequestSchema, (request) => {
    level = request.params.level
    return {}
  })

  server.setRequestHandler(
    ListToolsRequestSchema,
    () => run(Effect.map(catalog.listTools(by), (tools) => ({ tools: [...tools] })))
  )

  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    const token = request.params._meta?.progressToken
    let step = 0
    const notify = (notification: ServerNotification) =>
      Effect.promise(() => extra.sendNotification(notification).catch(() => undefined))
    // Form elicitation: declared as `form`, or as an empty object (clients of 2025-06-18, before modes existed).
    const elicitation = server.getClientCapabilities()?.elicitation
    const canElicit = elicitation !== undefined && (elicitation.form !== undefined || elicitation.url === undefined)
    const host: Runs.Host = {
      progress: (message) =>
        token === undefined
          ? Effect.void
          : Effect.suspend(() =>
            notify({ method: "notifications/progress", params: { progressToken: token, progress: ++step, message } })
          ),
      log: (at, message) =>
        severity.indexOf(at) < severity.indexOf(level)
          ? Effect.void
          : notify({ method: "notifications/message", params: { level: at, logger: "corral", data: message } }),
      ...(canElicit
        ? {
          decide: (approval) =>
            Effect.promise(() =>
              extra.sendRequest(
                {
                  method: "elicitation/create",
                  // No `mode`: a form is the default, and clients of 2025-06-18 know no other field.
                  params: { message: approvalMessage(approval), requestedSchema: approvalSchema }
                },
                ElicitResultSchema,
                { timeout: approvalWaitMs, signal: extra.signal }
              ).then(
                (answer): Runs.Decision =>
                  answer.action === "decline"
                    ? "reject"
                    : answer.action === "accept" &&
                        (answer.content?.["decision"] === "approve" || answer.content?.["decision"] === "reject")
                    ? answer.content["decision"]
                    : "undecided",
                // A timeout, a cancelled request or a client that cannot answer: the write stays pending.
                () => "undecided" as const
              )
            )
        }
        : {})
    }
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
  const watching = new Map<string, Fiber.RuntimeFiber<void, unknown>>()
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    const uri = request.params.uri
    if (watching.has(uri)) return {}
    if (watching.size >= MAX_SUBSCRIPTIONS) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `at most ${MAX_SUBSCRIPTIONS} subscriptions per connection: unsubscribe one first`
      )
    }
    const updates = await run(catalog.watch(by, uri))
    watching.set(
      uri,
      Runtime.runFork(runtime)(
        updates.pipe(
          Stream.runForEach(() => Effect.promise(() => server.sendResourceUpdated({ uri }).catch(() => undefined))),
          Effect.catchAll((error) => Effect.logWarning(`MCP: the subscription to ${uri} ended: ${error.message}`))
        )
      )
    )
    return {}
  })
  server.setRequestHandler(UnsubscribeRequestSchema, (request) => {
    const fiber = watching.get(request.params.uri)
    watching.delete(request.params.uri)
    if (fiber !== undefined) Runtime.runFork(runtime)(Fiber.interrupt(fiber))
    return {}
  })
  // A published agent is a new (or changed) `run_<agent>` tool of this org: tell the host to list again. Sent only
  // once the connection is initialized; a failed send (the connection is going away) is dropped.
  const stopListening = options.feed?.listen(by.orgId, () => {
    if (server.getClientCapabilities() === undefined) return
    server.sendToolListChanged().catch(() => undefined)
  })
  const unwatch = () => {
    for (const fiber of watching.values()) Runtime.runFork(runtime)(Fiber.interrupt(fiber))
    watching.clear()
    stopListening?.()
  }
  server.onclose = unwatch

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
