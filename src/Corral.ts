/**
 * Corral — the embedding surface: publish agents, run sessions, continue, approve, cancel, read, follow.
 *
 * Every call carries a `Principal` and sees only its org's agents and sessions (another org's session is simply not
 * found). Requests are validated before any session exists or any text reaches a prompt: a malformed request, an
 * unknown agent, a session bound to another scope, or an inherited artifact from another scope is refused with a
 * typed error naming what is wrong.
 *
 * Hosting: `Corral.layer` runs every session in this process (a local `Supervisor`); `layerCluster` (the
 * `corral/cluster` entry, src/cluster.ts) runs them as @effect/cluster entities over the same `make`. It lives apart
 * so that this module, and with it the `corral` entry, never loads @effect/cluster and its peers.
 */
import { Context, Duration, Effect, Layer, Schema } from "effect"
import type { Scope as EffectScope, Stream } from "effect"
import { AgentSpec } from "./domain/AgentSpec.js"
import type { AgentSpecInput } from "./domain/AgentSpec.js"
import type {
  AgentNotFound,
  BudgetExhausted,
  InvalidRequest,
  PersistenceFailed,
  ScopeMismatch,
  SendError,
  SessionNotFound
} from "./domain/Errors.js"
import { AgentId, SessionId } from "./domain/Ids.js"
import type { IdempotencyRecord } from "./domain/Inbox.js"
import type { LimitsOverride } from "./domain/Limits.js"
import type { Turn } from "./domain/Message.js"
import type { Principal } from "./domain/Principal.js"
import { Scope } from "./domain/Scope.js"
import type { SessionView } from "./domain/Session.js"
import { view } from "./domain/Session.js"
import type { SessionEvent } from "./domain/SessionEvent.js"
import type { Trajectory } from "./domain/Trajectory.js"
import * as LiveEvents from "./events/LiveEvents.js"
import { SessionEvents, toStream } from "./events/SessionEvents.js"
import type { Subscription } from "./events/SessionEvents.js"
import { Retriever } from "./knowledge/Retriever.js"
import type { ModelProvider } from "./model/ModelProvider.js"
import { Providers } from "./model/ModelProvider.js"
import * as ExitPolicy from "./rails/ExitPolicy.js"
import * as Limits from "./rails/Limits.js"
import * as OrgBudget from "./rails/OrgBudget.js"
import { Ids } from "./session/Ids.js"
import { accept, create } from "./session/internal/corralAccept.js"
import * as CorralPorts from "./session/internal/corralPorts.js"
import type { Ports } from "./session/internal/corralPorts.js"
import { publishAgent } from "./session/internal/corralPublish.js"
import * as Idempotency from "./session/internal/idempotency.js"
import * as Prompt from "./session/Prompt.js"
import * as Supervisor from "./session/Supervisor.js"
import * as MemoryStore from "./store/MemoryStore.js"
import { SessionStore } from "./store/SessionStore.js"
import * as Approvals from "./tools/Approvals.js"
import { ToolExecutor } from "./tools/ToolExecutor.js"
import * as ToolRegistry from "./tools/ToolRegistry.js"

/** Starting a session: which agent, in which scope, with which first prompt. */
export const StartRequest = Schema.Struct({
  agentId: AgentId,
  version: Schema.optional(Schema.Int.pipe(Schema.positive())),
  scope: Scope,
  prompt: Schema.NonEmptyString.pipe(Schema.maxLength(200_000)),
  /** Sessions (same org, same scope) whose landed reports this session starts from. */
  inheritedArtifacts: Schema.optional(Schema.Array(SessionId).pipe(Schema.maxItems(20))),
  /** A host-chosen session id; minted (`ses_` + 32 hex) when absent. */
  sessionId: Schema.optional(SessionId)
})
export type StartRequest = typeof StartRequest.Encoded

