/**
 * Server — the bundled Node HTTP server: the `Api` handlers, `/openapi.json`, the docs page at `/docs`, the viewer
 * at `/ui`, the MCP server at `/mcp` (`mcp/Http`), the body guard, authentication, and the graceful shutdown, over
 * the runtime `Wiring` builds.
 *
 * Without API keys the server is a local tool: it binds 127.0.0.1 whatever `server.host` says and warns at start,
 * so forgetting keys can never expose an unauthenticated API to a network.
 *
 * Shutdown ordering rides on layer ordering: the drain finalizer is acquired after the HTTP server, so it runs
 * before the server's own close (which would otherwise wait forever on open event streams), and everything below —
 * actors, store, database — closes after it (see `Shutdown`). `launch` bounds the whole of it: a store that hangs
 * cannot hold the process past `server.shutdownTimeoutMs` plus a short grace for closing the layers.
 *
 * Start-up: the socket listens (NodeHttpServer) a moment before the request handler is attached (HttpApiBuilder);
 * a request accepted in between would wait for an answer that never comes. `frontDoor` keeps such requests and
 * hands them to the handler once it is attached, so every accepted connection is answered; from then on it lets
 * requests in through `RequestGate` (at most `server.maxRequestsInFlight` worked on at once, the rest waiting).
 */
import { HttpApiBuilder, HttpMiddleware, HttpServer, HttpServerRequest } from "@effect/platform"
import type { HttpApp } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { EventEmitter } from "node:events"
import { createServer } from "node:http"
import type { IncomingMessage, Server as NodeServer, ServerResponse } from "node:http"
import { ConfigInvalid } from "../config/Config.js"
import type { Settings } from "../config/Config.js"
import { FieldIssue } from "../domain/Errors.js"
import * as ProviderConfig from "../model/ProviderConfig.js"
import * as Tracing from "../telemetry/Tracing.js"
import { Api } from "./Api.js"
import * as Authentication from "./Authentication.js"
import * as BodyGuard from "./BodyGuard.js"
import * as Docs from "./Docs.js"
import * as Handlers from "./Handlers.js"
import * as McpHttp from "./mcp/Http.js"
import * as MetricsRoute from "./MetricsRoute.js"
import * as RequestGate from "./RequestGate.js"
import * as Shutdown from "./Shutdown.js"
import * as Viewer from "./Viewer.js"
import * as Wiring from "./Wiring.js"

/** The Node server under the HttpServer (for the drain: stop accepting, close connections). */
class NodeHttp extends Context.Tag("corral/server/NodeHttp")<NodeHttp, NodeServer>() {}

/** The interface the server binds: the configured host only when API keys protect it. */
export const bindHost = (settings: Settings): string =>
  settings.apiKeys.length === 0 ? "127.0.0.1" : settings.server.host

const describeStore = (settings: Settings): string => {
  switch (settings.database._tag) {
    case "Memory":
      return "memory (nothing survives a restart)"
    case "Embedded":
      return `embedded PGlite in ${settings.database.dataDir}`
    case "Postgres":
      return "Postgres (DATABASE_URL)"
  }
}

/** The start banner: where to go, and the warnings a newcomer or an operator must see. */
const announce = (settings: Settings) =>
  Layer.effectDiscard(Effect.gen(function*() {
    const server = yield* HttpServer.HttpServer
    const address = server.address
    const url = address._tag === "TcpAddress" ? `http://${address.hostname}:${address.port}` : `unix:${address.path}`
    yield* Effect.logInfo(`Corral listening on ${url} — viewer ${url}/ui · API docs ${url}/docs`)
    yield* Effect.logInfo(
      `config: ${settings.file ?? "defaults (no ./corral.json)"} · store: ${describeStore(settings)}`
    )
    if (Object.keys(settings.models.providers ?? {}).length === 0) {
      yield* Effect.logWarning(
        "No model providers configured: only the scripted `demo` agent runs. Add `providers` and `tiers` to " +
          "corral.json (or CORRAL_PROVIDERS / CORRAL_TIERS) to run real agents — see docs/server.md#configuration."
      )
    }
    // A key variable that is unset is not fatal for a loopback server (it may need none) or one marked
    // `apiKeyOptional` (`launch` refuses the others), but it is never silent.
    for (const missing of yield* ProviderConfig.missingKeys(settings.models)) {
      yield* Effect.logWarning(ProviderConfig.describeMissingKey(missing))
    }
    if (settings.apiKeys.length === 0) {
      yield* Effect.logWarning(
        `No API keys configured: listening on 127.0.0.1 only${
          settings.server.host === "127.0.0.1" ? "" : ` (server.host "${settings.server.host}" ignored)`
        }, every request acts as the local principal. Add \`apiKeys\` to serve other machines.`
      )
    }
  }))

