/**
 * Handlers — the HTTP endpoints of `Api`, each a thin adapter onto the `Corral` service: decode (done by the
 * contract), act as the request's principal, map the answer.
 *
 * Starting, continuing and approving answer 202 at once by default (a burst may run for minutes) and run the burst
 * on the session's actor; `?wait=true` answers with the landed view instead. Before answering 202 a handler checks
 * what it can synchronously (the agent and request are validated by `Corral.start`; a follow-up to a session that
 * waits for approval is refused with 409; a decision whose token would be refused is answered at once, 409 with the
 * reason, and recorded), so a 202 means the message was taken.
 *
 * Store failures are logged in full and answered 503 `Unavailable`: a driver's error text is not the client's
 * business.
 */
import { HttpApiBuilder, HttpApiError, HttpServerRequest } from "@effect/platform"
import { Clock, Effect, Layer, Option } from "effect"
import type { Context } from "effect"
import * as Ownership from "../cluster/Ownership.js"
import type { StartRequest } from "../Corral.js"
import { Corral } from "../Corral.js"
import type { AgentSpecInput } from "../domain/AgentSpec.js"
import { AlreadyDecided, InvalidSessionState, SessionNotFound } from "../domain/Errors.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { Principal } from "../domain/Principal.js"
import type { SessionView } from "../domain/Session.js"
import { view } from "../domain/Session.js"
import { utcDay } from "../domain/Usage.js"
import { decodeCursor, SessionStore } from "../store/SessionStore.js"
import * as Approvals from "../tools/Approvals.js"
import type { Accepted, UsageParams } from "./Api.js"
import { Api } from "./Api.js"
import { CurrentPrincipal } from "./Authentication.js"
import * as ElicitationsHandlers from "./ElicitationsHandlers.js"
import { NotReady, Unavailable } from "./HttpErrors.js"
import * as InputLimits from "./InputLimits.js"
import * as OperationsHandlers from "./OperationsHandlers.js"
import { Readiness } from "./Readiness.js"
import { Shutdown } from "./Shutdown.js"
import * as Sse from "./Sse.js"
import * as ToolsHandlers from "./ToolsHandlers.js"

/** Handler settings. */
export interface Options {
  readonly keepAliveMs: number
}

const unavailable = (error: PersistenceFailed) =>
  Effect.zipRight(
    Effect.logError(`store failure in ${error.operation}: ${error.message}`),
    Effect.fail(new Unavailable({ message: "the store is unavailable; retry later" }))
  )

/** Maps the store's failure to 503, leaving every other error as it is. */
const orUnavailable = <A, E extends { readonly _tag: string }, R>(self: Effect.Effect<A, E, R>) =>
  Effect.catchIf(
    self,
    (error): error is Extract<E, PersistenceFailed> => error._tag === "PersistenceFailed",
    (error) => unavailable(error as PersistenceFailed)
  ) as Effect.Effect<A, Exclude<E, PersistenceFailed> | Unavailable, R>

const accepted = (session: SessionView): Accepted => ({
  sessionId: session.id,
  status: session.status,
  events: `/v1/sessions/${encodeURIComponent(session.id)}/events`,
  viewer: `/ui/sessions/${encodeURIComponent(session.id)}`
})

/** 202 with the links while the session runs; a session that is no longer running (a retried key) is its view. */
const landedOrAccepted = (session: SessionView): Accepted | SessionView =>
  session.status === "running" ? accepted(session) : session

/**
 * The `Idempotency-Key` header (optional, on the POSTs that create sessions or messages) as the Corral call's option.
 * Read from the request rather than declared on the endpoints, so typed clients need not pass an empty header; its
 * rules are in the endpoints' descriptions (Api.ts) and Corral validates it (422 naming the header).
 */
const idempotencyKey = Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
  const key = request.headers["idempotency-key"]
  return key === undefined ? {} : { idempotencyKey: key }
})

