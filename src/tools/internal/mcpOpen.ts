/**
 * mcpOpen — opening and closing one client of an MCP server (mcpConnection): spawn or dial, initialize, list every
 * page of tools, finish an OAuth authorization the server asked for (then connect again), and notice a loss from the
 * SDK's callbacks; a close that ends a healthy HTTP session politely and bounds a stdio child's exit.
 */
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { StdioServerParameters } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { LoggingMessageNotificationSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Duration, Effect, Exit, FiberId } from "effect"
import * as McpConfig from "../McpConfig.js"
import * as Children from "./mcpChildren.js"
import * as ClientRequests from "./mcpClientRequests.js"
import type { Conn, Handle, Loss, Options } from "./mcpHandle.js"
import { describeError, lose } from "./mcpHandle.js"
import type * as McpOAuth from "./mcpOAuth.js"

const TOO_LARGE = /ReadBuffer exceeded maximum size/
/** What the SDK reports when a Streamable HTTP response or notification stream breaks mid-read. */
const SSE_BROKEN = /^SSE stream disconnected/
const STDERR_TAIL = 4096
/** A server that keeps handing out cursors is broken; stop rather than list for ever. */
const MAX_PAGES = 1000
const CLIENT_INFO = { name: "corral", version: "0.1.0" }

/**
 * The fix for a 401 from a server whose configuration says nothing about authorization: without it, the operator
 * reads "HTTP 401" and must guess which of the two ways the server wants.
 */
const unauthorizedHint = (handle: Handle, error: unknown): string => {
  const unauthorized = (error instanceof StreamableHTTPError && error.code === 401) ||
    error instanceof UnauthorizedError
  if (!unauthorized || !("url" in handle.config)) return ""
  const headers = Object.keys(handle.config.headers ?? {}).map((h) => h.toLowerCase())
  if (handle.config.auth !== undefined || headers.includes("authorization")) return ""
  return ` — the server requires authorization and mcpServers.${handle.name} has none: add "auth" (OAuth; then ` +
    `\`corral mcp login ${handle.name}\`) or an Authorization header in "headers" (e.g. ` +
    `{ "Authorization": { "env": "TOKEN_VAR", "prefix": "Bearer " } })`
}

const transportFor = (
  config: McpConfig.McpServer,
  headers: Readonly<Record<string, string>>,
  oauth: McpOAuth.Session | undefined
): StdioClientTransport | StreamableHTTPClientTransport => {
  if (McpConfig.isStdio(config)) {
    const params: StdioServerParameters = {
      command: config.command,
      // Piped, not inherited: a chatty server must not interleave with the host's own output.
      stderr: "pipe",
      ...(config.args === undefined ? {} : { args: [...config.args] }),
      ...(config.env === undefined ? {} : { env: { ...config.env } }),
      ...(config.cwd === undefined ? {} : { cwd: config.cwd })
    }
    return new StdioClientTransport(params)
  }
  return new StreamableHTTPClientTransport(new URL(config.url), {
    ...(Object.keys(headers).length === 0 ? {} : { requestInit: { headers: { ...headers } } }),
    ...(oauth === undefined ? {} : { authProvider: oauth })
  })
}

/** Every page of the client's tools (none when the server has no tools capability). */
export const listAll = async (
  client: Client,
  signal: AbortSignal,
  timeout: number
): Promise<ReadonlyArray<Tool>> => {
  // A server without the tools capability simply offers none.
  if (client.getServerCapabilities()?.tools === undefined) return []
  const tools: Array<Tool> = []
  let cursor: string | undefined
  for (let page = 0; page < MAX_PAGES; page++) {
    const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { signal, timeout })
    tools.push(...result.tools)
    if (result.nextCursor === undefined) return tools
    cursor = result.nextCursor
  }
  throw new Error(`tools/list still returned a cursor after ${MAX_PAGES} pages`)
}

