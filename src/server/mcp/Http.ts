/**
 * Http — Corral as an MCP server over Streamable HTTP at `/mcp` on the bundled server: stateful sessions
 * (`Mcp-Session-Id`), each bound to the principal that opened it, with the HTTP API's bearer keys and org scope.
 *
 * Every request is checked before the SDK sees it, in this order, each refusal a JSON-RPC error body:
 * the server drains (503) · DNS rebinding: a `Host` (servers without API keys) or an `Origin` whose host is not
 * allowed (403) · the bearer key (401 with `WWW-Authenticate`, same keys and messages as the API) · a body over
 * `server.bodyLimitBytes` (413), not arriving within 30 s (408), or not JSON (400, -32700) · a session id nobody
 * opened, one that expired or was closed to make room, or one opened by another principal (404: the client starts a
 * new session) · a new session beyond its org's places or the server's, when each of them has a request in flight
 * (429 / 503 naming the limit: internal/admission).
 *
 * Streams are resumable (SEP-1699): every SSE event has an id, kept in the session's bounded event store, so a host
 * whose stream dropped mid-call reconnects with `Last-Event-ID` and gets the rest — the answer of a run included.
 *
 * Bounds: a session with no request in flight and no stream open for `idleMs` is closed (the sweep logs it with its
 * id); at most `maxSessionsPerOrg` are open per org and `maxSessions` in all, a new session past either closing the
 * least recently used one with no request in flight, listeners last (internal/admission: why per org, who makes room).
 *
 * Why DNS-rebinding protection keys on API keys: a server without keys serves only 127.0.0.1 and answers anyone who
 * reaches it, so a web page whose name resolves to 127.0.0.1 must be refused by its `Host`; a server with keys is
 * protected by the key a page cannot know, and its `Host` is whatever name operators give it — there only a
 * browser's `Origin` (another site's page) is checked.
 */
import { HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js"
import { Context, Effect, Fiber, Layer, Option, Runtime, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import type { Settings } from "../../config/Config.js"
import type { Corral } from "../../Corral.js"
import { Principal } from "../../domain/Principal.js"
import type { SessionStore } from "../../store/SessionStore.js"
import * as Authentication from "../Authentication.js"
import { bodyReadTimeoutMs } from "../BodyGuard.js"
import * as AgentFeed from "./AgentFeed.js"
import * as Catalog from "./Catalog.js"
import * as Admission from "./internal/admission.js"
import * as EventStore from "./internal/eventStore.js"
import * as Protocol from "./Protocol.js"

/** Bounds and policy of the endpoint. */
export interface Options {
  /** A session without a request in flight for this long is closed. */
  readonly idleMs?: number
  /** At most this many sessions are open at once (a backstop: see `maxSessionsPerOrg`). */
  readonly maxSessions?: number
  /**
   * At most this many sessions are open per org: a new one beyond closes the org's least recently used idle session,
   * or is refused (429) when every one is busy.
   */
  readonly maxSessionsPerOrg?: number
  /**
   * Host names (no port) besides localhost, 127.0.0.1 and [::1] that `Host` and `Origin` may name. Given, the `Host`
   * is checked with API keys too (without keys it always is).
   */
  readonly allowedHosts?: ReadonlyArray<string>
  readonly catalog?: Catalog.Options
  readonly protocol?: Protocol.Options
}

/**
 * Defaults. 10 minutes of idleness: a host that is still there holds its `GET /mcp` stream open (which the sweep
 * leaves alone; only a newcomer at the cap may close it) or calls again; a session nobody uses for longer was left behind (the SDK's `Client.close()` sends no DELETE), and a
 * host whose session expired opens a new one on the 404. 20 places per org: more than one person's hosts use at
 * once, and five orgs' worth under the global backstop of 100.
 */
export const defaults = { idleMs: 10 * 60_000, maxSessions: 100, maxSessionsPerOrg: 20 } as const

/**
 * The `/mcp` endpoint: answers any request whose path is `/mcp`; how many sessions are open, how many of them are
 * busy (a request in flight: never closed to make room), and how many only listen (a `GET /mcp` stream open).
 */
export class McpHttp extends Context.Tag("corral/server/mcp/McpHttp")<McpHttp, {
  readonly handle: Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest>
  readonly sessions: () => number
  readonly busySessions: () => number
  readonly listeningSessions: () => number
}>() {}

interface Entry {
  readonly transport: StreamableHTTPServerTransport
  readonly close: () => Promise<void>
  readonly principal: Principal
  /** When its last request (not stream) started or ended. */
  lastSeen: number
  /** Requests being answered (POST): busy. */
  inFlight: number
  /** `GET /mcp` streams open: a listening host (see internal/admission.ts). */
  streams: number
}

/** How long a host waits before it resumes a dropped stream (the SSE `retry` field). */
const RETRY_MS = 1_000

const loopback = ["localhost", "127.0.0.1", "[::1]", "::1"]

const rpcError = (status: number, code: number, message: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson({ jsonrpc: "2.0", error: { code, message }, id: null }, { status, headers })

/** The host name of a `Host` header value or an origin URL (lowercase, without port); undefined if unparsable. */
const hostnameOf = (value: string, isOrigin: boolean): string | undefined => {
  try {
    return new URL(isOrigin ? value : `http://${value}`).hostname.toLowerCase()
  } catch {
    return undefined
  }
}

/**
 * Why `headers` are refused (DNS rebinding), or undefined. `checkHost`: the `Host` must be allowed (a server without
 * keys, or one given `allowedHosts`); `keyed`: the bearer key protects the server (see the module header).
 */
const rebinding = (
  headers: Readonly<Record<string, string | undefined>>,
  allowed: ReadonlyArray<string>,
  keyed: boolean,
  checkHost: boolean
): string | undefined => {
  const host = headers["host"] ?? ""
  const hostname = hostnameOf(host, false)
  if (checkHost && (hostname === undefined || !allowed.includes(hostname))) {
    const names = allowed.filter((h) => h !== "::1").join(", ")
    return `Host "${host.slice(0, 100)}" is not allowed (DNS rebinding protection): use one of ${names}`
  }
  const origin = headers["origin"]
  if (origin === undefined || origin === "null" && keyed) return undefined
  const from = hostnameOf(origin, true)
  if (from !== undefined && (allowed.includes(from) || keyed && from === hostname)) return undefined
  return `Origin "${origin.slice(0, 100)}" is not allowed (DNS rebinding protection)`
}

/** The principal of a request's bearer key, as the HTTP API decides it (no keys: the local principal). */
const principalOf = (keys: Settings["apiKeys"], authorization: string | undefined) => {
  if (keys.length === 0) return { _tag: "Right" as const, principal: Authentication.localPrincipal }
  const match = /^Bearer\s+(.+)$/i.exec(authorization ?? "")
  const key = match?.[1]?.trim() ?? ""
  if (key.length === 0) return { _tag: "Left" as const, message: "missing API key: send `Authorization: Bearer <key>`" }
  const found = keys.find((k) => k.sha256 === Authentication.sha256(key))
  return found === undefined
    ? { _tag: "Left" as const, message: "unknown API key" }
    : { _tag: "Right" as const, principal: new Principal({ orgId: found.orgId, userId: found.userId }) }
}

const samePrincipal = (a: Principal, b: Principal) => a.orgId === b.orgId && a.userId === b.userId

/** Reads the body within the size and time bounds: the text, or the refusal to answer. */
const readBody = (request: HttpServerRequest.HttpServerRequest, limitBytes: number) =>
  Effect.gen(function*() {
    // As in BodyGuard: the read runs on its own fiber and is never interrupted (that would destroy the socket the
    // refusal must be written to); only the wait ends.
    const reading = yield* Effect.forkDaemon(
      request.text.pipe(HttpIncomingMessage.withMaxBodySize(Option.some(limitBytes)), Effect.either)
    )
    const read = yield* Fiber.join(reading).pipe(Effect.timeoutOption(bodyReadTimeoutMs), Effect.interruptible)
    if (Option.isNone(read)) {
      yield* Effect.forkDaemon(Effect.delay(Fiber.interrupt(reading), "1 second"))
      return {
        _tag: "Left" as const,
        response: rpcError(408, -32000, `the request body did not arrive within ${bodyReadTimeoutMs} ms`, {
          connection: "close"
        })
      }
    }
    if (read.value._tag === "Left") {
      return {
        _tag: "Left" as const,
        response: rpcError(413, -32000, `the request body exceeds ${limitBytes} bytes (server.bodyLimitBytes)`, {
          connection: "close"
        })
      }
    }
    return { _tag: "Right" as const, text: read.value.right }
  })

/**
 * The open sessions: by id, those being opened (their `initialize` not answered yet: they hold a place — two racing
 * newcomers must not both take the last one — and are never closed to make room), and the ids closed to make room
 * (the latest 1,000, so their host is told why they are gone).
 */
const makeTable = () => {
  const sessions = new Map<string, Entry>()
  const opening = new Set<Admission.Held>()
  const evicted = new Map<string, string>()
  return {
    sessions,
    opening,
    evicted,
    /** Every session open or opening, as admission sees it. */
    held: (): ReadonlyArray<Admission.Held> => [
      ...opening,
      ...Array.from(sessions, ([id, e]) => ({
        id,
        orgId: e.principal.orgId,
        userId: e.principal.userId,
        lastSeen: e.lastSeen,
        inFlight: e.inFlight,
        streams: e.streams
      }))
    ],
    /** Closes session `id` (its SDK server and streams), logged with why. */
    close: (id: string, why: string) =>
      Effect.suspend(() => {
        const entry = sessions.get(id)
        if (entry === undefined) return Effect.void
        sessions.delete(id)
        return Effect.zipRight(
          Effect.promise(() => entry.close().catch(() => undefined)),
          Effect.logInfo(`MCP session ${id} closed: ${why}`)
        )
      }),
    /** Remembers that `id` was closed to make room, and why. */
    evict: (id: string, why: string) => {
      evicted.set(id, why)
      if (evicted.size > 1_000) evicted.delete(evicted.keys().next().value!)
    }
  }
}
type Table = ReturnType<typeof makeTable>

/** The sweep: a session nobody used for `idleMs` (no request in flight, no stream open) is closed. Runs forever. */
const sweepIdle = (table: Table, idleMs: number) =>
  Effect.repeat(
    Effect.suspend(() => {
      const now = Date.now()
      const idle = [...table.sessions].filter(([, e]) =>
        e.inFlight === 0 && e.streams === 0 && now - e.lastSeen >= idleMs
      )
      return Effect.forEach(idle, ([id]) => table.close(id, `idle for ${idleMs} ms`), { discard: true })
    }),
    Schedule.spaced(Math.max(50, Math.min(30_000, Math.floor(idleMs / 4))))
  )

/** Hands the request to `transport` and waits until its response is finished (or the client went away). */
const serve = (
  runtime: Runtime.Runtime<never>,
  request: HttpServerRequest.HttpServerRequest,
  transport: StreamableHTTPServerTransport,
  body: unknown
) =>
  Effect.async<void>((resume) => {
    const req = NodeHttpServerRequest.toIncomingMessage(request)
    const res = NodeHttpServerRequest.toServerResponse(request)
    const done = () => resume(Effect.void)
    res.once("close", done)
    res.once("finish", done)
    transport.handleRequest(req, res, body).catch((error: unknown) => {
      Runtime.runFork(runtime)(Effect.logError("MCP: a request failed in the transport", error))
      if (!res.headersSent) {
        res.writeHead(500, { "content-type": "application/json" })
          .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32603, message: "internal error" }, id: null }))
      } else if (!res.writableEnded) res.end()
    })
    return Effect.sync(() => {
      res.off("close", done)
      res.off("finish", done)
    })
  })