/** The drain, as a finalizer that runs before the HTTP server closes (see the module header). */
const drain = (settings: Settings) =>
  Layer.scopedDiscard(Effect.gen(function*() {
    const shutdown = yield* Shutdown.Shutdown
    const node = yield* NodeHttp
    const context = yield* Effect.context<Wiring.Services>()
    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        yield* Effect.logInfo("shutting down: draining requests, cancelling running bursts")
        yield* shutdown.begin
        node.close()
        node.closeIdleConnections()
        const left = yield* Effect.provide(Shutdown.cancelRunning(settings.server.shutdownTimeoutMs), context)
        yield* Shutdown.logUnsettled(left)
        // Let the answers of awaited requests (their bursts just landed) reach their clients, briefly.
        for (let i = 0; i < 40 && (yield* connections(node)) > 0; i++) yield* Effect.sleep("25 millis")
        node.closeAllConnections()
        yield* Effect.logInfo("shutdown: requests drained; closing the store")
      }).pipe(Effect.catchAllCause((cause) => Effect.logError("shutdown: drain failed", cause)))
    )
  }))

const connections = (node: NodeServer) =>
  Effect.async<number>((resume) => {
    node.getConnections((error, count) => resume(Effect.succeed(error ? 0 : count)))
  })

type Listener = Parameters<EventEmitter["on"]>[1]

/**
 * The server's one request listener. Before the request handler is attached (see the module header) it holds what
 * arrives and hands it over once it is, in arrival order; from then on every request goes in through `gate`
 * (`RequestGate`: a bound on how many are worked on at once). The handler the platform attaches with `on` is kept
 * here rather than added beside this listener, and its `off` detaches it here; a server that closes before a
 * handler takes what is held answers it 503.
 */
const frontDoor = (node: NodeServer, gate: RequestGate.Gate): void => {
  let handler: RequestGate.Handler | undefined
  const held: Array<readonly [IncomingMessage, ServerResponse]> = []
  const listen: RequestGate.Handler = (request, response) => {
    if (handler === undefined) held.push([request, response])
    else gate.admit(request, response, handler)
  }
  const add = (event: string | symbol, listener: Listener) => EventEmitter.prototype.on.call(node, event, listener)
  const remove = (event: string | symbol, listener: Listener) =>
    EventEmitter.prototype.removeListener.call(node, event, listener)
  node.on = node.addListener = function(this: NodeServer, event: string | symbol, listener: Listener) {
    if (event !== "request" || listener === listen) return add(event, listener)
    const attached = listener as RequestGate.Handler
    handler = attached
    for (const [request, response] of held.splice(0)) gate.admit(request, response, attached)
    return this
  } as NodeServer["on"]
  node.off = node.removeListener = function(this: NodeServer, event: string | symbol, listener: Listener) {
    if (event !== "request" || listener !== handler) return remove(event, listener)
    handler = undefined
    return this
  } as NodeServer["off"]
  add("request", listen)
  node.once("close", () => {
    for (const [, response] of held.splice(0)) {
      response.writeHead(503, { "content-type": "text/plain", connection: "close" }).end("shutting down\n")
    }
    gate.close()
  })
}

/** How long closing the layers (HTTP server, actors, store, database) may take after the drain's own deadline. */
const closeGraceMs = 2_000

