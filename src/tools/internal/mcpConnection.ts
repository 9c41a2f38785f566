/**
 * One supervised connection to one MCP server: open (spawn or dial, initialize, list every page of tools), notice
 * its loss, and bring it back.
 *
 * Why a supervisor: a stdio server is a child process that can exit at any time, and an MCP client cannot be reused
 * after its transport closed. Over Streamable HTTP a restarted stateful server no longer knows the client's session
 * id, and the SDK client keeps sending it: reconnecting therefore always builds a NEW `Client` and transport, never
 * revives the old ones. Restarts follow a jittered exponential schedule (jitter is not optional: after a shared
 * dependency dies, unjittered restarts of many servers synchronise), capped so a long outage is still retried.
 *
 * A server that stayed up for a while is restarted at once; one that dies soon after starting is crash-looping, so
 * its restarts keep backing off. A server that cannot be started at all (a missing command, a dead URL, a 401, an
 * unset header variable) is no different: it starts `Down` and the same supervisor keeps trying, so one broken
 * integration never takes the host down. Failed attempts are logged with the server's name, loudly on the 1st, 2nd,
 * 4th, 8th… in a row or when the reason changes, quietly otherwise: with the delay capped at 30 s, a server down for
 * a day would otherwise write thousands of identical warnings.
 *
 * A Streamable HTTP response stream that breaks mid-read (the server died, the network dropped) marks the connection
 * lost at once: the SDK never fails the requests waiting on such a stream, so their calls would hang until their
 * deadline and then blame the request's size.
 *
 * The connection state is a plain field, not a `Ref`: losses are noticed in SDK callbacks, and the switch to `Down`
 * must happen in the same tick, before any call can pick the dead client. A call that finds the server down waits
 * for the restart, cutting the backoff short (someone needs the server now), but only until one attempt made after
 * it arrived has failed: then it fails fast instead of spending its whole timeout on a server that is not coming
 * back soon. A listing of the tools probes the same way (`probe`, bounded by its caller): a server that is back is
 * offered again at the next burst, not when a backoff that grew during a long outage fires. Kicks share the one
 * attempt in progress, and attempts a kick starts are at least `KICK_GAP_MS` apart, so a busy host asking for a
 * server that stays down reconnects a few times a second, never in a tight loop.
 *
 * A server's tools can change while it runs (it sends `notifications/tools/list_changed`) and across a restart (a
 * new version, a different config). Both are reported to the handle's owner through `Options.onToolsChanged`, which
 * re-lists with `listTools` on the live connection.
 */
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { StdioServerParameters } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { LoggingMessageNotificationSchema, ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js"
import type {
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult,
  Tool
} from "@modelcontextprotocol/sdk/types.js"
import { Clock, Deferred, Duration, Effect, Either, Exit, FiberId, Schedule } from "effect"
import type { Scope } from "effect"
import * as McpConfig from "../McpConfig.js"
import type { Sampler } from "../ToolExecutor.js"
import * as Children from "./mcpChildren.js"
import * as ClientRequests from "./mcpClientRequests.js"
import type * as McpOAuth from "./mcpOAuth.js"
import { messageOf } from "./texts.js"

/** Why a connection ended (or, `NeverStarted`, why there never was one). */
export type Loss =
  | { readonly _tag: "NeverStarted"; readonly detail: string }
  | { readonly _tag: "Exited" }
  | { readonly _tag: "TooLarge" }
  | { readonly _tag: "SessionExpired"; readonly detail: string }
  | { readonly _tag: "Unreachable"; readonly detail: string }

/** A live (or just lost) client. `loss` is set once, synchronously, when the connection is noticed lost. */
export interface Conn {
  readonly client: Client
  readonly transport: StdioClientTransport | StreamableHTTPClientTransport
  readonly lost: Deferred.Deferred<Loss>
  loss: Loss | undefined
  /** Set when Corral itself closes the client: the close that follows is not a loss. */
  closing: boolean
  /** The last few KiB of a stdio server's stderr, for the operator's log when it dies. */
  stderr: string
  /** A stdio server's process id once spawned (listed to be killed at the process's exit: internal/mcpChildren). */
  pid?: number
}

/**
 * `Down` keeps the connection it replaced, if any (so a shutdown can still close it), and three signals: `ready`, completed
 * by the successful restart; `nextFailed`, completed with the error of the next restart attempt to START if it fails
 * (so a waiting call always hears about an attempt made after it arrived, never a stale one); and `kick`, a call
 * asking to skip the rest of the backoff that follows the attempt in progress.
 */
export type State =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Up"; readonly conn: Conn }
  | {
    readonly _tag: "Down"
    readonly loss: Loss
    readonly previous: Conn | undefined
    readonly ready: Deferred.Deferred<Conn>
    readonly nextFailed: Deferred.Deferred<string>
    readonly kick: Deferred.Deferred<void>
  }

/** One configured server, its current state, and what an operator needs to know about it. */
export interface Handle {
  readonly name: string
  readonly config: McpConfig.McpServer
  state: State
  /** When the state last changed between starting, up and down (epoch ms, from `Clock`). */
  since: number
  /** The last reason the server was lost or could not be (re)started; kept after it comes back. */
  lastError: string | undefined
  /** Failed (re)start attempts since it was last up. */
  failures: number
  /** Whether a (re)start attempt is under way now. */
  attempting: boolean
  /** When the last failed (re)start attempt ended (epoch ms, `Clock`); `undefined` before any. */
  lastFailedAt: number | undefined
  /**
   * Told every `notifications/message` (MCP log) the server sends. MCP log messages are not tied to a request, so
   * each call in flight on the server registers here for its duration and hears them all.
   */
  readonly logListeners: Set<(level: string, message: string) => void>
  /**
   * The calls in flight on the server (registered by each call for its duration): a server's question
   * (elicitation) is not tied to a request on stdio, so it goes to the session of the call that is running.
   */
  readonly callers: Set<Caller>
  /** The OAuth client of a server with `auth` in its config (kept across reconnects: it holds the tokens). */
  readonly oauth: McpOAuth.Session | undefined
}

/** A call in flight on a server: whose session, which call, which tool (as offered). */
export interface Caller {
  readonly sessionId: string
  readonly callId: string
  readonly tool: string
  /** When the call's silence window ends (epoch ms, `Clock`): a question asked during the call must be settled by then. */
  readonly deadlineAt: number
  /** Serves the server's samples (MCP sampling) with the session's model; absent: no model serves them. */
  readonly sample?: Sampler
}

/**
 * Whether the handle's server offered resources (the `resources` capability) when it was last connected: a server
 * that is down keeps its answer, so the core `read_resource` tool does not come and go with its connection.
 */
export const offersResources = (handle: Handle): boolean => {
  const conn = handle.state._tag === "Up"
    ? handle.state.conn
    : handle.state._tag === "Down"
    ? handle.state.previous
    : undefined
  return conn?.client.getServerCapabilities()?.resources !== undefined
}

/** A server's state as reported to operators. */
export type Phase = "starting" | "up" | "down"

/** The phase of a handle's state. */
export const phaseOf = (handle: Handle): Phase =>
  handle.state._tag === "Up" ?
    (handle.state.conn.loss === undefined ? "up" : "down") :
    handle.state._tag === "Down" ?
    "down" :
    "starting"

/** How `start` connects and restarts. */
export interface Options {
  /** Bound on spawning/dialing, initializing and listing. */
  readonly connectTimeoutMs: number
  /** Delays between failed restart attempts. */
  readonly restart: Schedule.Schedule<unknown, unknown>
  /**
   * The handle's tools may have changed: the server said so, or it was restarted. Called synchronously (from SDK
   * callbacks too), so it must only take note; listing again is the owner's job (`listTools`).
   */
  readonly onToolsChanged: (handle: Handle) => void
  /**
   * Answers a server's question (`elicitation/create`); called from the SDK. Absent: every question is declined.
   * Must settle: the registry bounds it by the asking call's deadline.
   */
  readonly onElicit?: (handle: Handle, params: ElicitRequest["params"], signal: AbortSignal) => Promise<ElicitResult>
  /**
   * Answers a server's sample request (`sampling/createMessage`) of a server configured with `sampling: true`;
   * called from the SDK. Absent: refused. Must settle: the registry bounds it by the asking call's deadline.
   */
  readonly onSample?: (
    handle: Handle,
    params: CreateMessageRequest["params"],
    signal: AbortSignal
  ) => Promise<CreateMessageResult>
}

/** What the SDK's stdio transport allows per message: larger answers close the connection. */
export const STDIO_MAX_MESSAGE = "10 MiB"
const TOO_LARGE = /ReadBuffer exceeded maximum size/
/** What the SDK reports when a Streamable HTTP response or notification stream breaks mid-read. */
const SSE_BROKEN = /^SSE stream disconnected/
const STDERR_TAIL = 4096
/** A server that keeps handing out cursors is broken; stop rather than list for ever. */
const MAX_PAGES = 1000
const CLIENT_INFO = { name: "corral", version: "0.1.0" }
/** Up this long, a server is not crash-looping: its next loss restarts it at once, with a fresh backoff. */
const STABLE_MS = 30_000
/**
 * The least time between the starts of two attempts when the second was asked for by a call or a listing: short next
 * to a person's wait for a tool, long next to a refused connection (which fails in a millisecond and would otherwise
 * be retried as fast as callers arrive).
 */
export const KICK_GAP_MS = 250

/** Switches the handle from `Up` on `conn` to `Down`; a no-op when `conn` is not the live connection. */
const goDown = (handle: Handle, conn: Conn, loss: Loss): void => {
  if (handle.state._tag === "Up" && handle.state.conn === conn) handle.state = downState(loss, conn)
}

const downState = (loss: Loss, previous: Conn | undefined): State => ({
  _tag: "Down",
  loss,
  previous,
  ready: Deferred.unsafeMake<Conn>(FiberId.none),
  nextFailed: Deferred.unsafeMake<string>(FiberId.none),
  kick: Deferred.unsafeMake<void>(FiberId.none)
})

/**
 * Marks `conn` lost (once) and, when it is the handle's live connection, switches the handle to `Down` in the same
 * tick so no new call picks it. Safe to call from SDK callbacks; a connection Corral is closing is never "lost".
 */
export const lose = (handle: Handle, conn: Conn, loss: Loss): void => {
  if (conn.loss !== undefined || conn.closing) return
  conn.loss = loss
  goDown(handle, conn, loss)
  Deferred.unsafeDone(conn.lost, Exit.succeed(loss))
}

/** A stale Streamable HTTP session: the server restarted (404 per the spec; some servers answer 400). */
export const isSessionExpired = (error: unknown): boolean =>
  error instanceof StreamableHTTPError &&
  (error.code === 404 || (error.code === 400 && /session/i.test(error.message)))

/** Network failures of `fetch` (it rejects with a TypeError whose cause carries the code). */
export const isNetworkFailure = (error: unknown): boolean =>
  error instanceof TypeError && /fetch failed|network|socket|ECONN/i.test(`${error.message} ${messageOf(error.cause)}`)

const NEVER_CONNECTED = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"])

/**
 * A network failure before the request could reach the server (refused, unresolvable, unroutable): the tool
 * certainly did not run. Anything else (a socket closed mid-request) may have run it.
 */
export const isUnsent = (error: unknown): boolean => {
  if (!(error instanceof TypeError) || typeof error.cause !== "object" || error.cause === null) return false
  const code = (error.cause as { readonly code?: unknown }).code
  return typeof code === "string" && NEVER_CONNECTED.has(code)
}

/** A one-line description of a transport error, with the network cause when there is one. */
export const describeError = (error: unknown): string => {
  // The SDK's message leaves the status out ("Error POSTing to endpoint: <body>"): a 401 must say it is one.
  const message = error instanceof StreamableHTTPError && error.code !== undefined && error.code > 0
    ? `HTTP ${error.code}: ${messageOf(error)}`
    : messageOf(error)
  const cause = error instanceof Error && error.cause !== undefined ? messageOf(error.cause) : undefined
  return cause === undefined || cause === "{}" || message.includes(cause) ? message : `${message}: ${cause}`
}

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

/** What a loss means, for texts and logs. */
export const describeLoss = (loss: Loss): string => {
  switch (loss._tag) {
    case "NeverStarted":
      return `it could not be started: ${loss.detail}`
    case "Exited":
      return "the server process exited"
    case "TooLarge":
      return `a message exceeded ${STDIO_MAX_MESSAGE}`
    case "SessionExpired":
      return `the server no longer knows this session: ${loss.detail}`
    case "Unreachable":
      return `the server is unreachable: ${loss.detail}`
  }
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

const listAll = async (client: Client, signal: AbortSignal, timeout: number): Promise<ReadonlyArray<Tool>> => {
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
const open = (
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

/** Starts an attempt: takes its failure signal and arms fresh `nextFailed` / `kick` for those who arrive now. */
const attemptStarts = (handle: Handle): Deferred.Deferred<string> | undefined => {
  const s = handle.state
  if (s._tag !== "Down") return undefined
  handle.state = {
    ...s,
    nextFailed: Deferred.unsafeMake<string>(FiberId.none),
    kick: Deferred.unsafeMake<void>(FiberId.none)
  }
  return s.nextFailed
}

/** Bounded logging: the 1st, 2nd, 4th, 8th… failure in a row, or any failure whose reason changed, is a warning. */
const loud = (failures: number, changed: boolean): boolean => changed || (failures & (failures - 1)) === 0

/**
 * Restarts until connected, waiting the schedule's next delay before every attempt but the first of a stable
 * server. A call's kick cuts the current wait short. A schedule that ends leaves only kicks.
 */
const reconnect = (
  handle: Handle,
  options: Options,
  driver: Schedule.ScheduleDriver<unknown, unknown>,
  backoffFirst: boolean
): Effect.Effect<{ conn: Conn; tools: ReadonlyArray<Tool> }> =>
  Effect.gen(function*() {
    let wait = backoffFirst
    let lastStart: number | undefined
    while (true) {
      if (wait) {
        const kick = handle.state._tag === "Down" ? Deferred.await(handle.state.kick) : Effect.never
        const kicked = yield* Effect.raceFirst(
          driver.next(undefined).pipe(Effect.as(false), Effect.catchAll(() => Effect.never)),
          Effect.as(kick, true)
        )
        const since = lastStart === undefined ? KICK_GAP_MS : (yield* Clock.currentTimeMillis) - lastStart
        if (kicked && since < KICK_GAP_MS) yield* Effect.sleep(Duration.millis(KICK_GAP_MS - since))
      }
      wait = true
      lastStart = yield* Clock.currentTimeMillis
      const failed = attemptStarts(handle)
      handle.attempting = true
      const opened = yield* Effect.either(open(handle, options)).pipe(
        Effect.ensuring(Effect.sync(() => void (handle.attempting = false)))
      )
      if (Either.isRight(opened)) return opened.right
      handle.lastFailedAt = yield* Clock.currentTimeMillis
      const changed = opened.left !== handle.lastError
      handle.failures++
      handle.lastError = opened.left
      const line = `MCP server "${handle.name}" restart failed (attempt ${handle.failures}): ${opened.left}`
      yield* (loud(handle.failures, changed) ? Effect.logWarning(line) : Effect.logDebug(line)).pipe(
        Effect.annotateLogs({ mcpServer: handle.name })
      )
      if (failed !== undefined) yield* Deferred.succeed(failed, opened.left)
    }
  })

/**
 * Brings a down handle back: reconnects, publishes it `Up`, reports its tools as changed (so the owner lists them
 * again) and releases the calls that waited for it.
 */
const comeBack = (
  handle: Handle,
  options: Options,
  driver: Schedule.ScheduleDriver<unknown, unknown>,
  backoffFirst: boolean
): Effect.Effect<Conn> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      restore(reconnect(handle, options, driver, backoffFirst)),
      ({ conn }) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.suspend(() => {
            const down = handle.state
            handle.state = { _tag: "Up", conn }
            handle.since = now
            handle.failures = 0
            // The restarted server may list other tools. Noted before the waiting calls resume, so whoever waited
            // for the restart can wait for the re-list too. Re-listed on the live connection, not taken from the
            // listing `open` made: a change notified in between would be applied first, then overwritten by it.
            options.onToolsChanged(handle)
            return down._tag === "Down" ? Effect.as(Deferred.succeed(down.ready, conn), conn) : Effect.succeed(conn)
          }))
    )
  ).pipe(Effect.tap(() =>
    Effect.logInfo(`MCP server "${handle.name}" is up`).pipe(
      Effect.annotateLogs({ mcpServer: handle.name })
    )
  ))

/** Supervises the handle for as long as the scope lives: brings it up when it starts down, and back after each loss. */
const supervise = (handle: Handle, first: Conn | undefined, options: Options): Effect.Effect<never> =>
  Effect.gen(function*() {
    // One driver for the life of the server: crash loops keep backing off across restarts.
    const driver = yield* Schedule.driver(options.restart)
    let current = first ?? (yield* comeBack(handle, options, driver, true))
    let upSince = yield* Clock.currentTimeMillis
    while (true) {
      const loss = yield* Deferred.await(current.lost)
      // Lost before it was published as `Up` (a crash right after the restart): go down now.
      goDown(handle, current, loss)
      const down = handle.state
      if (down._tag !== "Down") return yield* Effect.dieMessage(`MCP server ${handle.name} lost without going down`)
      handle.since = yield* Clock.currentTimeMillis
      handle.lastError = describeLoss(loss)
      yield* Effect.logWarning(`MCP server "${handle.name}" connection lost (${describeLoss(loss)}); restarting`).pipe(
        Effect.annotateLogs({ mcpServer: handle.name, stderr: current.stderr.slice(-1024) })
      )
      yield* close(current)
      const stable = (yield* Clock.currentTimeMillis) - upSince >= STABLE_MS
      if (stable) yield* driver.reset
      current = yield* comeBack(handle, options, driver, !stable)
      upSince = yield* Clock.currentTimeMillis
    }
  })

/** A handle for one configured server, not yet started. */
export const makeHandle = (
  name: string,
  config: McpConfig.McpServer,
  now: number,
  oauth?: McpOAuth.Session
): Handle => ({
  name,
  config,
  oauth,
  state: { _tag: "Starting" },
  since: now,
  lastError: undefined,
  failures: 0,
  attempting: false,
  lastFailedAt: undefined,
  logListeners: new Set(),
  callers: new Set()
})

/**
 * Connects to the handle's server and keeps it connected for the life of the scope. Never fails: the first attempt
 * (bounded by the connect timeout) either brings it up, and its tools are returned, or leaves it `Down` with the
 * reason returned as `Left`; either way a supervisor fiber the scope interrupts brings it (back) up with the
 * restart schedule — a server that is down at start must not take the service down with it.
 * Closing the client is `shutdown`'s job, registered by the caller BEFORE `start` so that it runs after the
 * supervisor has stopped (finalizers run in reverse) and cannot race a restart.
 */
export const start = (
  handle: Handle,
  options: Options
): Effect.Effect<Either.Either<ReadonlyArray<Tool>, string>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const opened = yield* Effect.uninterruptibleMask((restore) =>
      Effect.tap(Effect.either(restore(open(handle, options))), (result) =>
        Effect.sync(() => {
          handle.state = Either.isRight(result)
            ? { _tag: "Up", conn: result.right.conn }
            : downState({ _tag: "NeverStarted", detail: result.left }, undefined)
        }))
    )
    handle.since = yield* Clock.currentTimeMillis
    if (Either.isLeft(opened)) {
      handle.failures = 1
      handle.lastError = opened.left
      yield* Effect.logWarning(
        `MCP server "${handle.name}" could not be started (${opened.left}); its tools are withdrawn while Corral ` +
          "keeps trying in the background"
      ).pipe(Effect.annotateLogs({ mcpServer: handle.name }))
    }
    yield* Effect.forkScoped(supervise(handle, Either.isRight(opened) ? opened.right.conn : undefined, options))
    return Either.map(opened, ({ tools }) => tools)
  })