/** The options form of `events`: replays every stored event kind, and can end when the burst lands. */
export interface EventsOptions {
  /** Replay what came after this turn sequence (0: everything). */
  readonly fromSeq?: number
  /** `"landed"`: end after the `report` of the burst running or waiting now (at once after the replay if none). */
  readonly until?: "landed"
}

/** Options of the calls that accept a message. */
export interface SendOptions {
  /**
   * Makes the call safe to retry: the first call's answer is stored under this key (per org), and a retry with the
   * same key and request gets it back without creating anything. 1–255 printable ASCII characters.
   */
  readonly idempotencyKey?: string
}

/**
 * The Corral service. Every method fails only with members of `CorralError` (domain/Errors), each with exactly the
 * ones it can produce.
 */
export interface Service {
  /**
   * Validates and stores an agent spec (`defineAgent` types one where it is written). The spec is validated at
   * runtime whatever its static type: fails with `InvalidRequest` listing every invalid field (unknown tools and
   * tiers, loosened limits, a bad report schema, excess properties).
   */
  readonly publishAgent: (
    by: Principal,
    spec: AgentSpecInput
  ) => Effect.Effect<AgentSpec, InvalidRequest | PersistenceFailed>
  /** The given version of an agent, or its latest. */
  readonly getAgent: (
    by: Principal,
    agentId: string,
    version?: number
  ) => Effect.Effect<AgentSpec, AgentNotFound | PersistenceFailed>
  /** The latest version of every agent of the caller's org. */
  readonly listAgents: (by: Principal) => Effect.Effect<ReadonlyArray<AgentSpec>, PersistenceFailed>
  /**
   * Creates a session and starts its first burst in the background; returns once the session and its prompt are
   * stored (a process that dies right after still runs the prompt at its next start), with status `running`. With `idempotencyKey`, a retry
   * answers the session as it stands now and creates nothing (`InvalidRequest` when the key was used for another request). An
   * inherited artifact that is not found is `SessionNotFound`; one of another scope is `ScopeMismatch`.
   */
  readonly start: (
    by: Principal,
    request: StartRequest,
    options?: SendOptions
  ) => Effect.Effect<
    SessionView,
    InvalidRequest | AgentNotFound | SessionNotFound | ScopeMismatch | BudgetExhausted | PersistenceFailed
  >
  /**
   * Creates a session, runs its first burst and returns the landed view; it can fail every way the service can (all
   * of `CorralError`). A retry with the same `idempotencyKey` answers the session as it stands and creates nothing.
   */
  readonly run: (
    by: Principal,
    request: StartRequest,
    options?: SendOptions
  ) => Effect.Effect<SessionView, InvalidRequest | AgentNotFound | ScopeMismatch | BudgetExhausted | SendError>
  /**
   * Sends a follow-up and awaits its landing. `scope`, when given, must be the session's. The message is stored
   * before it is queued; a retry with the same `idempotencyKey` answers the session as it stands, sending nothing.
   */
  readonly continue: (
    by: Principal,
    sessionId: string,
    text: string,
    options?: SendOptions & { readonly scope?: string }
  ) => Effect.Effect<SessionView, InvalidRequest | ScopeMismatch | BudgetExhausted | SendError>
  /**
   * Sends a follow-up without awaiting it: returns once the message is stored (it runs after the bursts before it,
   * and survives a crash of this process). A session that waits for a decision on a write refuses it
   * (`InvalidSessionState`). A retry with the same `idempotencyKey` answers the session as it stands now and sends
   * nothing.
   */
  readonly post: (
    by: Principal,
    sessionId: string,
    text: string,
    options?: SendOptions & { readonly scope?: string }
  ) => Effect.Effect<SessionView, InvalidRequest | ScopeMismatch | BudgetExhausted | SendError>
  /**
   * Decides a pending write with its approval token; when it was the last one, the session resumes and this awaits
   * its landing. Only the session's own user decides, with an unspent, unexpired token issued for exactly the write
   * that waits; anything else fails with `InvalidSessionState` saying why, and the refusal is recorded in the
   * transcript. Deciding again with a token whose write was already decided fails with `AlreadyDecided` (naming the
   * decision taken, which stands), recorded the same way.
   */
  readonly approve: (
    by: Principal,
    sessionId: string,
    token: string,
    decision?: "approve" | "reject"
  ) => Effect.Effect<SessionView, SendError>
  /**
   * Issues fresh approval tokens for the writes still waiting and revokes their old ones (tokens are shown once and
   * expire). The session's own user only; the view carries the new tokens.
   */
  readonly renewApprovals: (by: Principal, sessionId: string) => Effect.Effect<SessionView, SendError>
  /**
   * Cancels the running burst and resolves once it has landed, with the landed view (`exitReason: "cancelled"`,
   * transcript kept). When no burst runs here it answers the session as it stands at once (a message accepted but not
   * yet started is not cancelled). The wait is bounded by twice the persistence timeout plus 5 s: a landing the
   * store holds up beyond that answers the session as it stands then (still `running`).
   */
  readonly cancel: (by: Principal, sessionId: string) => Effect.Effect<SessionView, SessionNotFound | PersistenceFailed>
  /** The session as it stands. */
  readonly get: (by: Principal, sessionId: string) => Effect.Effect<SessionView, SessionNotFound | PersistenceFailed>
  /** The persisted transcript after `afterSeq`. */
  readonly turns: (
    by: Principal,
    sessionId: string,
    afterSeq?: number
  ) => Effect.Effect<ReadonlyArray<Turn>, SessionNotFound | PersistenceFailed>
  /** The trajectories of the session's bursts, oldest first. */
  readonly trajectories: (
    by: Principal,
    sessionId: string
  ) => Effect.Effect<ReadonlyArray<Trajectory>, SessionNotFound | PersistenceFailed>
  /**
   * Stored turns after `fromSeq`, then live events; never misses or repeats a turn. With a number (or nothing) it
   * replays turns only and does not end by itself. With `EventsOptions` it also replays the `exit` and `report` of
   * every burst that landed after turn `fromSeq` (one right after that turn included), each right after its last turn, and with `until: "landed"` it ends after
   * the `report` of the burst running (or accepted and waiting) when it starts — right after the replay when none
   * is. Fails with `SessionNotFound` (another org's session too) or the store's `PersistenceFailed`.
   */
  readonly events: (
    by: Principal,
    sessionId: string,
    from?: number | EventsOptions
  ) => Stream.Stream<SessionEvent, SessionNotFound | PersistenceFailed>
  /**
   * `events` as a subscription to pull from, open for the life of the scope: for a consumer that writes each batch
   * somewhere (the server's SSE body) without a Stream's stages in between. Same replay, order and end; fails like
   * `events`.
   */
  readonly openEvents: (
    by: Principal,
    sessionId: string,
    from?: number | EventsOptions
  ) => Effect.Effect<Subscription, SessionNotFound | PersistenceFailed, EffectScope.Scope>
}

