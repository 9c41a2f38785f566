/**
 * Wiring — the ONE place where configuration becomes a running Corral: which store (memory, embedded PGlite or
 * Postgres), which model routes (the configured providers plus the scripted `demo` tier), which tools (MCP servers
 * plus the demo tools), which ceilings. `corral serve`, `corral run`, `replay` and `agents publish` all build
 * their runtime here, so a new adapter is wired once.
 *
 * Fallbacks are deliberate: no providers configured still gives a working server (the demo agent only); no MCP
 * servers gives the built-in demo tools; `database.store: "memory"` skips SQL entirely; an MCP server that is down
 * is reported (by `/readyz` and `GET /v1/tools`), never fatal.
 *
 * A built-in tool is never shadowed by an MCP tool: the operator audited what a built-in does, and a server exporting
 * the same name would silently take its calls (and its approvals) over. A clash known at start refuses the start,
 * naming the server and the tool; one that appears later (a server that adds tools, or comes back with others) keeps
 * the built-in and logs a warning naming both.
 *
 * Cluster mode (`cluster.enabled`, `corral serve --cluster`): sessions are hosted by @effect/cluster on the runners
 * of every node sharing the Postgres database (`Corral.layerCluster`), and events cross nodes over LISTEN/NOTIFY
 * (cluster/ClusterEvents). It refuses to start without Postgres: the embedded PGlite belongs to one process, and its
 * advisory locks do not exclude, so two runners would own the same shards.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, Schema } from "effect"
import type { ConfigError, Scope } from "effect"
import { randomUUID } from "node:crypto"
import { layerCluster } from "../cluster.js"
import * as ClusterEvents from "../cluster/ClusterEvents.js"
import * as Ownership from "../cluster/Ownership.js"
import type { Settings } from "../config/Config.js"
import { Corral } from "../Corral.js"
import type { InvalidRequest, PersistenceFailed } from "../domain/Errors.js"
import type { Principal } from "../domain/Principal.js"
import type { SessionEvent } from "../domain/SessionEvent.js"
import * as LiveEvents from "../events/LiveEvents.js"
import { SessionEvents } from "../events/SessionEvents.js"
import { Providers } from "../model/ModelProvider.js"
import * as ProviderConfig from "../model/ProviderConfig.js"
import * as Limits from "../rails/Limits.js"
import * as OrgBudget from "../rails/OrgBudget.js"
import type * as Supervisor from "../session/Supervisor.js"
import { SessionStore } from "../store/SessionStore.js"
import * as Approvals from "../tools/Approvals.js"
import { Elicitations } from "../tools/Elicitations.js"
import * as McpRegistry from "../tools/McpRegistry.js"
import { ToolExecutor } from "../tools/ToolExecutor.js"
import type { ToolDef } from "../tools/ToolExecutor.js"
import { ToolNotices } from "../tools/ToolNotices.js"
import * as ToolRegistry from "../tools/ToolRegistry.js"
import * as DemoAgent from "./DemoAgent.js"
import * as ClusterWiring from "./internal/clusterWiring.js"
import * as StoreWiring from "./internal/storeWiring.js"
import * as AgentFeed from "./mcp/AgentFeed.js"
import * as PendingElicitations from "./PendingElicitations.js"
import * as Readiness from "./Readiness.js"

// The store and cluster layers live in internal/ (storeWiring, clusterWiring); their public names are Wiring's.
export { ClusterNeedsPostgres, ClusterStartFailed } from "./internal/clusterWiring.js"
export {
  CredentialsNotDurable,
  database,
  durableCredentials,
  forgetCredentials,
  migrate,
  store
} from "./internal/storeWiring.js"

/** Why the runtime could not be built. */
export type WiringError =
  | PersistenceFailed
  | ConfigError.ConfigError
  | McpRegistry.McpStartError
  | McpToolShadowsBuiltIn
  | InvalidRequest
  | ClusterWiring.ClusterNeedsPostgres
  | ClusterWiring.ClusterStartFailed

