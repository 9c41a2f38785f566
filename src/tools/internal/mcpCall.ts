/**
 * One call of one MCP tool: argument check, send on the live connection, deadline (extended by progress, up to a
 * hard cap: see `progressDeadline`), and every way it can end turned into an outcome that says what happened (tool
 * error, protocol error, timeout with the last progress, lost or stale connection). Interrupting the call aborts the
 * MCP request, so the server is sent a cancellation. Its progress and the server's log messages while it runs are
 * handed to a `Notify` (the session's stream), at most `MAX_NOTICES` of each per call: a chatty server must not
 * flood a session's subscribers.
 */
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import type { ValidateFunction } from "ajv"
import { Clock, Effect, Either, Queue } from "effect"
import { Limits } from "../../rails/Limits.js"
import * as Spans from "../../telemetry/Spans.js"
import type { Sampler, ToolDef, ToolOutcome } from "../ToolExecutor.js"
import * as Arguments from "./arguments.js"
import * as Connection from "./mcpConnection.js"
import * as Content from "./mcpContent.js"
import * as Deadline from "./progressDeadline.js"
import * as Texts from "./texts.js"

/** A tool as the registry holds it: its definition, its server, and its compiled input schema. */
export interface Entry {
  readonly def: ToolDef
  /** The tool's name on its server (`def.name` is the advertised one, prefixed when the server has a `prefix`). */
  readonly remote: string
  readonly handle: Connection.Handle
  /** `undefined` when ajv cannot compile the server's schema: the server validates alone. */
  readonly validate: ValidateFunction | undefined
  readonly expected: string
}

type Sent =
  | { readonly _tag: "Result"; readonly result: Content.CallResult }
  | { readonly _tag: "Failed"; readonly error: unknown }
  | { readonly _tag: "Lost" }
const Lost: Sent = { _tag: "Lost" }

/** What one call has got to, for the text of its timeout: whether it was sent, and its last progress. */
interface Track {
  sent: boolean
  progress: string | undefined
}

/** Something a running call reports: progress, or a log message of its server. */
export type Notice =
  | {
    readonly _tag: "progress"
    readonly progress: number
    readonly total: number | undefined
    readonly message: string | undefined
  }
  | { readonly _tag: "log"; readonly level: string; readonly message: string }

/** A progress notification's parameters. */
interface Progress {
  readonly progress: number
  readonly total?: number | undefined
  readonly message?: string | undefined
}

/** Receives a running call's notices; called from SDK callbacks, so it must only take note. */
export type Notify = (notice: Notice) => void

/** Notices of each kind passed on per call; the rest are dropped (the deadline still sees every progress). */
export const MAX_NOTICES = 50
/** A log message longer than this is cut: it is a notice on a stream, not a transcript entry. */
const MAX_LOG_CHARS = 2000

/** The outcome of a call whose connection was lost mid-flight. */
const lostOutcome = (server: string, name: string, loss: Connection.Loss): ToolOutcome => {
  switch (loss._tag) {
    case "Exited":
      return Texts.serverExited(server, name)
    case "TooLarge":
      return Texts.outputTooLarge(server, name, Connection.STDIO_MAX_MESSAGE)
    default:
      return Texts.connectionLost(server, name, Connection.describeLoss(loss))
  }
}