/** The Corral service tag. */
export class Corral extends Context.Tag("corral/Corral")<Corral, Service>() {
  /** The service over the ports (store, events, tools, providers); hosts sessions with a local supervisor. */
  static readonly layer = (
    options: Supervisor.Options = {}
  ): Layer.Layer<
    Corral | Supervisor.Supervisor,
    PersistenceFailed,
    SessionStore | SessionEvents | ToolExecutor | Providers
  > => Layer.effect(Corral, make).pipe(Layer.provideMerge(Supervisor.layer(options)))

  /**
   * An all-in-memory runtime: memory store, live events, in-process tools, the given provider routes (`providers`
   * is the `default` tier). `limits` tightens the ceilings (loosening fails with `InvalidRequest`).
   */
  static readonly layerMemory = (
    options: MemoryOptions
  ): Layer.Layer<Corral | Supervisor.Supervisor, InvalidRequest | PersistenceFailed> =>
    Corral.layer(options).pipe(
      Layer.provide(
        Layer.mergeAll(
          LiveEvents.layer,
          ToolRegistry.layer(options.tools ?? []),
          Layer.succeed(
            Providers,
            Providers.fromRoutes({ ...(options.providers ? { default: options.providers } : {}), ...options.tiers })
          )
        )
      ),
      Layer.provide(MemoryStore.layerMemory),
      Layer.provide(options.limits === undefined ? Layer.empty : Limits.layer(options.limits)),
      Layer.provide(
        options.orgBudgets === undefined ? Layer.empty : Layer.succeed(OrgBudget.OrgBudgets, options.orgBudgets)
      )
    )
}