/** An MCP server exports a tool under the name of a built-in tool (refused at start: a built-in is never shadowed). */
export class McpToolShadowsBuiltIn extends Schema.TaggedError<McpToolShadowsBuiltIn>()("McpToolShadowsBuiltIn", {
  tool: Schema.String,
  server: Schema.String
}) {
  override get message(): string {
    return `MCP server "${this.server}" exports tool "${this.tool}", the name of a built-in tool; a built-in tool ` +
      `cannot be shadowed: add "${this.tool}" to the server's "exclude" list, or rename it on the server`
  }
}

/** What the runtime provides to the server and the CLI. */
export type Services =
  | Corral
  | Supervisor.Supervisor
  | SessionStore
  | Readiness.Readiness
  | ToolExecutor
  | Providers
  | AgentFeed.AgentFeed
  | PendingElicitations.PendingElicitations

/**
 * The model routes: the configured tiers, plus the `demo` tier (the scripted demo model) when the demo is on. The
 * demo tier wins over a configured tier of the same name, so the demo agent always runs offline.
 */
export const providers = (settings: Settings, options: { readonly demoEverywhere?: boolean } = {}) => {
  const configured: Layer.Layer<Providers, ConfigError.ConfigError> =
    Object.keys(settings.models.providers ?? {}).length === 0
      ? Layer.succeed(Providers, Providers.fromRoutes({}))
      : ProviderConfig.layerNode(settings.models)
  if (!settings.demo.enabled) return configured
  const demo = [DemoAgent.provider(settings.demo.delayMs)]
  return Layer.effect(
    Providers,
    Effect.map(Providers, (base) => ({
      tiers: [...new Set([...base.tiers, DemoAgent.tier])].sort(),
      // `demoEverywhere` (corral run --demo): every tier is the demo model.
      route: (tier: string) =>
        tier === DemoAgent.tier || options.demoEverywhere === true ? Option.some(demo) : base.route(tier)
    }))
  ).pipe(Layer.provide(configured))
}

const serverOf = (def: ToolDef): string => def.source.startsWith("mcp:") ? def.source.slice(4) : def.source

/**
 * The MCP tools under the built-ins: a built-in name wins every listing and every call. A clash already known at
 * start fails with `McpToolShadowsBuiltIn`; a later one is logged (a warning naming the server and the tool, once per
 * clash) when the tools are next listed — every burst lists them before it offers any — and the MCP tool is neither
 * offered nor callable under that name.
 */
const underBuiltIns = (
  mcp: McpRegistry.McpRegistry,
  builtIn: ToolRegistry.Registry
): Effect.Effect<Context.Tag.Service<ToolExecutor>, McpToolShadowsBuiltIn> =>
  Effect.gen(function*() {
    const clash = mcp.tools.find((def) => builtIn.has(def.name))
    if (clash !== undefined) {
      return yield* new McpToolShadowsBuiltIn({ tool: clash.name, server: serverOf(clash) })
    }
    const warned = new Set<string>()
    const watched: Context.Tag.Service<ToolExecutor> = {
      ...(mcp.servers === undefined ? {} : { servers: mcp.servers }),
      ...(mcp.prompt === undefined ? {} : { prompt: mcp.prompt }),
      call: mcp.call,
      // Listed on every call by `layered` (the MCP list is dynamic): a plain loop, effects only for a new clash.
      list: (ctx) =>
        Effect.flatMap(mcp.list(ctx), (listed) => {
          const fresh: Array<ToolDef> = []
          for (const def of listed) {
            const key = JSON.stringify([def.source, def.name])
            if (!builtIn.has(def.name) || warned.has(key)) continue
            warned.add(key)
            fresh.push(def)
          }
          if (fresh.length === 0) return Effect.succeed(listed)
          return Effect.as(
            Effect.forEach(fresh, (def) =>
              Effect.logWarning(
                `MCP server "${serverOf(def)}" now exports tool "${def.name}", the name of a built-in tool: the ` +
                  `built-in keeps the name and the server's tool is not offered; add "${def.name}" to the server's ` +
                  `"exclude" list, or rename it on the server`
              ), { discard: true }),
            listed
          )
        })
    }
    // The first layer shadows the second: the built-ins go on top.
    return ToolRegistry.layered(builtIn, watched)
  })

/**
 * The tools: MCP servers' tools under the demo tools (when the demo is on; see `underBuiltIns`). An MCP server that
 * cannot start does not fail the layer (it is down and retried); a tool name two servers export does, and so does a
 * server's tool named like a built-in. A running call's notices go to the `ToolNotices` in context, if any.
 */