/**
 * Runs `self` (the closing of the layers) on its own fiber and waits for it at most `ms`: `true` when it finished.
 * A release runs uninterruptibly, so an Effect timeout (which interrupts what it bounds, and waits for that) could
 * never cut a finalizer short; here nothing is interrupted: the waiting simply ends, and whatever still runs is left
 * to the process exit. A wall-clock timer, because the subject is the real process's exit.
 */
const awaitAtMost = <A, E>(self: Effect.Effect<A, E>, ms: number): Effect.Effect<boolean> =>
  Effect.flatMap(Effect.forkDaemon(self), (fiber) =>
    Effect.async<boolean>((resume) => {
      let settled = false
      const finish = (finished: boolean) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resume(Effect.succeed(finished))
      }
      const timer = setTimeout(() => finish(false), ms)
      fiber.addObserver(() => finish(true))
    }))

/**
 * Serves `settings` until interrupted (SIGTERM/SIGINT), then shuts down within `server.shutdownTimeoutMs` plus 2 s
 * whatever the store does: the drain keeps its own deadline, and whatever of the closing is still running after
 * the total bound (a finalizer waiting on a database that does not answer) is left behind with a log line, so the
 * process can exit. Fails with what `layer` fails with.
 */
export const launch = (settings: Settings) => Effect.zipRight(requireKeys(settings), serveUntilInterrupted(settings))

/**
 * Refuses to start (`ConfigInvalid`, a field error per provider) when a provider's key variable is unset and its
 * base URL is not a loopback address, unless the provider says `apiKeyOptional`: every request would be refused.
 */
const requireKeys = (settings: Settings) =>
  Effect.flatMap(
    ProviderConfig.requiredKeysMissing(settings.models),
    (missing) =>
      missing.length === 0 ? Effect.void : Effect.fail(
        new ConfigInvalid({
          source: settings.file ?? "environment",
          issues: missing.map((m) =>
            new FieldIssue({
              path: `providers.${m.provider}.apiKeyEnv`,
              message: `${m.variable} is not set, and ${m.baseUrl} is not a loopback address: every request would be ` +
                `refused (401). Set ${m.variable}, or add "apiKeyOptional": true for a server that needs no key`
            })
          )
        })
      )
  )

const serveUntilInterrupted = (settings: Settings) =>
  Effect.acquireUseRelease(
    Scope.make(),
    (scope) => Effect.zipRight(Layer.buildWithScope(layer(settings), scope), Effect.never),
    (scope, exit) =>
      awaitAtMost(
        Scope.close(scope, Exit.isSuccess(exit) ? Exit.void : exit),
        settings.server.shutdownTimeoutMs + closeGraceMs
      ).pipe(
        Effect.flatMap((closed) =>
          closed
            ? Exit.isInterrupted(exit) ? Effect.logInfo("shutdown: complete") : Effect.void
            : Effect.logWarning(
              `shutdown: the actors, the store and the database had not closed ${closeGraceMs} ms after the drain's ` +
                "deadline; exiting without waiting for them"
            )
        )
      )
  )

/** Options of `layer`. */
export interface Options {
  /** Bounds and policy of the MCP endpoint at `/mcp` (see `mcp/Http`). */
  readonly mcp?: McpHttp.Options
}

/**
 * The `/mcp` bounds: the configuration's `server.mcp` keys, under what an embedder passes in `Options.mcp` (which
 * wins key by key); a key in neither is the endpoint's own default.
 */
export const mcpOptions = (settings: Settings, given: McpHttp.Options = {}): McpHttp.Options => {
  const configured = settings.server.mcp
  const waitMs = given.protocol?.approvalWaitMs ?? configured.elicitationWaitMs
  return {
    ...(configured.idleMs === undefined ? {} : { idleMs: configured.idleMs }),
    ...(configured.maxSessions === undefined ? {} : { maxSessions: configured.maxSessions }),
    ...(configured.maxSessionsPerOrg === undefined ? {} : { maxSessionsPerOrg: configured.maxSessionsPerOrg }),
    ...(configured.allowedHosts === undefined ? {} : { allowedHosts: configured.allowedHosts }),
    ...given,
    protocol: { ...given.protocol, ...(waitMs === undefined ? {} : { approvalWaitMs: waitMs }) }
  }
}