/**
 * How long a stdio server is given at shutdown to exit after its stdin's end, and then again after SIGTERM, before
 * it is sent SIGKILL. The SDK's own close waits 2 s at each step (4 s before its SIGKILL), which a node's stop,
 * 2 s for all its layers after the drain's deadline, cannot afford: a server that ignores both would hold the node
 * past its bound. A server that exits on its stdin's end, as the MCP spec asks, is not hurried by it.
 */
export const stopGraceMs = 500

/** Sends `signal` to child `pid` while it is listed alive (a pid seen to exit may already be another process's). */
const signalLive = (pid: number, signal: NodeJS.Signals): Effect.Effect<void> =>
  Effect.sync(() => {
    if (!Children.isLive(pid)) return
    try {
      process.kill(pid, signal)
    } catch {
      // Already gone.
    }
  })

/**
 * Closes a connection for good (idempotent). A healthy HTTP session is ended politely; a stdio child gets the
 * SDK's graceful close (stdin end, then SIGTERM, then SIGKILL) — or, with `force` (an open that failed or was
 * interrupted, so the child may not even read stdin yet), SIGTERM at once. With `stopping` (the host's shutdown) a
 * stdio child that has not exited `stopGraceMs` after its stdin's end is sent SIGTERM, and SIGKILL `stopGraceMs`
 * later: it is gone within about 1 s whatever it traps.
 */
export const close = (conn: Conn, force = false, stopping = false): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (conn.closing) return Effect.void
    conn.closing = true
    const transport = conn.transport
    if (force && transport instanceof StdioClientTransport && transport.pid !== null) {
      try {
        process.kill(transport.pid, "SIGTERM")
      } catch {
        // Already gone.
      }
    }
    const terminate = transport instanceof StreamableHTTPClientTransport && conn.loss === undefined && !force
      ? Effect.tryPromise(() => transport.terminateSession()).pipe(Effect.timeout("1 second"), Effect.ignore)
      : Effect.void
    // The graceful stdio close waits up to 2 s per step: bound the whole wait.
    const closeClient = Effect.tryPromise(() => conn.client.close()).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    const pid = conn.pid
    // SIGKILL cannot be trapped, so the escalation's end is the child's end. The SDK's close is left behind then:
    // it resolves on the pipes' close, which a grandchild holding them (a runner's helper process) may delay.
    const stop = stopping && pid !== undefined
      ? Effect.raceFirst(
        Effect.interruptible(closeClient),
        Effect.interruptible(
          Effect.sleep(stopGraceMs).pipe(
            Effect.zipRight(signalLive(pid, "SIGTERM")),
            Effect.zipRight(Effect.sleep(stopGraceMs)),
            Effect.zipRight(signalLive(pid, "SIGKILL"))
          )
        )
      )
      : closeClient
    return Effect.zipRight(terminate, stop)
  }).pipe(Effect.uninterruptible)

/**
 * The server refused the connection until an OAuth authorization finished, and it just did (the followed redirect
 * brought a code, exchanged for tokens): connect again, with the tokens.
 */
const REAUTHORIZED = Symbol("reauthorized")
/** Authorizations one `open` may finish (the first, then one step-up); a server asking for more is refused. */
const MAX_AUTHORIZATIONS = 2

/**
 * Finishes an OAuth authorization whose redirect was followed (`UnauthorizedError` with a code waiting): exchanges
 * the code for tokens on `transport`. False when there is nothing to finish (the error stands as it is).
 */
export const finishAuthorization = async (
  handle: Handle,
  transport: StdioClientTransport | StreamableHTTPClientTransport,
  error: unknown
): Promise<boolean> => {
  if (!(error instanceof UnauthorizedError) || !(transport instanceof StreamableHTTPClientTransport)) return false
  const code = handle.oauth?.takeCode()
  if (code === undefined) return false
  await transport.finishAuth(code)
  return true
}

/**
 * Opens a fresh client: spawn or dial, initialize, list every page. Fails with a message (including the tail of a
 * stdio server's stderr) when any step fails or `timeoutMs` passes; whatever was opened is closed on failure and on
 * interruption. A server that wants an OAuth authorization first gets it (when this host can), then a new client.
 */