/**
 * Closes whatever connection the handle holds for the host's shutdown: a stdio child is gone within about
 * 2 × `stopGraceMs` (stdin end, SIGTERM, SIGKILL). Idempotent; never fails.
 */
export const shutdown = (handle: Handle): Effect.Effect<void> =>
  Effect.suspend(() => {
    const s = handle.state
    return s._tag === "Up"
      ? close(s.conn, false, true)
      : s._tag === "Down" && s.previous !== undefined
      ? close(s.previous, false, true)
      : Effect.void
  })

/**
 * The live connection for a call: at once when up; when down, once restarted (the call kicks the backoff short),
 * or `Left` with the error of the first restart attempt started after the call arrived, when that attempt fails.
 */
export const acquire = (handle: Handle): Effect.Effect<Either.Either<Conn, string>> =>
  Effect.suspend((): Effect.Effect<Either.Either<Conn, string>> => {
    if (handle.state._tag === "Up" && handle.state.conn.loss !== undefined) {
      goDown(handle, handle.state.conn, handle.state.conn.loss)
    }
    const s = handle.state
    switch (s._tag) {
      case "Up":
        return Effect.succeed(Either.right(s.conn))
      case "Down":
        return Effect.zipRight(
          Deferred.succeed(s.kick, undefined),
          Effect.raceFirst(
            Effect.map(Deferred.await(s.ready), Either.right),
            Effect.map(Deferred.await(s.nextFailed), (error) => Either.left(`restarting it failed: ${error}`))
          )
        )
      case "Starting":
        return Effect.succeed(Either.left("it has not started yet"))
    }
  })