/**
 * Routes `/mcp` to the MCP endpoint before anything else: the MCP transport reads its own body and answers
 * JSON-RPC errors (a malformed body is a JSON-RPC parse error, not the API's 400), so the body guard stays out of it.
 */
const withMcp = (mcp: McpHttp.McpHttp["Type"]) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request) => (request.url.split("?")[0] ?? "") === "/mcp" ? mcp.handle : app
  )

/**
 * The listen backlog: connections the kernel completes and queues while the process is busy (Linux caps it at
 * `net.core.somaxconn`, 4096 by default). Node's default, 511, is overrun when thousands of clients connect at once:
 * the kernel then answers with SYN cookies, and a client whose connection it could not queue in time is reset
 * (`ECONNRESET` on its request) — seen with 5,000 sessions started at once on a slowed server
 * (docs/benchmarks.md at 09f4c1e, "Issue 14, fifteenth pass"). What the process then takes in is bounded by the request gate.
 */
const backlog = 4096

/**
 * The platform's span per HTTP request only when Corral's spans are on (`Tracing`): with no exporter, it still
 * parsed the URL, copied the headers and built a span with a dozen attributes for every request — and kept it for an
 * event stream's whole life.
 */
const untracedUnless = <A, E, R>(tracing: boolean, self: Layer.Layer<A, E, R>): Layer.Layer<A, E, R> =>
  tracing ? self : HttpMiddleware.withTracerDisabledWhen(self, () => true)

/**
 * The server for `settings`, listening once built: the HttpServer (its address tells the bound port, useful with
 * port 0) and the runtime's services. Fails to build when the runtime cannot be wired (see `Wiring.WiringError`)
 * or the port cannot be bound (`ServeError`).
 */
export const layer = (settings: Settings, options: Options = {}) => {
  const node = createServer()
  frontDoor(node, RequestGate.make({ maxInFlight: settings.server.maxRequestsInFlight }))
  const listen = NodeHttpServer.layer(() => node, { host: bindHost(settings), port: settings.server.port, backlog })
  const api = HttpApiBuilder.api(Api).pipe(
    Layer.provide(Handlers.layer({ keepAliveMs: settings.server.keepAliveMs })),
    Layer.provide(Authentication.layer(settings.apiKeys))
  )
  const serve = Layer.unwrapEffect(
    Effect.map(
      Effect.all([Shutdown.Shutdown, McpHttp.McpHttp, Tracing.Tracing]),
      ([shutdown, mcp, tracing]) =>
        untracedUnless(
          tracing,
          HttpApiBuilder.serve((app) =>
            withMcp(mcp)(
              BodyGuard.middleware({
                limitBytes: settings.server.bodyLimitBytes,
                draining: shutdown.draining
              })(app)
            )
          )
        )
    )
  ).pipe(
    Layer.provide(Viewer.layer),
    Layer.provide(MetricsRoute.layer),
    Layer.provide(Docs.layer("/docs")),
    Layer.provide(HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" })),
    Layer.provide(api)
  )
  return Layer.mergeAll(drain(settings), announce(settings)).pipe(
    Layer.provideMerge(serve),
    Layer.provideMerge(listen),
    // Its sessions close after the HTTP server (the drain has cancelled the bursts their calls await).
    Layer.provideMerge(Layer.unwrapEffect(
      Effect.map(
        Shutdown.Shutdown,
        (shutdown) => McpHttp.layer(settings, shutdown.draining, mcpOptions(settings, options.mcp))
      )
    )),
    Layer.provideMerge(Layer.succeed(NodeHttp, node)),
    Layer.provideMerge(Shutdown.layer),
    Layer.provideMerge(Wiring.layer(settings, Authentication.orgs(settings.apiKeys)))
  )
}