export const open = (
  handle: Handle,
  options: Options,
  authorizations = 0
): Effect.Effect<{ conn: Conn; tools: ReadonlyArray<Tool> }, string> =>
  Effect.flatMap(
    Effect.zip(McpConfig.headersOf(handle.config), McpConfig.oauthCredentialOf(handle.config)),
    ([headers, credential]) => {
      handle.oauth?.setCredential(credential)
      const timeoutMs = options.connectTimeoutMs
      const client = new Client(CLIENT_INFO, { capabilities: ClientRequests.capabilitiesOf(handle.config) })
      const conn: Conn = {
        client,
        transport: transportFor(handle.config, headers, handle.oauth),
        lost: Deferred.unsafeMake<Loss>(FiberId.none),
        loss: undefined,
        closing: false,
        stderr: ""
      }
      if (conn.transport instanceof StdioClientTransport) {
        // Always drained: an unread pipe would block the child once its buffer fills.
        conn.transport.stderr?.on("data", (chunk: Buffer | string) => {
          conn.stderr = (conn.stderr + chunk.toString()).slice(-STDERR_TAIL)
        })
      }
      // Before the close that follows, the transport reports an oversized message as an error: remember why.
      client.onerror = (error) => {
        if (TOO_LARGE.test(error.message)) lose(handle, conn, { _tag: "TooLarge" })
        // A response stream (or the notification stream) of a Streamable HTTP server broke: the server died or the
        // network dropped. The SDK would only resume a stream the server made resumable, and never fails the calls
        // waiting on it, so they would hang until their deadline: the connection is lost, now, and rebuilt.
        else if (SSE_BROKEN.test(error.message)) lose(handle, conn, { _tag: "Unreachable", detail: error.message })
      }
      // Junk lines and SSE hiccups are errors too, but only a close means the connection is gone.
      client.onclose = () => {
        if (conn.pid !== undefined) Children.untrack(conn.pid)
        lose(handle, conn, { _tag: "Exited" })
      }
      // Handled even when the server did not declare `tools.listChanged`: a stale list is worse than a spare listing.
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        if (conn.loss === undefined && !conn.closing) options.onToolsChanged(handle)
      })
      ClientRequests.install(
        client,
        handle,
        options.onElicit === undefined ? undefined : (params, signal) => options.onElicit!(handle, params, signal),
        options.onSample === undefined ? undefined : (params, signal) => options.onSample!(handle, params, signal)
      )
      client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
        const { data, level, logger } = notification.params
        const text = typeof data === "string" ? data : JSON.stringify(data) ?? String(data)
        for (const listener of handle.logListeners) listener(level, logger === undefined ? text : `${logger}: ${text}`)
      })
      return Effect.tryPromise({
        try: async (signal) => {
          try {
            const connecting = client.connect(conn.transport, { signal, timeout: timeoutMs })
            // Spawned synchronously by the call above (the transport's start): listed before anything can fail.
            if (conn.transport instanceof StdioClientTransport && typeof conn.transport.pid === "number") {
              conn.pid = conn.transport.pid
              Children.track(conn.pid)
            }
            await connecting
            return { conn, tools: await listAll(client, signal, timeoutMs) }
          } catch (error) {
            // A server may let `initialize` through and ask for authorization at the first listing.
            if (authorizations < MAX_AUTHORIZATIONS && await finishAuthorization(handle, conn.transport, error)) {
              throw REAUTHORIZED
            }
            throw error
          }
        },
        catch: (error) => {
          if (error === REAUTHORIZED) return REAUTHORIZED
          const tail = conn.stderr.trim().split("\n").slice(-5).join("\n")
          const described = describeError(error) + unauthorizedHint(handle, error)
          return tail.length > 0 ? `${described}; stderr: ${tail}` : described
        }
      }).pipe(
        Effect.timeoutFail({
          duration: Duration.millis(timeoutMs),
          onTimeout: () => `no answer to initialize/tools/list within ${timeoutMs} ms`
        }),
        Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : close(conn, true))),
        Effect.catchIf((error) => error === REAUTHORIZED, () => open(handle, options, authorizations + 1))
      )
    }
  )