export const tools = (
  settings: Settings
): Layer.Layer<ToolExecutor, McpRegistry.McpStartError | McpToolShadowsBuiltIn> => {
  const builtIn = ToolRegistry.make(settings.demo.enabled ? DemoAgent.tools : [])
  if (Object.keys(settings.mcpServers).length === 0) return Layer.succeed(ToolExecutor, builtIn)
  return Layer.scoped(
    ToolExecutor,
    Effect.flatMap(McpRegistry.make(settings.mcpServers), (mcp) => underBuiltIns(mcp, builtIn))
  )
}

/** Sessions whose last event sequence is remembered for tool notices, at most (the oldest is forgotten first). */
const NOTICE_SESSIONS = 10_000

/**
 * Live events, plus the sink that turns tool notices into `tool_progress` / `tool_log` events. A notice's `seq`
 * must be the session's last persisted turn (the SSE resume point), which only the burst knows: the sink remembers
 * the last sequence each session published (a burst publishes at least its opening turn before any tool runs) and
 * forgets it at the burst's `report`, so the map holds only sessions with a burst in flight.
 */
const eventsOver = <E, R>(
  make: Effect.Effect<LiveEvents.LiveEvents, E, R>
): Layer.Layer<
  SessionEvents | ToolNotices | PendingElicitations.PendingElicitations | Elicitations,
  E,
  Exclude<R, Scope.Scope>
> =>
  Layer.scopedContext(Effect.map(make, (live) => {
    const lastSeq = new Map<string, number>()
    const remember = (event: SessionEvent) => {
      if (event._tag === "report") {
        lastSeq.delete(event.sessionId)
        return
      }
      lastSeq.delete(event.sessionId) // re-inserted last: the map's order is oldest first
      lastSeq.set(event.sessionId, event.seq)
      if (lastSeq.size > NOTICE_SESSIONS) lastSeq.delete(lastSeq.keys().next().value!)
    }
    const publish = (event: SessionEvent) => Effect.zipRight(Effect.sync(() => remember(event)), live.publish(event))
    const notices: Context.Tag.Service<ToolNotices> = {
      notify: (notice) =>
        Effect.suspend(() => {
          const seq = lastSeq.get(notice.sessionId)
          // No burst in flight for it (an approval handler's call): nobody is following a live call there.
          if (seq === undefined) return Effect.void
          const base = { sessionId: notice.sessionId, seq, callId: notice.callId, name: notice.name }
          return live.publish(
            notice._tag === "progress"
              ? {
                _tag: "tool_progress",
                ...base,
                progress: notice.progress,
                ...(notice.total === undefined ? {} : { total: notice.total }),
                ...(notice.message === undefined ? {} : { message: notice.message })
              }
              : { _tag: "tool_log", ...base, level: notice.level, message: notice.message }
          )
        })
    }
    const pending = PendingElicitations.make(live.publish, (sessionId) => lastSeq.get(sessionId))
    return Context.make(SessionEvents, { ...live, publish }).pipe(
      Context.add(ToolNotices, notices),
      Context.add(PendingElicitations.PendingElicitations, pending),
      // MCP servers' questions go to the session's person through the API (`POST …/elicitations/{id}`).
      Context.add(Elicitations, { ask: pending.ask })
    )
  }))

/** Live events of this process (see `eventsOver`). */
export const events: Layer.Layer<
  SessionEvents | ToolNotices | PendingElicitations.PendingElicitations | Elicitations,
  never,
  SessionStore
> = eventsOver(LiveEvents.make)

/**
 * Live events that also cross the nodes of a cluster, over Postgres LISTEN/NOTIFY (cluster/ClusterEvents); `node`
 * names this node on the channel, and its store notifies the turns it stores (`ClusterEvents.stored`).
 */
const clusterEvents = (node: string) =>
  eventsOver(
    Effect.gen(function*() {
      const local = yield* LiveEvents.make
      const relayed = yield* ClusterEvents.relay({
        local,
        pg: yield* PgClient.PgClient,
        store: yield* SessionStore,
        node,
        storeNotifies: true
      })
      return { ...local, ...relayed }
    })
  )