/**
 * Asks a down server to be tried now (the backoff cut short, as a call does) and waits until it is back or that
 * attempt failed, at most `waitMs`. Does not wait when an attempt is already under way (a server slow to answer is
 * not back: its outcome shows in the state later) or one failed less than `KICK_GAP_MS` ago (it is still down), so
 * listing often while a server is down costs almost nothing. Returns at once when the server is up or still
 * starting. Never fails: the caller reads the state afterwards.
 */
export const probe = (handle: Handle, waitMs: number): Effect.Effect<void> =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => {
    if (handle.state._tag === "Up" && handle.state.conn.loss !== undefined) {
      goDown(handle, handle.state.conn, handle.state.conn.loss)
    }
    const s = handle.state
    if (s._tag !== "Down") return Effect.void
    const kick = Deferred.succeed(s.kick, undefined)
    const fresh = handle.lastFailedAt !== undefined && now - handle.lastFailedAt < KICK_GAP_MS
    if (handle.attempting || fresh) return Effect.asVoid(kick)
    return Effect.zipRight(
      kick,
      Effect.raceFirst(Effect.asVoid(Deferred.await(s.ready)), Effect.asVoid(Deferred.await(s.nextFailed))).pipe(
        Effect.timeout(Duration.millis(waitMs)),
        Effect.ignore
      )
    )
  })

