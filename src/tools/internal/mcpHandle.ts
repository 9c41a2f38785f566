/**
 * mcpHandle — one configured MCP server as its connection (mcpConnection) keeps it: the handle, its state (starting,
 * up on a connection, or down with the signals of its restart), what a loss was, and how a transport error reads. The
 * switch to `Down` is a plain assignment, made in the tick the loss is noticed (in SDK callbacks too), so no call
 * picks a dead client.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type {
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult
} from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Exit, FiberId } from "effect"
import type { Schedule } from "effect"
import type * as McpConfig from "../McpConfig.js"
import type { Sampler } from "../ToolExecutor.js"
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

/** Switches the handle from `Up` on `conn` to `Down`; a no-op when `conn` is not the live connection. */
export const goDown = (handle: Handle, conn: Conn, loss: Loss): void => {
  if (handle.state._tag === "Up" && handle.state.conn === conn) handle.state = downState(loss, conn)
}

/** A fresh `Down` state after `loss`, keeping the connection it replaced. */
export const downState = (loss: Loss, previous: Conn | undefined): State => ({
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
