/**
 * McpRegistry — tools from MCP servers behind the `ToolExecutor` port.
 *
 * Servers come from the `mcpServers` config. All are connected at start (concurrently, each within the connect
 * timeout) and their tools listed (every page). A server that cannot start — a missing command, a dead URL, a 401 —
 * does NOT fail the start: one broken integration must not take the whole service down. It is marked down, its
 * tools are known only by config (`tools` and `effects` names) and marked unavailable, and it is retried in the
 * background with the jittered, capped restart schedule; when it comes up its tools are listed and swapped in.
 * `list` returns every known tool, those of a server that is not up marked `unavailable` with the reason (so a burst
 * leaves them out and says why, and publishing an agent naming them is still accepted); before it answers, a
 * Streamable HTTP server that is down is tried at once (the backoff cut short, bounded by `probeMs`, one attempt
 * shared by every caller: `internal/mcpConnection`'s `probe`), so a server that is back is offered to the next burst
 * rather than when a backoff grown during the outage fires; `servers` tells each
 * server's state, since when, and its last error. A tool name exported by two servers at start fails the start —
 * silently picking one would let a config change reroute a call to a different server. The merged list is
 * advertised sorted by name, with source `mcp:<server>` and effect `read` only when the server promises
 * `readOnlyHint: true` (an unannotated tool may change things, so it waits for a person), unless the config
 * overrides it.
 *
 * The list follows the servers: when one sends `notifications/tools/list_changed`, or comes back from a restart, its
 * tools are listed again and the registry rebuilt from every server's last list, then swapped in whole, so a call
 * sees either the old list or the new one. Refreshes run one batch at a time (changes that arrive meanwhile are
 * coalesced into the next batch), so two rebuilds never interleave. A refresh never fails the registry: a name
 * another server already serves stays with that server (the newcomer is not advertised, and an error is logged),
 * and a listing that fails keeps the server's last list (with a warning) until its next change or restart.
 *
 * `call` never fails, and speaks like the in-process registry (same texts): the arguments must be a JSON object
 * (never repaired) that passes the tool's input schema (ajv, compiled once per tool) before anything is sent. Every
 * call has a deadline — the server's `timeoutMs`, capped by `Limits.toolTimeoutMs`, restarted by progress up to a
 * hard cap (`internal/progressDeadline`) — enforced by Corral, not only by the SDK. Interrupting the call aborts the
 * MCP request (the server is sent a cancellation). Tool errors, protocol errors, crashes and lost connections (a
 * Streamable HTTP stream that breaks mid-call fails the call at once) all become error-flagged outcomes saying what
 * happened; lost servers are restarted (see `internal/mcpConnection`). A call's progress and its server's log
 * messages go to `ToolNotices` when the runtime provides one.
 */
import { Chunk, Clock, Deferred, Effect, Either, Fiber, Layer, Option, Queue, Runtime, Schedule, Schema } from "effect"
import type { Context, Scope } from "effect"
import { Elicitations } from "./Elicitations.js"
import * as McpCall from "./internal/mcpCall.js"
import type { Entry } from "./internal/mcpCall.js"
import * as Connection from "./internal/mcpConnection.js"
import { configuredEntries, entriesOf } from "./internal/mcpEntries.js"
import type * as McpOAuth from "./internal/mcpOAuth.js"
import * as McpResources from "./internal/mcpResources.js"
import * as Wiring from "./internal/mcpWiring.js"
import * as Texts from "./internal/texts.js"
import type * as McpConfig from "./McpConfig.js"
import { McpCredentials } from "./McpCredentials.js"
import * as Credentials from "./McpCredentials.js"
import { ToolExecutor } from "./ToolExecutor.js"
import type { ToolContext, ToolDef, ToolOutcome } from "./ToolExecutor.js"
import { ToolNotices } from "./ToolNotices.js"

/** Two servers (or one server twice) export the same tool name; `prefix` or `exclude` one of them in the config. */
export class McpToolNameCollision extends Schema.TaggedError<McpToolNameCollision>()("McpToolNameCollision", {
  tool: Schema.String,
  servers: Schema.Tuple(Schema.String, Schema.String)
}) {
  override get message(): string {
    const [a, b] = this.servers
    return a === b
      ? `MCP server "${a}" lists tool "${this.tool}" twice`
      : `tool "${this.tool}" is exported by both MCP servers "${a}" and "${b}"; give one of them a \`prefix\`, or ` +
        "exclude the tool from one of them"
  }
}