/** A request (POST, DELETE) counts in flight and as use; a `GET` stream counts only as a listener. */
const tracked = (entry: Entry, method: string, self: Effect.Effect<void>) =>
  method === "GET"
    ? Effect.acquireUseRelease(
      Effect.sync(() => void entry.streams++),
      () => self,
      () => Effect.sync(() => void entry.streams--)
    )
    : Effect.acquireUseRelease(
      Effect.sync(() => {
        entry.inFlight++
        entry.lastSeen = Date.now()
      }),
      () => self,
      () =>
        Effect.sync(() => {
          entry.inFlight--
          entry.lastSeen = Date.now()
        })
    )

/**
 * Opens a session for `principal` on `server` (its SDK server) connected to a fresh transport. Once the session is
 * initialized it holds its own place in `table`, and `place` (held meanwhile) is given back.
 */
const open = (table: Table, server: ReturnType<typeof Protocol.make>, principal: Principal, place: Admission.Held) =>
  Effect.promise(async () => {
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      // Resumable streams: a host whose stream dropped reconnects with Last-Event-ID after `retryInterval`.
      eventStore: EventStore.make(),
      retryInterval: RETRY_MS,
      onsessioninitialized: (id) => {
        table.opening.delete(place)
        table.sessions.set(id, {
          transport,
          principal,
          close: () => server.close(),
          lastSeen: Date.now(),
          inFlight: 1,
          streams: 0
        })
      },
      onsessionclosed: (id) => {
        table.sessions.delete(id)
      }
    })
    await server.connect(transport)
    return { transport, server }
  })

/**
 * The endpoint for `settings`, over the runtime's Corral service and store. Its scope closes every session; the
 * idle sweep runs while it is open. `draining` tells when the server shuts down.
 */
