/**
 * McpRegistry — tools from MCP servers behind the `ToolExecutor` port.
 *
 * Servers come from the `mcpServers` config. All are connected at start and their tools listed (every page): a
 * server that cannot start fails the start, and so does a tool name exported by two servers — silently picking one
 * would let a config change reroute a call to a different server. The merged list is advertised sorted by name,
 * with source `mcp:<server>` and effect `read` only when the server promises `readOnlyHint: true` (an unannotated
 * tool may change things, so it waits for a person), unless the config overrides it.
 *
 * `call` never fails, and speaks like the in-process registry (same texts): the arguments must be a JSON object
 * (never repaired) that passes the tool's input schema (ajv, compiled once per tool) before anything is sent. Every
 * call has a deadline — the server's `timeoutMs`, capped by `Limits.toolTimeoutMs` — enforced by Corral, not only by
 * the SDK: over Streamable HTTP a server killed mid-call leaves the request hanging until then. Interrupting the
 * call aborts the MCP request (the server is sent a cancellation). Tool errors, protocol errors, crashes and lost
 * connections all become error-flagged outcomes saying what happened; crashed servers are restarted (see
 * `internal/mcpConnection`).
 */
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js"
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import { Ajv } from "ajv"
import type { ValidateFunction } from "ajv"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Effect, Either, Layer, Schedule, Schema } from "effect"
import type { Context, Scope } from "effect"
import { Limits } from "../rails/Limits.js"
import * as Arguments from "./internal/arguments.js"
import * as Connection from "./internal/mcpConnection.js"
import * as Content from "./internal/mcpContent.js"
import * as Texts from "./internal/texts.js"
import type * as McpConfig from "./McpConfig.js"
import { ToolExecutor } from "./ToolExecutor.js"
import type { ToolDef, ToolOutcome } from "./ToolExecutor.js"

/** A configured server could not be spawned/reached, initialized or listed at start. */
export class McpServerFailedToStart extends Schema.TaggedError<McpServerFailedToStart>()("McpServerFailedToStart", {
  server: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `MCP server "${this.server}" failed to start: ${this.reason}`
  }
}

/** Two servers (or one server twice) export the same tool name; `exclude` one of them in the config. */
export class McpToolNameCollision extends Schema.TaggedError<McpToolNameCollision>()("McpToolNameCollision", {
  tool: Schema.String,
  servers: Schema.Tuple(Schema.String, Schema.String)
}) {
  override get message(): string {
    const [a, b] = this.servers
    return a === b
      ? `MCP server "${a}" lists tool "${this.tool}" twice`
      : `tool "${this.tool}" is exported by both MCP servers "${a}" and "${b}"; exclude it from one of them`
  }
}

/** Why `make` failed. */
export type McpStartError = McpServerFailedToStart | McpToolNameCollision

/** The registry: the `ToolExecutor` service plus the advertised tools. */
export interface McpRegistry extends Context.Tag.Service<ToolExecutor> {
  /** Every advertised tool, sorted by name. */
  readonly tools: ReadonlyArray<ToolDef>
}

/** Tuning of `make`; the defaults suit production. */
export interface MakeOptions {
  /** Bound on connecting to one server (spawn or dial, initialize, list). Default 30 s. */
  readonly connectTimeoutMs?: number
  /** Delays between failed restart attempts of a lost server. Default: jittered exponential from 200 ms, ≤ 30 s. */
  readonly restartSchedule?: Schedule.Schedule<unknown, unknown>
}

/** Jittered exponential backoff from 200 ms, each delay capped at 30 s, retried for as long as the scope lives. */
export const defaultRestartSchedule: Schedule.Schedule<unknown, unknown> = Schedule.exponential("200 millis", 2).pipe(
  Schedule.jittered,
  Schedule.union(Schedule.spaced("30 seconds"))
)

interface Entry {
  readonly def: ToolDef
  readonly handle: Connection.Handle
  /** `undefined` when ajv cannot compile the server's schema: the server validates alone. */
  readonly validate: ValidateFunction | undefined
  readonly expected: string
}