/** Why `make` failed (a server that cannot start is not a failure: it is down, and retried). */
export type McpStartError = McpToolNameCollision

/** The registry: the `ToolExecutor` service plus the advertised tools. */
export interface McpRegistry extends Context.Tag.Service<ToolExecutor> {
  /** Every tool known now (what `list` returns), sorted by name; it changes as the servers' lists change. */
  readonly tools: ReadonlyArray<ToolDef>
  /**
   * Completes once every tool-list change noticed so far (a notification, a restart) has been applied, or given up
   * on when the listing failed. Never completes after the registry's scope closed.
   */
  readonly refreshed: Effect.Effect<void>
  /**
   * What server `name` says about itself and lists (tools as the server names them, resources, templates, prompts),
   * asked now within the connect timeout; fails with a message when it is unknown, down or does not answer.
   */
  readonly describe: (name: string) => Effect.Effect<McpResources.Description, string>
}

/** Tuning of `make`; the defaults suit production. */
export interface MakeOptions {
  /** Bound on connecting to one server (spawn or dial, initialize, list). Default 30 s. */
  readonly connectTimeoutMs?: number
  /** Delays between failed restart attempts of a lost server. Default: jittered exponential from 200 ms, ≤ 30 s. */
  readonly restartSchedule?: Schedule.Schedule<unknown, unknown>
  /**
   * How long `list` waits for a down server it tried at once (and for its tools to be listed again) before it answers
   * with the server still unavailable. Default 1 s: a server that is back answers `initialize` and `tools/list` well
   * within it, and a burst starting while a server stays down is held at most that long.
   */
  readonly probeMs?: number
  /**
   * Whether an OAuth authorization URL (`auth.grant: "authorization_code"`) may be followed by Corral itself
   * (`"follow"`: `corral mcp inspect`, tests) or needs a person this host does not have (`"none"`, the default: the
   * server is marked down saying what to do).
   */
  readonly interaction?: McpOAuth.Interaction
}

/** Jittered exponential backoff from 200 ms, each delay capped at 30 s, retried for as long as the scope lives. */
export const defaultRestartSchedule: Schedule.Schedule<unknown, unknown> = Schedule.exponential("200 millis", 2).pipe(
  Schedule.jittered,
  Schedule.union(Schedule.spaced("30 seconds"))
)

const byName = (a: ToolDef, b: ToolDef): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)

/** What calls dispatch against: replaced whole on every rebuild, never mutated. */
interface Snapshot {
  /** The core `read_resource` tool, present once a server has offered resources. */
  readonly core: McpResources.Core | undefined
  readonly entries: ReadonlyMap<string, Entry>
  readonly tools: ReadonlyArray<ToolDef>
  /** The names, for the unknown-tool text. */
  readonly available: string
}

/** The snapshot of `entries`, with the core `read_resource` tool when a server of `handles` offers resources. */
const snapshotOf = (entries: ReadonlyMap<string, Entry>, handles: ReadonlyArray<Connection.Handle>): Snapshot => {
  const core = McpResources.coreOf(handles)
  const tools = [...(core === undefined ? [] : [core.def]), ...Array.from(entries.values(), (e) => e.def)].sort(byName)
  return { entries, core, tools, available: tools.map((t) => t.name).join(", ") }
}

/**
 * Merges every server's entries, in server order. A name a server served in `previous` stays with it, so a refresh
 * can add names but never take one from its owner; any other name goes to the first server listing it. Every name
 * that went to another server (or the same server, listed twice) is refused.
 */
const merge = (
  handles: ReadonlyArray<Connection.Handle>,
  listed: ReadonlyMap<Connection.Handle, ReadonlyArray<Entry>>,
  previous: ReadonlyMap<string, Entry>
): { readonly entries: ReadonlyMap<string, Entry>; readonly refused: ReadonlyArray<McpToolNameCollision> } => {
  const entries = new Map<string, Entry>()
  for (const handle of handles) {
    for (const entry of listed.get(handle) ?? []) {
      if (previous.get(entry.def.name)?.handle === handle) entries.set(entry.def.name, entry)
    }
  }
  const refused: Array<McpToolNameCollision> = []
  for (const handle of handles) {
    for (const entry of listed.get(handle) ?? []) {
      const owner = entries.get(entry.def.name)
      if (owner === undefined) entries.set(entry.def.name, entry)
      else if (owner !== entry) {
        refused.push(new McpToolNameCollision({ tool: entry.def.name, servers: [owner.handle.name, handle.name] }))
      }
    }
  }
  return { entries, refused }
}