/** Runs a message's burst on the actor without awaiting it; its outcome is visible on the session and its events. */
const detach = <A, E>(self: Effect.Effect<A, E>) =>
  Effect.forkDaemon(
    self.pipe(
      Effect.catchAllCause((cause) => Effect.logDebug("detached session message ended without landing", cause))
    )
  )

/**
 * The session as it stands, read from the store — the source of truth, saved at every burst's start and landing —
 * so a running burst shows `running`; a session the org cannot see is `SessionNotFound`.
 */
const current = (by: Principal, sessionId: string) =>
  Effect.gen(function*() {
    const found = yield* (yield* SessionStore).getSession(by.orgId, sessionId)
    // In a cluster, a running session that no live node owns says so (cluster/Ownership).
    if (Option.isSome(found)) return yield* Ownership.mark(view(found.value))
    // Not in the store: let Corral answer (a live actor not yet persisted, or SessionNotFound).
    return yield* (yield* Corral).get(by, sessionId)
  })

/** What deciding with `token` would do, judged from the store without spending the token. */
const precheck = (by: Principal, sessionId: string, token: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const found = yield* store.getSession(by.orgId, sessionId)
    if (Option.isNone(found)) return yield* new SessionNotFound({ sessionId })
    const record = yield* store.findApproval(by.orgId, sessionId, Approvals.hashToken(token))
    return Approvals.check({ record, by, session: found.value, now: yield* Clock.currentTimeMillis })
  })

/**
 * `AlreadyDecided` answers only a decision. The other messages share the actor's failure type but cannot produce
 * it; should one ever do so, it is their documented 409 `InvalidSessionState`, not an undocumented tag.
 */
const noDecision = <A, E, R>(
  self: Effect.Effect<A, E | AlreadyDecided, R>
): Effect.Effect<A, E | InvalidSessionState, R> =>
  Effect.catchIf(
    self,
    (error): error is AlreadyDecided => error instanceof AlreadyDecided,
    (error) => Effect.fail(new InvalidSessionState({ sessionId: error.sessionId, message: error.message }))
  ) as Effect.Effect<A, E | InvalidSessionState, R>

const dayMs = 86_400_000

const decodeError = (path: string, message: string) =>
  new HttpApiError.HttpApiDecodeError({
    message: `${path}: ${message}`,
    issues: [{ _tag: "Type", path: [path], message }]
  })

/**
 * `GET /v1/usage`: the org's usage rows over `from`..`to` (UTC days, both included; `to` defaults to today and `from`
 * to 29 days before `to`) and their total. A range that is empty or longer than 366 days is a decode error (400);
 * a store failure is 503.
 */
const usageReport = (
  store: Context.Tag.Service<SessionStore>,
  by: Principal,
  urlParams: typeof UsageParams.Type
) =>
  Effect.gen(function*() {
    const today = utcDay(yield* Clock.currentTimeMillis)
    const to = urlParams.to ?? today
    const from = urlParams.from ?? utcDay(Date.parse(`${to}T00:00:00Z`) - 29 * dayMs)
    const start = Date.parse(`${from}T00:00:00Z`)
    const end = Date.parse(`${to}T00:00:00Z`) + dayMs
    if (start >= end) return yield* decodeError("from", `a day on or before to (${to})`)
    if (end - start > 366 * dayMs) return yield* decodeError("from", "at most 366 days before to")
    const rows = yield* orUnavailable(store.usage(by.orgId, start, end))
    const total = {
      attempts: 0,
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      reasoningTokens: 0,
      costMicros: 0
    }
    for (const row of rows) {
      for (const key of Object.keys(total) as Array<keyof typeof total>) total[key] += row[key]
    }
    return { from, to, rows, total }
  })