export const layer = (
  settings: Settings,
  draining: () => boolean,
  options: Options = {}
): Layer.Layer<McpHttp, never, Corral | SessionStore> =>
  Layer.scoped(
    McpHttp,
    Effect.gen(function*() {
      const catalog = yield* Catalog.make({
        ...(settings.limits?.activeTimeMs === undefined ? {} : { activeTimeMs: settings.limits.activeTimeMs }),
        ...options.catalog
      })
      const runtime = yield* Effect.runtime<never>()
      const feed = Option.getOrUndefined(yield* Effect.serviceOption(AgentFeed.AgentFeed))
      const idleMs = options.idleMs ?? defaults.idleMs
      const maxSessions = options.maxSessions ?? defaults.maxSessions
      const bounds = { maxSessions, maxSessionsPerOrg: options.maxSessionsPerOrg ?? defaults.maxSessionsPerOrg }
      const allowed = [...loopback, ...(options.allowedHosts ?? []).map((h) => h.toLowerCase())]
      const keyed = settings.apiKeys.length > 0
      const checkHost = !keyed || (options.allowedHosts ?? []).length > 0
      const table = makeTable()
      const { evicted, opening, sessions } = table
      yield* Effect.addFinalizer(() =>
        Effect.forEach([...sessions.keys()], (id) => table.close(id, "the server shuts down"), { discard: true })
      )
      yield* Effect.forkScoped(sweepIdle(table, idleMs))

      const server = (principal: Principal) =>
        Protocol.make(catalog, principal, runtime, { ...options.protocol, ...(feed === undefined ? {} : { feed }) })

      const handle = Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        if (draining()) {
          return rpcError(503, -32000, "the server is shutting down; retry on another instance", {
            connection: "close"
          })
        }
        const refused = rebinding(request.headers, allowed, keyed, checkHost)
        if (refused !== undefined) return rpcError(403, -32000, refused)
        const auth = principalOf(settings.apiKeys, request.headers["authorization"])
        if (auth._tag === "Left") return rpcError(401, -32001, auth.message, { "www-authenticate": "Bearer" })
        let body: unknown = undefined
        if (request.method === "POST") {
          const read = yield* readBody(request, settings.server.bodyLimitBytes)
          if (read._tag === "Left") return read.response
          try {
            body = JSON.parse(read.text)
          } catch (error) {
            return rpcError(400, -32700, `Parse error: the body is not valid JSON (${String(error).slice(0, 120)})`)
          }
        }
        const id = request.headers["mcp-session-id"]
        if (id === undefined) {
          const initializing = request.method === "POST" &&
            (isInitializeRequest(body) || Array.isArray(body) && body.some(isInitializeRequest))
          if (!initializing) {
            return rpcError(
              400,
              -32000,
              "Bad Request: no Mcp-Session-Id header; open a session with `initialize` first"
            )
          }
          // Decided and the place taken in one synchronous step: no other request runs in between.
          const decision = Admission.decide(table.held(), auth.principal, bounds)
          if (decision._tag === "Refuse") {
            yield* Effect.logWarning(
              `MCP: a new session for org ${auth.principal.orgId} was refused (${decision.status}): ${decision.message}`
            )
            return rpcError(decision.status, -32000, decision.message, { "retry-after": "30" })
          }
          const place: Admission.Held = {
            id: "",
            orgId: auth.principal.orgId,
            userId: auth.principal.userId,
            lastSeen: 0,
            inFlight: 1,
            streams: 0
          }
          opening.add(place)
          return yield* Effect.gen(function*() {
            if (decision._tag === "Evict") {
              table.evict(decision.evict.id, decision.why)
              yield* table.close(decision.evict.id, `closed to make room for a new session: ${decision.why}`)
            }
            const sdk = server(auth.principal)
            const { transport } = yield* open(table, sdk, auth.principal, place)
            yield* serve(runtime, request, transport, body)
            const opened = transport.sessionId === undefined ? undefined : sessions.get(transport.sessionId)
            // An initialize the SDK refused (a bad version, a batch) opened nothing: its server is closed at once.
            if (opened === undefined) yield* Effect.promise(() => sdk.close().catch(() => undefined))
            else {
              opened.inFlight--
              opened.lastSeen = Date.now()
              yield* Effect.logInfo(`MCP session ${transport.sessionId} opened for org ${auth.principal.orgId}`)
            }
            return HttpServerResponse.empty()
          }).pipe(Effect.ensuring(Effect.sync(() => void opening.delete(place))))
        }
        const entry = sessions.get(id)
        if (entry === undefined || !samePrincipal(entry.principal, auth.principal)) {
          return rpcError(
            404,
            -32001,
            entry === undefined && evicted.has(id)
              ? `Session not found: it was idle and was closed to make room for a new session (${evicted.get(id)}); ` +
                "open a new one with `initialize`"
              : "Session not found: it expired or was closed; open a new one with `initialize`"
          )
        }
        yield* tracked(entry, request.method, serve(runtime, request, entry.transport, body))
        return HttpServerResponse.empty()
      })

      return {
        handle,
        sessions: () => sessions.size,
        busySessions: () => {
          let busy = 0
          for (const entry of sessions.values()) if (entry.inFlight > 0) busy++
          return busy
        },
        listeningSessions: () => {
          let listening = 0
          for (const entry of sessions.values()) if (entry.inFlight === 0 && entry.streams > 0) listening++
          return listening
        }
      }
    })
  )