/**
 * Lists every page of the handle's tools on its live connection, within `timeoutMs`. Fails with a message when the
 * server is not up (its restart reports a change, so it is listed then) or the listing fails; a stale HTTP session
 * or an unreachable server also marks the connection lost, so that the supervisor reconnects.
 */
export const listTools = (handle: Handle, timeoutMs: number): Effect.Effect<ReadonlyArray<Tool>, string> =>
  Effect.suspend(() => {
    const s = handle.state
    if (s._tag !== "Up" || s.conn.loss !== undefined) return Effect.fail("it is not connected")
    const conn = s.conn
    return Effect.tryPromise({ try: (signal) => listAll(conn.client, signal, timeoutMs), catch: (error) => error })
      .pipe(
        Effect.tapError((error) =>
          Effect.sync(() => {
            if (isSessionExpired(error)) lose(handle, conn, { _tag: "SessionExpired", detail: describeError(error) })
            else if (isNetworkFailure(error)) lose(handle, conn, { _tag: "Unreachable", detail: describeError(error) })
          })
        ),
        Effect.mapError(describeError),
        Effect.timeoutFail({
          duration: Duration.millis(timeoutMs),
          onTimeout: () => `no answer to tools/list within ${timeoutMs} ms`
        })
      )
  })

/** Completes when `conn` is noticed lost. */
export const awaitLoss = (conn: Conn): Effect.Effect<Loss> => Deferred.await(conn.lost)