const agents = HttpApiBuilder.group(Api, "agents", (handlers) =>
  Effect.gen(function*() {
    const corral = yield* Corral
    return handlers
      .handle("publishAgent", ({ payload }) =>
        Effect.flatMap(CurrentPrincipal, (by) =>
          // The document is checked field by field by `publishAgent` itself (422 naming each field).
          orUnavailable(corral.publishAgent(by, payload as AgentSpecInput))))
      .handle("listAgents", () =>
        Effect.flatMap(CurrentPrincipal, (by) =>
          orUnavailable(Effect.map(corral.listAgents(by), (list) => ({ agents: list })))))
      .handle("getAgent", ({ path, urlParams }) =>
        Effect.flatMap(CurrentPrincipal, (by) =>
          orUnavailable(corral.getAgent(by, path.id, urlParams.version))))
  }))

const sessions = (options: Options) =>
  HttpApiBuilder.group(Api, "sessions", (handlers) =>
    Effect.gen(function*() {
      const corral = yield* Corral
      const store = yield* SessionStore
      const shutdown = yield* Shutdown
      const provide = <A, E>(self: Effect.Effect<A, E, Corral | SessionStore>) =>
        Effect.provideService(Effect.provideService(self, Corral, corral), SessionStore, store)
      return handlers
        .handle("startSession", ({ payload, urlParams }) =>
          Effect.gen(function*() {
            const by = yield* CurrentPrincipal
            const request: StartRequest = {
              agentId: payload.agentId,
              scope: payload.scope,
              prompt: payload.prompt,
              ...(payload.version === undefined ? {} : { version: payload.version }),
              ...(payload.inheritedArtifacts === undefined ? {} : { inheritedArtifacts: payload.inheritedArtifacts })
            }
            const options = yield* idempotencyKey
            if (urlParams.wait === true) return yield* noDecision(orUnavailable(corral.run(by, request, options)))
            // Answered only once the session and its prompt are stored (Corral.start). A retry under the same key
            // whose session has landed is answered 200 with its view, as `?wait=true` would.
            return landedOrAccepted(yield* noDecision(orUnavailable(corral.start(by, request, options))))
          }))
        .handle("listSessions", ({ urlParams }) =>
          Effect.gen(function*() {
            const by = yield* CurrentPrincipal
            const cursor = urlParams.cursor === undefined ? undefined : decodeCursor(urlParams.cursor)
            // A cursor decodes to an id the store compares; one that holds a control character was not ours.
            if (
              urlParams.cursor !== undefined &&
              (cursor === undefined || InputLimits.urlStringProblem(cursor.id) !== undefined)
            ) {
              return yield* decodeError("cursor", "not a cursor this server returned (use nextCursor verbatim)")
            }
            const page = yield* orUnavailable(store.listSessions(by.orgId, {
              limit: urlParams.limit ?? 20,
              ...(urlParams.scope === undefined ? {} : { scope: urlParams.scope }),
              ...(urlParams.status === undefined ? {} : { status: urlParams.status }),
              ...(urlParams.cursor === undefined ? {} : { cursor: urlParams.cursor })
            }))
            return {
              // In a cluster, running sessions that no live node owns say so: one lock query for the page.
              sessions: yield* Ownership.markAll(page.sessions.map((session) => view(session))),
              ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor })
            }
          }))
        .handle("usage", ({ urlParams }) => Effect.flatMap(CurrentPrincipal, (by) => usageReport(store, by, urlParams)))
        .handle(
          "getSession",
          ({ path }) => Effect.flatMap(CurrentPrincipal, (by) => orUnavailable(provide(current(by, path.id))))
        )
        .handle("sendMessage", ({ path, payload, urlParams }) =>
          Effect.gen(function*() {
            const by = yield* CurrentPrincipal
            const options = yield* idempotencyKey
            if (urlParams.wait === true) {
              return yield* noDecision(orUnavailable(corral.continue(by, path.id, payload.text, options)))
            }
            // Stored before the 202; a follow-up to a session that waits for a decision is refused (409) by
            // Corral.post, after a retry under the same Idempotency-Key was answered with its first answer.
            return landedOrAccepted(yield* noDecision(orUnavailable(corral.post(by, path.id, payload.text, options))))
          }))
        .handle("decide", ({ path, payload, urlParams }) =>
          Effect.gen(function*() {
            const by = yield* CurrentPrincipal
            if (urlParams.wait === true) {
              return yield* orUnavailable(corral.approve(by, path.id, payload.token, payload.decision))
            }
            const session = yield* orUnavailable(provide(current(by, path.id)))
            // A token that would be refused (or that already decided) is answered now, by the actor, which records
            // the refusal; only a decision that will run is taken in the background.
            const verdict = yield* orUnavailable(provide(precheck(by, path.id, payload.token)))
            if (verdict._tag !== "Decide") {
              return yield* orUnavailable(corral.approve(by, path.id, payload.token, payload.decision))
            }
            yield* detach(corral.approve(by, path.id, payload.token, payload.decision))
            return accepted(session)
          }))
        .handle(
          "renewApprovals",
          ({ path }) =>
            Effect.flatMap(CurrentPrincipal, (by) => noDecision(orUnavailable(corral.renewApprovals(by, path.id))))
        )
        .handle(
          "cancel",
          ({ path }) => Effect.flatMap(CurrentPrincipal, (by) => noDecision(orUnavailable(corral.cancel(by, path.id))))
        )
        .handle(
          "turns",
          ({ path, urlParams }) =>
            Effect.flatMap(
              CurrentPrincipal,
              (by) => orUnavailable(Effect.map(corral.turns(by, path.id, urlParams.after ?? 0), (turns) => ({ turns })))
            )
        )
        .handle(
          "trajectory",
          ({ path }) =>
            Effect.flatMap(
              CurrentPrincipal,
              (by) => orUnavailable(Effect.map(corral.trajectories(by, path.id), (trajectories) => ({ trajectories })))
            )
        )
        .handle("report", ({ path }) =>
          Effect.gen(function*() {
            const by = yield* CurrentPrincipal
            const session = yield* orUnavailable(provide(current(by, path.id)))
            if (session.report === undefined) {
              return yield* new InvalidSessionState({ sessionId: path.id, message: "no report has landed yet" })
            }
            return session.report
          }))
        .handle("events", ({ headers, path, urlParams }) =>
          Effect.gen(function*() {
            const by = yield* CurrentPrincipal
            // Resolve the session first: a missing one is a 404, not an empty stream. A session with a live actor
            // (one just started, one running) is known without a store read; the snapshot below reads the store.
            yield* orUnavailable(corral.get(by, path.id))
            return yield* Sse.response({
              corral,
              principal: by,
              sessionId: path.id,
              current: provide(current(by, path.id)),
              after: urlParams.after ?? headers["last-event-id"] ?? 0,
              keepAliveMs: options.keepAliveMs,
              onDrain: shutdown.onDrain
            }, { "cache-control": "no-cache, no-transform", "x-accel-buffering": "no" })
          }))
    }))

const system = HttpApiBuilder.group(Api, "system", (handlers) =>
  Effect.gen(function*() {
    const readiness = yield* Readiness
    const shutdown = yield* Shutdown
    return handlers
      .handle("healthz", () => Effect.succeed({ status: "ok" as const }))
      .handle("readyz", () =>
        shutdown.draining()
          ? Effect.fail(new NotReady({ message: "shutting down", checks: { shutdown: "draining" } }))
          : readiness.check.pipe(
            Effect.mapError((checks) => new NotReady({ message: "not ready", checks })),
            Effect.map((checks) => ({ status: "ready" as const, checks }))
          ))
  }))

/** Every group's handlers. Needs the Corral service, the store (session listing), readiness and shutdown state. */
export const layer = (options: Options) =>
  Layer.mergeAll(
    agents,
    sessions(options),
    ToolsHandlers.layer,
    OperationsHandlers.layer,
    ElicitationsHandlers.layer,
    system
  )
