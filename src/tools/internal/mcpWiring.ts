/**
 * mcpWiring — how the MCP registry (McpRegistry) wires its servers, each a plain function of what it needs: the
 * connection's callbacks (a changed tool list, a server's question or sample request), a server's OAuth session over
 * the credentials store, a call's notices, a server's tools listed again, the probe of the servers that are down, and
 * the servers' statuses.
 */
import { Duration, Effect, Either, Option, Runtime } from "effect"
import type { Context } from "effect"
import type { Elicitations } from "../Elicitations.js"
import * as McpConfig from "../McpConfig.js"
import * as Credentials from "../McpCredentials.js"
import type { McpCredentials } from "../McpCredentials.js"
import type { ToolContext, ToolServerStatus } from "../ToolExecutor.js"
import type { ToolNotices } from "../ToolNotices.js"
import type * as McpCall from "./mcpCall.js"
import type { Entry } from "./mcpCall.js"
import * as ClientRequests from "./mcpClientRequests.js"
import * as Connection from "./mcpConnection.js"
import * as McpElicit from "./mcpElicit.js"
import { entriesOf } from "./mcpEntries.js"
import * as McpOAuth from "./mcpOAuth.js"
import * as McpSample from "./mcpSample.js"

/** The connections' callbacks: a changed list is queued for the refresher; questions and samples are answered. */
export const connectionOptions = (
  options: {
    readonly connectTimeoutMs: number
    readonly restart: Connection.Options["restart"]
    readonly elicitations: Option.Option<Context.Tag.Service<Elicitations>>
    readonly notices: Option.Option<Context.Tag.Service<ToolNotices>>
  },
  onToolsChanged: (handle: Connection.Handle) => void,
  runtime: Runtime.Runtime<never>
): Connection.Options => {
  const runPromise = Runtime.runPromise(runtime)
  const { elicitations, notices } = options
  return {
    connectTimeoutMs: options.connectTimeoutMs,
    restart: options.restart,
    onToolsChanged,
    onElicit: (handle, params, signal) =>
      runPromise(McpElicit.answer({ elicitations, notices }, handle, params), { signal }),
    onSample: (handle, params, signal) =>
      runPromise(McpSample.answer(handle, params), { signal }).then(
        Either.getOrThrowWith((refusal) => ClientRequests.rpcError(refusal.code, refusal.message))
      )
  }
}

/** The OAuth session of an HTTP server configured with `auth`, its tokens kept in `credentials`; else `undefined`. */
export const oauthOf = (
  credentials: Context.Tag.Service<McpCredentials>,
  interaction: McpOAuth.Interaction,
  runtime: Runtime.Runtime<never>,
  name: string,
  config: McpConfig.McpServer
): McpOAuth.Session | undefined => {
  if (McpConfig.isStdio(config) || config.auth === undefined) return undefined
  const runPromise = Runtime.runPromise(runtime)
  const key = Credentials.keyFor(name, config.url)
  const vault: McpOAuth.Vault = {
    load: () =>
      runPromise(Effect.map(
        credentials.load(key),
        Option.match({ onNone: () => ({}), onSome: (json) => JSON.parse(json) as McpOAuth.Saved })
      )),
    save: (saved) => runPromise(credentials.save(key, JSON.stringify(saved)))
  }
  return new McpOAuth.Session(name, config.auth, vault, interaction)
}

/** A call's progress and its server's log messages, sent to `ToolNotices` when the runtime provides one. */
export const notifyFor = (
  notices: Option.Option<Context.Tag.Service<ToolNotices>>,
  runFork: ReturnType<typeof Runtime.runFork<never>>,
  ctx: ToolContext,
  name: string
): McpCall.Notify | undefined => {
  if (notices._tag === "None") return undefined
  const sink = notices.value
  const at = { sessionId: ctx.sessionId, callId: ctx.callId, name }
  return (notice) => {
    runFork(sink.notify(notice._tag === "progress" ? { ...notice, ...at } : { ...notice, ...at }))
  }
}

/**
 * Lists `handle`'s tools again into `listed` (logging what changed); a listing that fails keeps the server's last
 * list, with a warning, until its next change or restart.
 */
export const relist = (
  listed: Map<Connection.Handle, ReadonlyArray<Entry>>,
  connectTimeoutMs: number,
  handle: Connection.Handle
) =>
  Effect.matchEffect(Connection.listTools(handle, connectTimeoutMs), {
    onFailure: (reason) =>
      Effect.logWarning(
        `MCP server "${handle.name}": listing its tools again failed (${reason}); keeping the ` +
          `${listed.get(handle)?.length ?? 0} tools it listed last until its next change or restart`
      ),
    onSuccess: (tools) =>
      Effect.flatMap(entriesOf(handle, tools), (entries) =>
        Effect.suspend(() => {
          const before = new Set((listed.get(handle) ?? []).map((e) => e.def.name))
          const after = new Set(entries.map((e) => e.def.name))
          listed.set(handle, entries)
          const added = [...after].filter((n) => !before.has(n))
          const removed = [...before].filter((n) => !after.has(n))
          return added.length + removed.length === 0 ? Effect.void : Effect.logInfo(
            `MCP server "${handle.name}" changed its tools: added [${added.join(", ")}], ` +
              `removed [${removed.join(", ")}]`
          )
        }))
  })

/**
 * Every down server tried at once, concurrently; the re-list of those that came back (`refreshed`) awaited too; all
 * within `probeMs`.
 */
export const probeDown = (
  handles: ReadonlyArray<Connection.Handle>,
  probeMs: number,
  refreshed: Effect.Effect<void>
): Effect.Effect<void> =>
  Effect.suspend(() => {
    // Streamable HTTP servers only: they come back by themselves, and trying one costs a request. A stdio server is
    // down because Corral could not run it; spawning it for every burst would not bring it back sooner.
    const down = handles.filter((h) => !McpConfig.isStdio(h.config) && Connection.phaseOf(h) === "down")
    if (down.length === 0) return Effect.void
    return Effect.forEach(down, (h) => Connection.probe(h, probeMs), { concurrency: "unbounded", discard: true })
      .pipe(
        Effect.zipRight(
          Effect.suspend(() => down.some((h) => Connection.phaseOf(h) === "up") ? refreshed : Effect.void)
        ),
        Effect.timeout(Duration.millis(probeMs)),
        Effect.ignore
      )
  })

/** Each server's state, since when, its last error, and how many of the current tools are its own. */
export const statuses = (
  handles: ReadonlyArray<Connection.Handle>,
  entries: () => ReadonlyMap<string, Entry>
): Effect.Effect<ReadonlyArray<ToolServerStatus>> =>
  Effect.sync(() =>
    handles.map((handle): ToolServerStatus => {
      let tools = 0
      for (const entry of entries().values()) if (entry.handle === handle) tools++
      return {
        name: handle.name,
        transport: McpConfig.isStdio(handle.config) ? "stdio" : "http",
        state: Connection.phaseOf(handle),
        since: handle.since,
        lastError: handle.lastError,
        failures: handle.failures,
        tools
      }
    })
  )