/** The log line of a name refused by a refresh. */
const refusal = (collision: McpToolNameCollision): string => {
  const [owner, newcomer] = collision.servers
  return owner === newcomer
    ? `${collision.message}; only one of them is advertised`
    : `${collision.message}; "${owner}" keeps serving it and "${newcomer}"'s is not advertised`
}

/** Why the tools of `handle` cannot be called now; `undefined` when it is up. */
const unavailability = (handle: Connection.Handle): string | undefined => {
  switch (Connection.phaseOf(handle)) {
    case "up":
      return undefined
    case "starting":
      return `MCP server "${handle.name}" is starting`
    case "down":
      return `MCP server "${handle.name}" is down since ${new Date(handle.since).toISOString()}` +
        (handle.lastError === undefined ? "" : `: ${handle.lastError}`)
  }
}

/** The snapshot's tools, each of a server that is not up marked `unavailable` (read live: states change in callbacks). */
const known = (snapshot: Snapshot, handles: ReadonlyArray<Connection.Handle>): ReadonlyArray<ToolDef> => {
  const reasons = new Map<Connection.Handle, string>()
  for (const handle of handles) {
    const reason = unavailability(handle)
    if (reason !== undefined) reasons.set(handle, reason)
  }
  if (reasons.size === 0) return snapshot.tools
  return snapshot.tools.map((def) => {
    const entry = snapshot.entries.get(def.name)
    const reason = entry === undefined ? undefined : reasons.get(entry.handle)
    return reason === undefined ? def : { ...def, unavailable: reason }
  })
}

const dispatch = (
  snapshot: Snapshot,
  name: string,
  argumentsJson: string,
  notify: McpCall.Notify | undefined,
  ctx: ToolContext
): Effect.Effect<ToolOutcome> => {
  const entry = snapshot.entries.get(name)
  return entry === undefined
    ? Effect.succeed(Texts.unknownTool(name, snapshot.available))
    : McpCall.call(entry, argumentsJson, notify, ctx.timeoutMs, {
      sessionId: ctx.sessionId,
      callId: ctx.callId,
      ...(ctx.sample === undefined ? {} : { sample: ctx.sample })
    })
}

/** A server whose tools may have changed, or a caller waiting for every change before it to be applied. */
type Change =
  | { readonly _tag: "Changed"; readonly handle: Connection.Handle }
  | { readonly _tag: "Barrier"; readonly done: Deferred.Deferred<void> }

/**
 * Connects to every server (concurrently), lists their tools and builds the registry; the connections live as long
 * as the scope (closing it stops restarts, refreshes and stdio children). A server that cannot start is down, not a
 * failure: its config-known tools are listed unavailable and it is retried in the background. Fails only with
 * `McpToolNameCollision`, naming the tool and both servers. Tools listed in a server's `exclude` are neither
 * advertised nor callable; `effects` overrides win over `readOnlyHint`.
 */