/** Sends one call on the live connection; retries once on a fresh client when the HTTP session went stale. */
const send = (
  entry: Entry,
  args: Record<string, unknown>,
  ms: number,
  track: Track,
  onProgress: (p: Progress) => void
) => {
  const { handle } = entry
  const server = handle.name
  const name = entry.def.name
  const attempt = (retried: boolean): Effect.Effect<ToolOutcome> =>
    Effect.flatMap(
      Connection.acquire(handle),
      Either.match({
        onLeft: (detail) => Effect.succeed(Texts.serverUnavailable(server, name, detail, handle.since)),
        onRight: (conn) => {
          track.sent = true
          const onprogress = (p: Progress) => {
            track.progress = p.total === undefined ? String(p.progress) : `${p.progress} of ${p.total}`
            onProgress(p)
          }
          const request = Effect.tryPromise({
            // The signal is aborted when this fiber is interrupted: the SDK then sends `notifications/cancelled`.
            try: (signal) =>
              conn.client.callTool({ name: entry.remote, arguments: args }, undefined, {
                signal,
                timeout: ms,
                onprogress
              }),
            catch: (error) => error
          }).pipe(
            Effect.match({
              onSuccess: (result): Sent => ({ _tag: "Result", result }),
              onFailure: (error): Sent => ({ _tag: "Failed", error })
            })
          )
          // A loss ends the call at once: an oversized answer is reported before the transport finishes closing.
          const lost = Effect.as(Connection.awaitLoss(conn), Lost)
          const result = Effect.flatMap(Effect.race(request, lost), (outcome): Effect.Effect<ToolOutcome> => {
            if (outcome._tag === "Result") {
              const { attachments, isError, text } = Content.render(outcome.result, server)
              const base = isError ? Texts.failed("tool_error", text) : { content: text, isError: false }
              return Effect.succeed(attachments.length === 0 ? base : { ...base, attachments })
            }
            if (conn.loss !== undefined) return Effect.succeed(lostOutcome(server, name, conn.loss))
            const error = outcome._tag === "Failed" ? outcome.error : undefined
            if (!retried && handle.oauth !== undefined) {
              // Step-up: the server wants a broader OAuth scope for this call (403 insufficient_scope) and the SDK
              // has been through the authorization again. The server refused the request, so sending it again after
              // the new token is in is safe.
              const finished = Effect.tryPromise(() => Connection.finishAuthorization(handle, conn.transport, error))
              return Effect.flatMap(
                Effect.orElseSucceed(finished, () => false),
                (again) => again ? attempt(true) : failed(error)
              )
            }
            return failed(error)
          })
          const failed = (error: unknown): Effect.Effect<ToolOutcome> => {
            if (Connection.isSessionExpired(error)) {
              // The server never saw this request (it rejected the session), so sending it again is safe.
              Connection.lose(handle, conn, { _tag: "SessionExpired", detail: Connection.describeError(error) })
              return retried
                ? Effect.succeed(Texts.connectionLost(server, name, Connection.describeError(error)))
                : attempt(true)
            }
            if (Connection.isNetworkFailure(error)) {
              const detail = Connection.describeError(error)
              Connection.lose(handle, conn, { _tag: "Unreachable", detail })
              // Only a request that never reached the server is known not to have run.
              return Effect.succeed(
                Connection.isUnsent(error)
                  ? Texts.serverUnavailable(server, name, detail)
                  : Texts.connectionLost(server, name, detail)
              )
            }
            return Effect.succeed(errorOutcome(server, name, ms, error, track))
          }
          return result
        }
      })
    )
  return attempt(false)
}

const errorOutcome = (server: string, name: string, ms: number, error: unknown, track: Track): ToolOutcome => {
  if (error instanceof McpError) {
    return error.code === ErrorCode.RequestTimeout
      ? Texts.timedOutAfterProgress(name, ms, track.progress)
      : Texts.toolError(name, `MCP server "${server}" answered: ${error.message}`)
  }
  if (error instanceof StreamableHTTPError) {
    return Texts.toolError(name, `MCP server "${server}" answered HTTP ${error.code ?? "?"}: ${error.message}`)
  }
  return Texts.toolError(name, `MCP server "${server}": ${Connection.describeError(error)}`)
}
/** The timeout outcome: not sent (the server never came back), silent for a whole window, or at the hard cap. */
const expired = (entry: Entry, ms: number, capMs: number, track: Track, why: Deadline.Expiry): ToolOutcome => {
  const name = entry.def.name
  if (!track.sent) {
    return Texts.serverUnavailable(entry.handle.name, name, `it did not come back within ${ms} ms`, entry.handle.since)
  }
  return why === "cap"
    ? Texts.progressCapReached(name, capMs, track.progress)
    : Texts.timedOutAfterProgress(name, ms, track.progress)
}