/** Readiness that also reports each MCP server's state; a server that is down never fails it. */
const readiness = Layer.effect(
  Readiness.Readiness,
  Effect.zipWith(Readiness.Readiness, ToolExecutor, (base, executor) =>
    Readiness.withToolServers(
      base,
      Effect.map(executor.servers ?? Effect.succeed([]), (servers) =>
        Object.fromEntries(servers.map((s) => [
          `mcp:${s.name}`,
          s.state === "down"
            ? `down since ${new Date(s.since).toISOString()}${s.lastError === undefined ? "" : `: ${s.lastError}`}`
            : s.state
        ])))
    ))
)

/**
 * `Corral` whose `publishAgent` also tells the `AgentFeed` (so MCP connections of the org announce their changed
 * tool list); everything else is the wrapped service.
 */
const announcing = Layer.effect(
  Corral,
  Effect.zipWith(Corral, AgentFeed.AgentFeed, (corral, feed) => ({
    ...corral,
    publishAgent: (by: Principal, spec: Parameters<typeof corral.publishAgent>[1]) =>
      Effect.tap(corral.publishAgent(by, spec), () => Effect.sync(() => feed.published(by.orgId)))
  }))
)

/** Publishes the demo agent into each org (idempotent: the same version replaces itself). */
export const publishDemo = (orgs: ReadonlyArray<Principal>) =>
  Layer.effectDiscard(
    Effect.flatMap(Corral, (corral) =>
      Effect.forEach(orgs, (principal) => corral.publishAgent(principal, DemoAgent.spec), { discard: true }))
  )

/**
 * The whole runtime for `settings`: Corral (with its local supervisor) over the configured store, live events,
 * tools, model routes and ceilings, with the demo agent published into `orgs` when the demo is on.
 */
export const layer = (
  settings: Settings,
  orgs: ReadonlyArray<Principal>,
  options: { readonly demoEverywhere?: boolean } = {}
): Layer.Layer<Services, WiringError> => {
  if (settings.cluster.enabled && settings.database._tag !== "Postgres") {
    return Layer.fail(
      new ClusterWiring.ClusterNeedsPostgres({ store: settings.database._tag === "Memory" ? "memory" : "embedded" })
    )
  }
  if (settings.cluster.enabled && settings.database._tag === "Postgres") {
    settings = {
      ...settings,
      database: { ...settings.database, url: ClusterWiring.named(settings.database.url, settings) }
    }
  }
  const cluster = settings.cluster.enabled && settings.database._tag === "Postgres"
    ? ClusterWiring.sharding(settings, settings.database.url)
    : undefined
  const node = randomUUID()
  const ports = Layer.mergeAll(tools(settings), providers(settings, options)).pipe(
    Layer.provideMerge(cluster === undefined ? events : Layer.provide(clusterEvents(node), cluster.sql)),
    Layer.provideMerge(
      StoreWiring.store(
        settings,
        cluster === undefined ? undefined : { channel: ClusterEvents.channel, payloads: ClusterEvents.stored(node) }
      )
    )
  )
  const hosting = { maxRunningBursts: settings.server.maxRunningBursts }
  const corral = announcing.pipe(
    Layer.provideMerge(
      cluster === undefined
        ? Corral.layer(hosting)
        : Layer.provide(
          // The sweep runs as often as a shard lock lives: about as soon as a dead node's shards move anyway. A view
          // of a session no live node owns says so (cluster/Ownership).
          Ownership.layer.pipe(Layer.provideMerge(
            layerCluster({ ...hosting, sweepInterval: Duration.millis(settings.cluster.lockExpirationMs) })
          )),
          Layer.merge(cluster.runner, cluster.sql)
        )
    ),
    Layer.provideMerge(Layer.provideMerge(readiness, ports)),
    Layer.provideMerge(AgentFeed.layer)
  )
  const withDemo = settings.demo.enabled ? Layer.provideMerge(publishDemo(orgs), corral) : corral
  return withDemo.pipe(
    Layer.provide(settings.limits === undefined ? Layer.empty : Limits.layer(settings.limits)),
    Layer.provide(Layer.succeed(OrgBudget.OrgBudgets, settings.orgBudgets)),
    Layer.provide(Layer.succeed(Approvals.ApprovalSettings, settings.approvals))
  )
}