/** `strict: false`: MCP servers use keywords and formats ajv does not know; they must not break validation. */
const ajv = new Ajv({ allErrors: true, strict: false, logger: false })
const ajv2020 = new Ajv2020({ allErrors: true, strict: false, logger: false })

/** Compiles with the dialect the schema declares (zod 4 emits 2020-12; most servers draft-07 or none). */
const compile = (schema: Tool["inputSchema"]): ValidateFunction => {
  const dialect = schema["$schema"]
  const instance = typeof dialect === "string" && dialect.includes("2020-12") ? ajv2020 : ajv
  const validate = instance.compile(schema)
  // The validator is kept on the entry: drop ajv's own reference, or registries rebuilt per scope would pile up
  // schemas (and two servers reusing one `$id` would clash).
  instance.removeSchema(schema)
  return validate
}

const byName = (a: ToolDef, b: ToolDef): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

const toEntry = (
  tool: Tool,
  handle: Connection.Handle,
  overrides: Readonly<Record<string, "read" | "write">>
): Effect.Effect<Entry> =>
  Effect.gen(function*() {
    let validate: ValidateFunction | undefined
    try {
      validate = compile(tool.inputSchema)
    } catch (error) {
      yield* Effect.logWarning(
        `MCP tool "${tool.name}" of server "${handle.name}": input schema not compiled (${Texts.messageOf(error)}); ` +
          "arguments are validated by the server only"
      )
    }
    const def: ToolDef = {
      name: tool.name,
      description: tool.description ?? tool.annotations?.title ?? tool.title ?? "",
      parameters: tool.inputSchema,
      effect: overrides[tool.name] ?? (tool.annotations?.readOnlyHint === true ? "read" : "write"),
      source: `mcp:${handle.name}`
    }
    return { def, handle, validate, expected: Texts.summarize(tool.inputSchema) }
  })

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
const send = (entry: Entry, args: Record<string, unknown>, ms: number, track: Track) => {
  const { handle } = entry
  const server = handle.name
  const name = entry.def.name
  const attempt = (retried: boolean): Effect.Effect<ToolOutcome> =>
    Effect.flatMap(
      Connection.acquire(handle),
      Either.match({
        onLeft: (detail) => Effect.succeed(Texts.serverUnavailable(server, name, detail)),
        onRight: (conn) => {
          track.sent = true
          const onprogress = (p: { readonly progress: number; readonly total?: number | undefined }) => {
            track.progress = p.total === undefined ? String(p.progress) : `${p.progress} of ${p.total}`
          }
          const request = Effect.tryPromise({
            // The signal is aborted when this fiber is interrupted: the SDK then sends `notifications/cancelled`.
            try: (signal) =>
              conn.client.callTool({ name, arguments: args }, undefined, { signal, timeout: ms, onprogress }),
            catch: (error) => error
          }).pipe(
            Effect.match({
              onSuccess: (result): Sent => ({ _tag: "Result", result }),
              onFailure: (error): Sent => ({ _tag: "Failed", error })
            })
          )
          // A loss ends the call at once: an oversized answer is reported before the transport finishes closing.
          const lost = Effect.as(Connection.awaitLoss(conn), Lost)
          return Effect.flatMap(Effect.race(request, lost), (outcome): Effect.Effect<ToolOutcome> => {
            if (outcome._tag === "Result") {
              const { isError, text } = Content.render(outcome.result)
              return Effect.succeed(isError ? Texts.failed("tool_error", text) : { content: text, isError: false })
            }
            if (conn.loss !== undefined) return Effect.succeed(lostOutcome(server, name, conn.loss))
            const error = outcome._tag === "Failed" ? outcome.error : undefined
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
          })
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

const dispatch = (
  entries: ReadonlyMap<string, Entry>,
  available: string,
  name: string,
  argumentsJson: string
): Effect.Effect<ToolOutcome> => {
  const entry = entries.get(name)
  if (entry === undefined) return Effect.succeed(Texts.unknownTool(name, available))
  const checked = Arguments.check(name, argumentsJson, entry.validate, entry.expected)
  if (!checked.ok) return Effect.succeed(checked.outcome)
  const valid = checked.args
  return Effect.flatMap(Limits, (limits) => {
    const own = entry.handle.config.timeoutMs
    const ms = own === undefined ? limits.toolTimeoutMs : Math.min(own, limits.toolTimeoutMs)
    const track: Track = { sent: false, progress: undefined }
    return send(entry, valid, ms, track).pipe(
      Effect.timeoutTo({
        duration: ms,
        onSuccess: (outcome) => outcome,
        onTimeout: () =>
          track.sent
            ? Texts.timedOutAfterProgress(name, ms, track.progress)
            : Texts.serverUnavailable(entry.handle.name, name, `it did not come back within ${ms} ms`)
      }),
      Effect.withSpan("mcp.tool_call", {
        attributes: { "mcp.server": entry.handle.name, "gen_ai.tool.name": name, "mcp.timeout_ms": ms }
      })
    )
  })
}

/**
 * Connects to every server (concurrently), lists their tools and builds the registry; the connections live as long
 * as the scope (closing it stops restarts and ends stdio children). Fails with `McpServerFailedToStart` naming the
 * first server that could not start, or `McpToolNameCollision` naming the tool and both servers. Tools listed in a
 * server's `exclude` are neither advertised nor callable; `effects` overrides win over `readOnlyHint`.
 */
export const make = (
  servers: McpConfig.McpServers,
  options?: MakeOptions
): Effect.Effect<McpRegistry, McpStartError, Scope.Scope> =>
  Effect.gen(function*() {
    const connection: Connection.Options = {
      connectTimeoutMs: options?.connectTimeoutMs ?? 30_000,
      restart: options?.restartSchedule ?? defaultRestartSchedule
    }
    // Sorted, so a collision always names the servers in the same order.
    const handles = Object.keys(servers).sort().map((name) => Connection.makeHandle(name, servers[name]!))
    // One finalizer closing every server at once: a graceful stdio close can take seconds, and they add up.
    yield* Effect.addFinalizer(() =>
      Effect.forEach(handles, Connection.shutdown, { concurrency: "unbounded", discard: true })
    )
    const listed = yield* Effect.forEach(handles, (handle) =>
      Connection.start(handle, connection).pipe(
        Effect.mapError((reason) => new McpServerFailedToStart({ server: handle.name, reason }))
      ), { concurrency: "unbounded" })

    const entries = new Map<string, Entry>()
    for (const [i, handle] of handles.entries()) {
      const tools = listed[i] ?? []
      const excluded = new Set(handle.config.exclude ?? [])
      const overrides = handle.config.effects ?? {}
      for (const name of Object.keys(overrides)) {
        if (!tools.some((t) => t.name === name)) {
          yield* Effect.logWarning(`MCP server "${handle.name}" has no tool "${name}"; its effect override is unused`)
        }
      }
      for (const tool of tools) {
        if (excluded.has(tool.name)) continue
        const other = entries.get(tool.name)
        if (other !== undefined) {
          return yield* new McpToolNameCollision({ tool: tool.name, servers: [other.handle.name, handle.name] })
        }
        entries.set(tool.name, yield* toEntry(tool, handle, overrides))
      }
    }

    const tools = Array.from(entries.values(), (e) => e.def).sort(byName)
    const available = tools.map((t) => t.name).join(", ")
    const all = Effect.succeed(tools)
    return {
      tools,
      list: () => all,
      call: (name, argumentsJson) => Effect.suspend(() => dispatch(entries, available, name, argumentsJson))
    }
  })

/** `make(servers, options)` as the `ToolExecutor` layer; fails to build with `McpStartError`. */
export const layer = (
  servers: McpConfig.McpServers,
  options?: MakeOptions
): Layer.Layer<ToolExecutor, McpStartError> => Layer.scoped(ToolExecutor, make(servers, options))