/**
 * The silence window of one call: the server's own `timeoutMs` when it is tighter than the caller's limit (the burst's
 * effective `toolTimeoutMs`, host ∩ agent), else that limit. The progress cap derives from it.
 */
export const timeoutFor = (own: number | undefined, limitMs: number): number =>
  own === undefined ? limitMs : Math.min(own, limitMs)

/**
 * Calls `entry`'s tool with `argumentsJson`: checked against its input schema first, then sent with a deadline (see
 * `timeoutFor`; `limitMs` is the burst's effective `toolTimeoutMs`, absent: `Limits.toolTimeoutMs`), restarted by
 * each progress notification up to `PROGRESS_CAP_FACTOR` times that, enforced here on Corral's clock, not only by the
 * SDK. Progress and the server's log messages go to `notify` while the call runs. Never fails.
 */
export const call = (
  entry: Entry,
  argumentsJson: string,
  notify?: Notify,
  limitMs?: number,
  caller?: { readonly sessionId: string; readonly callId: string; readonly sample?: Sampler }
): Effect.Effect<ToolOutcome> => {
  const name = entry.def.name
  const checked = Arguments.check(name, argumentsJson, entry.validate, entry.expected)
  if (!checked.ok) return Effect.succeed(checked.outcome)
  const valid = checked.args
  return Effect.flatMap(Limits, (limits) => {
    const ms = timeoutFor(entry.handle.config.timeoutMs, limitMs ?? limits.toolTimeoutMs)
    const capMs = ms * Deadline.PROGRESS_CAP_FACTOR
    const track: Track = { sent: false, progress: undefined }
    return Effect.flatMap(Queue.sliding<void>(1), (progressed) => {
      const sent = { progress: 0, log: 0 }
      const onProgress = (p: Progress) => {
        Queue.unsafeOffer(progressed, undefined)
        if (notify !== undefined && sent.progress++ < MAX_NOTICES) {
          notify({ _tag: "progress", progress: p.progress, total: p.total, message: p.message })
        }
      }
      const onLog = (level: string, message: string) => {
        if (notify !== undefined && sent.log++ < MAX_NOTICES) {
          notify({ _tag: "log", level, message: message.slice(0, MAX_LOG_CHARS) })
        }
      }
      // While it runs, the call hears its server's log messages and is the one its server's questions go to.
      const listening = Effect.acquireRelease(
        Effect.map(Clock.currentTimeMillis, (now) => {
          const running: Connection.Caller | undefined = caller === undefined
            ? undefined
            : { ...caller, tool: name, deadlineAt: now + ms }
          entry.handle.logListeners.add(onLog)
          if (running !== undefined) entry.handle.callers.add(running)
          return running
        }),
        (running) =>
          Effect.sync(() => {
            entry.handle.logListeners.delete(onLog)
            if (running !== undefined) entry.handle.callers.delete(running)
          })
      )
      // The SDK's own timeout is only a backstop past the cap: Corral's deadline decides, on Corral's clock.
      const request = send(entry, valid, capMs + 1000, track, onProgress)
      const deadline = Effect.map(Deadline.run(ms, capMs, progressed), (why) => expired(entry, ms, capMs, track, why))
      return Effect.scoped(Effect.zipRight(listening, Effect.raceFirst(request, deadline)))
    }).pipe(
      // The call's span is the generic `execute_tool` one (session/ToolCall); this adds what only MCP knows.
      Effect.zipLeft(Spans.annotate(() => ({ "mcp.method.name": "tools/call", "corral.tool.timeout_ms": ms })))
    )
  })
}