export const make = (
  servers: McpConfig.McpServers,
  options?: MakeOptions
): Effect.Effect<McpRegistry, McpStartError, Scope.Scope> =>
  Effect.gen(function*() {
    const changes = yield* Queue.unbounded<Change>()
    const notices = yield* Effect.serviceOption(ToolNotices)
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const connection = Wiring.connectionOptions(
      {
        connectTimeoutMs: options?.connectTimeoutMs ?? 30_000,
        restart: options?.restartSchedule ?? defaultRestartSchedule,
        elicitations: yield* Effect.serviceOption(Elicitations),
        notices
      },
      (handle) => Queue.unsafeOffer(changes, { _tag: "Changed", handle }),
      runtime
    )
    const now = yield* Clock.currentTimeMillis
    const credentials = Option.getOrElse(yield* Effect.serviceOption(McpCredentials), Credentials.makeMemory)
    const interaction = options?.interaction ?? "none"
    // Sorted, so a collision always names the servers in the same order.
    const handles = Object.keys(servers).sort().map((name) =>
      Connection.makeHandle(
        name,
        servers[name]!,
        now,
        Wiring.oauthOf(credentials, interaction, runtime, name, servers[name]!)
      )
    )
    // One finalizer closing every server at once: a graceful stdio close can take up to a second, and they add up.
    // On a fiber of its own: a finalizer runs with the fiber refs of its acquisition, and a layer built beside others
    // forks, from its finalizer too, onto the fiber that built them (Effect's concurrent build grafts its forks
    // there) — in `corral serve` the main fiber, whose end waits for them, so a close there held the process's exit
    // past its shutdown bound. A daemon's forks are its own: a host that stops waiting for this finalizer can exit.
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(
        Effect.forkDaemon(Effect.forEach(handles, Connection.shutdown, { concurrency: "unbounded", discard: true })),
        Fiber.join
      )
    )
    const started = yield* Effect.forEach(handles, (handle) => Connection.start(handle, connection), {
      concurrency: "unbounded"
    })

    // Each server's last successful listing, as entries (its config-known tools until it has listed any); the
    // registry is always merged from these.
    const listed = new Map<Connection.Handle, ReadonlyArray<Entry>>()
    for (const [i, handle] of handles.entries()) {
      const result = started[i]!
      if (Either.isLeft(result)) {
        listed.set(handle, configuredEntries(handle))
        continue
      }
      const tools = result.right
      for (const name of Object.keys(handle.config.effects ?? {})) {
        if (!tools.some((t) => t.name === name)) {
          yield* Effect.logWarning(`MCP server "${handle.name}" has no tool "${name}"; its effect override is unused`)
        }
      }
      listed.set(handle, yield* entriesOf(handle, tools))
    }
    const initial = merge(handles, listed, new Map())
    if (initial.refused[0] !== undefined) return yield* initial.refused[0]
    // A plain variable swapped in one assignment: every call and listing reads one consistent snapshot.
    let current = snapshotOf(initial.entries, handles)
    // Refusals already logged, so a collision that persists across refreshes is reported once.
    let reported = new Set<string>()

    const apply = (due: ReadonlySet<Connection.Handle>) =>
      Effect.gen(function*() {
        // Concurrently: one slow server must not hold back the others' lists for its whole timeout.
        yield* Effect.forEach(due, (handle) => Wiring.relist(listed, connection.connectTimeoutMs, handle), {
          concurrency: "unbounded",
          discard: true
        })
        const { entries, refused } = merge(handles, listed, current.entries)
        current = snapshotOf(entries, handles)
        const keys = new Set<string>()
        for (const collision of refused) {
          const key = JSON.stringify([collision.tool, ...collision.servers])
          keys.add(key)
          if (!reported.has(key)) yield* Effect.logError(refusal(collision))
        }
        reported = keys
      })

    // The one refresher: a batch is everything queued when it starts, so a burst of notifications costs one listing
    // per server, and a rebuild never overlaps another.
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      const batch = Chunk.toReadonlyArray(yield* Queue.takeBetween(changes, 1, Number.MAX_SAFE_INTEGER))
      const due = new Set<Connection.Handle>()
      for (const change of batch) if (change._tag === "Changed") due.add(change.handle)
      if (due.size > 0) yield* apply(due)
      for (const change of batch) if (change._tag === "Barrier") yield* Deferred.succeed(change.done, undefined)
    })))

    const refreshed = Effect.flatMap(
      Deferred.make<void>(),
      (done) => Effect.zipRight(Queue.offer(changes, { _tag: "Barrier", done }), Deferred.await(done))
    )
    const probeDown = Wiring.probeDown(handles, options?.probeMs ?? 1_000, refreshed)
    return {
      get tools() {
        return known(current, handles)
      },
      refreshed,
      servers: Wiring.statuses(handles, () => current.entries),
      list: () => Effect.zipRight(probeDown, Effect.sync(() => known(current, handles))),
      call: (name, argumentsJson, ctx) =>
        Effect.suspend(() =>
          current.core !== undefined && name === current.core.def.name
            ? McpResources.callCore(current.core, current.entries, handles, argumentsJson, ctx)
            : dispatch(current, name, argumentsJson, Wiring.notifyFor(notices, runFork, ctx, name), ctx)
        ),
      prompt: (ref, ctx) => McpResources.prompt(handles, ref, ctx.timeoutMs),
      describe: (name) => {
        const handle = handles.find((h) => h.name === name)
        return handle === undefined
          ? Effect.fail(`no MCP server "${name}" is configured`)
          : McpResources.describeServer(handle, connection.connectTimeoutMs)
      }
    }
  })

/** `make(servers, options)` as the `ToolExecutor` layer; fails to build with `McpStartError`. */
export const layer = (
  servers: McpConfig.McpServers,
  options?: MakeOptions
): Layer.Layer<ToolExecutor, McpStartError> => Layer.scoped(ToolExecutor, make(servers, options))