/** Options of `Corral.layerMemory`. */
export interface MemoryOptions extends Supervisor.Options {
  readonly providers?: ReadonlyArray<ModelProvider>
  readonly tiers?: Readonly<Record<string, ReadonlyArray<ModelProvider>>>
  readonly tools?: ReadonlyArray<ToolRegistry.ToolHandler>
  readonly limits?: LimitsOverride
  /** Daily budgets per org id in micro-dollars, `"*"` for every other org (`OrgBudget`). */
  readonly orgBudgets?: OrgBudget.Settings
}

/**
 * Builds the service; needs the ports and a supervisor. The methods are assembled from parts sharing one record of
 * the ports (session/internal/corralPorts.ts): validating and storing an agent (corralPublish.ts), a start or a
 * follow-up (corralAccept.ts).
 */
export const make: Effect.Effect<
  Service,
  never,
  SessionStore | SessionEvents | ToolExecutor | Providers | Supervisor.Supervisor
> = Effect.gen(function*() {
  const store = yield* SessionStore
  const events = yield* SessionEvents
  const supervisor = yield* Supervisor.Supervisor
  const ceiling = yield* Limits.Limits
  const ports: Ports = {
    store,
    executor: yield* ToolExecutor,
    providers: yield* Providers,
    supervisor,
    ceiling,
    hostPolicy: yield* ExitPolicy.Policy,
    ids: yield* Ids,
    retriever: yield* Effect.serviceOption(Retriever),
    orgBudgets: yield* OrgBudget.OrgBudgets,
    decodeSpec: Schema.decodeUnknown(AgentSpec, { errors: "all", onExcessProperty: "error" }),
    decodeStart: Schema.decodeUnknown(StartRequest, { errors: "all", onExcessProperty: "error" }),
    ...Idempotency.make(store)
  }
  const load = (by: Principal, sessionId: string) => CorralPorts.load(ports, by, sessionId)

  /**
   * How long `cancel` waits for the cancelled burst to land: a store write that times out stops the burst, whose own
   * landing is a second bounded write, hence twice the persistence timeout (host ceiling: an agent's can only be
   * tighter), plus 5 s for the loop's in-flight call to stop and the author hook to run.
   */
  const cancelWait = Duration.millis(2 * ceiling.persistTimeoutMs + 5_000)

  const send = (by: Principal, sessionId: string, message: Parameters<Supervisor.Service["send"]>[2]) =>
    Effect.map(supervisor.send(by.orgId, sessionId, message), ({ session, tokens }) =>
      // Approval tokens are shown only to the session's own user: they are bound to that user anyway.
      view(session, by.orgId === session.principal.orgId && by.userId === session.principal.userId ? tokens : []))

  /** Delivers a stored message without awaiting it: its outcome shows on the session and its events. */
  const detach = (by: Principal, sessionId: string, message: Parameters<Supervisor.Service["send"]>[2]) =>
    Effect.forkDaemon(
      supervisor.send(by.orgId, sessionId, message).pipe(
        Effect.catchAll((error) => Effect.logDebug(`session ${sessionId}: a detached message ended: ${error._tag}`))
      )
    )

  const openEvents: Service["openEvents"] = (by, sessionId, from = 0) =>
    Effect.zipRight(
      load(by, sessionId),
      typeof from === "number"
        ? events.open(by.orgId, sessionId, from)
        : events.open(by.orgId, sessionId, from.fromSeq ?? 0, {
          landings: true,
          ...(from.until === undefined ? {} : { until: from.until })
        })
    )
  /**
   * A retried request's session as it stands: its view once anything happened since the first answer (a burst
   * landed, one runs or waits for a decision), else the first answer (`running`: the message waits to be taken up).
   */
  const asItStands = (by: Principal, first: IdempotencyRecord) =>
    Effect.map(load(by, first.sessionId), (session) => {
      const now = view(session)
      return now.status === "idle" && now.bursts <= first.answer.bursts ? first.answer : now
    })

  const service: Service = {
    publishAgent: (by, input) => publishAgent(ports, by, input),
    getAgent: (by, agentId, version) => CorralPorts.getAgent(ports, by, agentId, version),
    listAgents: (by) => store.listAgents(by.orgId),
    start: (by, input, options = {}) =>
      Effect.gen(function*() {
        const created = yield* create(ports, by, input, options)
        // A retry answers the session as it stands now (a landed one with its view), never the first answer's stale
        // `running`.
        if (created._tag === "Replay") return yield* asItStands(by, created.first)
        // The first burst runs on the actor; nobody awaits it here.
        yield* detach(by, created.session.id, created.opening)
        return created.answer
      }),
    run: (by, input, options = {}) =>
      Effect.flatMap(create(ports, by, input, options), (created) =>
        created._tag === "Replay"
          ? service.get(by, created.first.sessionId)
          : send(by, created.session.id, created.opening)),
    continue: (by, sessionId, text, options = {}) =>
      Effect.flatMap(
        accept(ports, by, sessionId, text, options, false),
        (accepted) => accepted._tag === "Replay" ? service.get(by, sessionId) : send(by, sessionId, accepted.opening)
      ),
    post: (by, sessionId, text, options = {}) =>
      Effect.flatMap(accept(ports, by, sessionId, text, options, true), (accepted) =>
        accepted._tag === "Replay"
          ? asItStands(by, accepted.first)
          : Effect.as(detach(by, sessionId, accepted.opening), accepted.answer)),
    approve: (by, sessionId, token, decision = "approve") =>
      send(by, sessionId, { _tag: "Approve", by, tokenHash: Approvals.hashToken(token), decision }),
    renewApprovals: (by, sessionId) => send(by, sessionId, { _tag: "Renew", by }),
    cancel: (by, sessionId) =>
      Effect.gen(function*() {
        yield* load(by, sessionId)
        if (yield* supervisor.cancel(by.orgId, sessionId)) {
          // Bounded: a landing stuck on a store that does not answer (or a hung author hook) answers what stands.
          yield* Effect.timeout(supervisor.landed(by.orgId, sessionId), cancelWait).pipe(
            Effect.catchTag(
              "TimeoutException",
              () => Effect.logWarning(`session ${sessionId}: the cancelled burst did not land within ${cancelWait}`)
            )
          )
        }
        return view(yield* load(by, sessionId))
      }),
    get: (by, sessionId) => Effect.map(load(by, sessionId), (session) => view(session)),
    turns: (by, sessionId, afterSeq = 0) =>
      Effect.zipRight(load(by, sessionId), store.turns(by.orgId, sessionId, afterSeq)),
    trajectories: (by, sessionId) => Effect.zipRight(load(by, sessionId), store.trajectories(by.orgId, sessionId)),
    openEvents,
    events: (by, sessionId, from) => toStream(openEvents(by, sessionId, from))
  }
  return service
})

/** Re-exported so embedders find the prompt rules next to the service. */
export { Prompt }
