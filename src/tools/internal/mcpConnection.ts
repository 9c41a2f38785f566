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
 * The connection state is a plain field, not a `Ref`: losses are noticed in SDK callbacks, and the switch to `Down`
 * must happen in the same tick, before any call can pick the dead client. A call that finds the server restarting
 * for the first time waits for it (bounded by its own timeout); once a restart attempt has failed, calls fail fast
 * rather than each spending a whole timeout on a server that is not coming back soon.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import type { StdioServerParameters } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Duration, Effect, Either, Exit, FiberId, Schedule } from "effect"
import type { Scope } from "effect"
import * as McpConfig from "../McpConfig.js"
import { messageOf } from "./texts.js"

/** Why a connection ended. */
export type Loss =
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
}

/** `Down` keeps the connection it replaced so a shutdown can still close it. */
export type State =
  | { readonly _tag: "Starting" }
  | { readonly _tag: "Up"; readonly conn: Conn }
  | {
    readonly _tag: "Down"
    readonly ready: Deferred.Deferred<Conn>
    readonly loss: Loss
    readonly previous: Conn
    readonly failures: number
    readonly lastError: string | undefined
  }

/** One configured server and its current state. */
export interface Handle {
  readonly name: string
  readonly config: McpConfig.McpServer
  state: State
}

/** How `start` connects and restarts. */
export interface Options {
  /** Bound on spawning/dialing, initializing and listing. */
  readonly connectTimeoutMs: number
  /** Delays between failed restart attempts. */
  readonly restart: Schedule.Schedule<unknown, unknown>
}

/** What the SDK's stdio transport allows per message: larger answers close the connection. */
export const STDIO_MAX_MESSAGE = "10 MiB"
const TOO_LARGE = /ReadBuffer exceeded maximum size/
const STDERR_TAIL = 4096
/** A server that keeps handing out cursors is broken; stop rather than list for ever. */
const MAX_PAGES = 1000
const CLIENT_INFO = { name: "corral", version: "0.1.0" }

/** Switches the handle from `Up` on `conn` to `Down`; a no-op when `conn` is not the live connection. */
const goDown = (handle: Handle, conn: Conn, loss: Loss): void => {
  if (handle.state._tag === "Up" && handle.state.conn === conn) {
    handle.state = {
      _tag: "Down",
      ready: Deferred.unsafeMake<Conn>(FiberId.none),
      loss,
      previous: conn,
      failures: 0,
      lastError: undefined
    }
  }
}

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

/** A request that never reached the server (refused, reset, DNS): `fetch` rejects with a TypeError. */
export const isUnreachable = (error: unknown): boolean =>
  error instanceof TypeError && /fetch failed|network|ECONN|socket/i.test(`${error.message} ${messageOf(error.cause)}`)

/** A one-line description of a transport error, with the network cause when there is one. */
export const describeError = (error: unknown): string => {
  const message = messageOf(error)
  const cause = error instanceof Error && error.cause !== undefined ? messageOf(error.cause) : undefined
  return cause === undefined || cause === "{}" || message.includes(cause) ? message : `${message}: ${cause}`
}

/** What a loss means, for texts and logs. */
export const describeLoss = (loss: Loss): string => {
  switch (loss._tag) {
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

const transportFor = (config: McpConfig.McpServer): StdioClientTransport | StreamableHTTPClientTransport => {
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
  return new StreamableHTTPClientTransport(
    new URL(config.url),
    config.headers === undefined ? undefined : { requestInit: { headers: { ...config.headers } } }
  )
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

/** Closes a connection for good (idempotent): ends a healthy HTTP session politely, then closes the client. */
export const close = (conn: Conn): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (conn.closing) return Effect.void
    conn.closing = true
    const transport = conn.transport
    const terminate = transport instanceof StreamableHTTPClientTransport && conn.loss === undefined
      ? Effect.tryPromise(() => transport.terminateSession()).pipe(Effect.timeout("1 second"), Effect.ignore)
      : Effect.void
    // The stdio transport ends stdin, then escalates to SIGTERM and SIGKILL after 2 s each: bound the wait.
    const closeClient = Effect.tryPromise(() => conn.client.close()).pipe(Effect.timeout("5 seconds"), Effect.ignore)
    return Effect.zipRight(terminate, closeClient)
  }).pipe(Effect.uninterruptible)

/**
 * Opens a fresh client: spawn or dial, initialize, list every page. Fails with a message (including the tail of a
 * stdio server's stderr) when any step fails or `timeoutMs` passes; whatever was opened is closed on failure and on
 * interruption.
 */
const open = (handle: Handle, timeoutMs: number): Effect.Effect<{ conn: Conn; tools: ReadonlyArray<Tool> }, string> =>
  Effect.suspend(() => {
    const client = new Client(CLIENT_INFO, { capabilities: {} })
    const conn: Conn = {
      client,
      transport: transportFor(handle.config),
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
    }
    // Junk lines and SSE hiccups are errors too, but only a close means the connection is gone.
    client.onclose = () => lose(handle, conn, { _tag: "Exited" })
    return Effect.tryPromise({
      try: async (signal) => {
        await client.connect(conn.transport, { signal, timeout: timeoutMs })
        return { conn, tools: await listAll(client, signal, timeoutMs) }
      },
      catch: (error) => {
        const tail = conn.stderr.trim().split("\n").slice(-5).join("\n")
        return tail.length > 0 ? `${describeError(error)}; stderr: ${tail}` : describeError(error)
      }
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.millis(timeoutMs),
        onTimeout: () => `no answer to initialize/tools/list within ${timeoutMs} ms`
      }),
      Effect.onExit((exit) => (Exit.isSuccess(exit) ? Effect.void : close(conn)))
    )
  })

const supervise = (handle: Handle, first: Conn, options: Options): Effect.Effect<never> => {
  let current = first
  const restartOnce = Effect.gen(function*() {
    const loss = yield* Deferred.await(current.lost)
    // Lost before it was published as `Up` (a crash right after the restart): go down now.
    goDown(handle, current, loss)
    const down = handle.state
    if (down._tag !== "Down") return yield* Effect.dieMessage(`MCP server ${handle.name} lost without going down`)
    yield* Effect.logWarning(`MCP server "${handle.name}" connection lost (${describeLoss(loss)}); restarting`).pipe(
      Effect.annotateLogs({ mcpServer: handle.name, stderr: current.stderr.slice(-1024) })
    )
    yield* close(current)
    const attempt = open(handle, options.connectTimeoutMs).pipe(
      Effect.tapError((error) =>
        Effect.suspend(() => {
          const s = handle.state
          if (s._tag === "Down") handle.state = { ...s, failures: s.failures + 1, lastError: error }
          return Effect.logWarning(`MCP server "${handle.name}" restart failed: ${error}`)
        })
      ),
      Effect.retry(options.restart)
    )
    yield* Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(restore(attempt), ({ conn }) =>
        Effect.suspend(() => {
          current = conn
          handle.state = { _tag: "Up", conn }
          return Deferred.succeed(down.ready, conn)
        })
      )
    )
    yield* Effect.logInfo(`MCP server "${handle.name}" is back`)
  })
  // A schedule that gives up leaves the server down; calls then fail fast with the last error.
  return Effect.forever(restartOnce.pipe(Effect.catchAll(() => Effect.never)))
}

/**
 * Connects to one server and keeps it connected for the life of the scope: the initial connection must succeed
 * (else fails with a message), later losses are restarted in the background. Closing the scope stops the
 * supervisor, then closes the client (ending a stdio child).
 */
export const start = (
  name: string,
  config: McpConfig.McpServer,
  options: Options
): Effect.Effect<{ handle: Handle; tools: ReadonlyArray<Tool> }, string, Scope.Scope> =>
  Effect.gen(function*() {
    const handle: Handle = { name, config, state: { _tag: "Starting" } }
    // Registered before the supervisor is forked: finalizers run in reverse, so the supervisor stops first and
    // cannot restart what this closes.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        const s = handle.state
        return s._tag === "Up" ? close(s.conn) : s._tag === "Down" ? close(s.previous) : Effect.void
      })
    )
    const opened = yield* Effect.uninterruptibleMask((restore) =>
      Effect.tap(restore(open(handle, options.connectTimeoutMs)), ({ conn }) =>
        Effect.sync(() => {
          handle.state = { _tag: "Up", conn }
        })
      )
    )
    yield* Effect.forkScoped(supervise(handle, opened.conn, options))
    return { handle, tools: opened.tools }
  })

/**
 * The live connection for a call: at once when up; after the restart when the server is down but no restart
 * attempt has failed yet; otherwise `Left` with why the server is unavailable (the call is not sent).
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
        return s.failures === 0
          ? Effect.map(Deferred.await(s.ready), Either.right)
          : Effect.succeed(Either.left(`${describeLoss(s.loss)}; the last restart attempt failed: ${s.lastError}`))
      case "Starting":
        return Effect.succeed(Either.left("it has not started yet"))
    }
  })

/** Completes when `conn` is noticed lost. */
export const awaitLoss = (conn: Conn): Effect.Effect<Loss> => Deferred.await(conn.lost)
