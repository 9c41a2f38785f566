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
import { Clock, Context, Duration, Effect, Layer, Option, Schema } from "effect"
import type { ParseResult, Scope as EffectScope, Stream } from "effect"
import { AgentSpec } from "./domain/AgentSpec.js"
import type { AgentSpecInput } from "./domain/AgentSpec.js"
import { BudgetExhausted } from "./domain/Errors.js"
import type { PersistenceFailed, SendError } from "./domain/Errors.js"
import {
  AgentNotFound,
  FieldIssue,
  fieldIssues,
  InvalidRequest,
  InvalidSessionState,
  ScopeMismatch,
  SessionNotFound
} from "./domain/Errors.js"
import { AgentId, SessionId } from "./domain/Ids.js"
import type { IdempotencyRecord, InboxMessage } from "./domain/Inbox.js"
import type { LimitsOverride } from "./domain/Limits.js"
import type { Turn } from "./domain/Message.js"
import type { Principal } from "./domain/Principal.js"
import { Scope } from "./domain/Scope.js"
import type { Session, SessionView } from "./domain/Session.js"
import { initialState, view } from "./domain/Session.js"
import type { SessionEvent } from "./domain/SessionEvent.js"
import type { Trajectory } from "./domain/Trajectory.js"
import * as LiveEvents from "./events/LiveEvents.js"
import { SessionEvents, toStream } from "./events/SessionEvents.js"
import type { Subscription } from "./events/SessionEvents.js"
import * as Knowledge from "./knowledge/Context.js"
import { Retriever } from "./knowledge/Retriever.js"
import type { ModelProvider } from "./model/ModelProvider.js"
import { Providers } from "./model/ModelProvider.js"
import * as Cost from "./rails/Cost.js"
import * as ExitPolicy from "./rails/ExitPolicy.js"
import * as Limits from "./rails/Limits.js"
import * as OrgBudget from "./rails/OrgBudget.js"
import { Ids } from "./session/Ids.js"
import * as Idempotency from "./session/internal/idempotency.js"
import * as JsonSchemaCheck from "./session/internal/jsonSchema.js"
import * as Prompt from "./session/Prompt.js"
import * as SessionActor from "./session/SessionActor.js"
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

const issuesOf = (error: ParseResult.ParseError, prefix = ""): ReadonlyArray<FieldIssue> =>
  fieldIssues(error, { prefix: [prefix] })

const invalid = (message: string, issues: ReadonlyArray<FieldIssue>) => new InvalidRequest({ message, issues })

/** Builds the service; needs the ports and a supervisor. */
export const make: Effect.Effect<
  Service,
  never,
  SessionStore | SessionEvents | ToolExecutor | Providers | Supervisor.Supervisor
> = Effect.gen(function*() {
  const store = yield* SessionStore
  const events = yield* SessionEvents
  const executor = yield* ToolExecutor
  const providers = yield* Providers
  const supervisor = yield* Supervisor.Supervisor
  const ceiling = yield* Limits.Limits
  const hostPolicy = yield* ExitPolicy.Policy
  const ids = yield* Ids
  const retriever = yield* Effect.serviceOption(Retriever)
  const orgBudgets = yield* OrgBudget.OrgBudgets

  const decodeSpec = Schema.decodeUnknown(AgentSpec, { errors: "all", onExcessProperty: "error" })
  const decodeStart = Schema.decodeUnknown(StartRequest, { errors: "all", onExcessProperty: "error" })

  const publishAgent: Service["publishAgent"] = (by, input) =>
    Effect.gen(function*() {
      const spec = yield* decodeSpec(input).pipe(
        Effect.mapError((error) => invalid("the agent spec is invalid", issuesOf(error)))
      )
      const issues: Array<FieldIssue> = []
      const known = new Set(
        (yield* executor.list({ sessionId: "", principal: by, scope: "", runId: "" })).map((t) => t.name)
      )
      spec.tools.forEach((name, i) => {
        if (!known.has(name)) {
          issues.push(
            new FieldIssue({
              path: `tools.${i}`,
              message: `unknown tool "${name}"; known tools: ${[...known].sort().join(", ") || "(none)"}`
            })
          )
        }
      })
      if (Option.isNone(providers.route(spec.tier))) {
        issues.push(
          new FieldIssue({
            path: "tier",
            message: `unknown tier "${spec.tier}"; configured tiers: ${providers.tiers.join(", ") || "(none)"}`
          })
        )
      }
      const tightened = Limits.tighten(ceiling, spec.limits)
      if (tightened._tag === "Left") issues.push(...tightened.left.issues)
      // A cost budget needs prices: a call to an unpriced provider would cost it nothing, and the budget would lie.
      else if (Cost.bounded(tightened.right) || OrgBudget.perDayOf(orgBudgets, by.orgId) !== undefined) {
        for (const provider of Option.getOrElse(providers.route(spec.tier), () => [])) {
          if (provider.pricing !== undefined) continue
          issues.push(
            new FieldIssue({
              path: spec.limits?.costPerSession !== undefined
                ? "limits.costPerSession"
                : spec.limits?.costPerBurst !== undefined
                ? "limits.costPerBurst"
                : "tier",
              message:
                `a cost budget applies${
                  Cost.bounded(tightened.right) ? "" : ` (the daily budget of org "${by.orgId}")`
                }, but provider "${provider.name}" of tier "${spec.tier}" has no prices: give it "pricing" in the ` +
                `configuration`
            })
          )
        }
      }
      const policy = ExitPolicy.forSpec(hostPolicy, spec.exitPolicy)
      if (policy._tag === "Left") issues.push(...policy.left.issues)
      if (spec.reportSchema !== undefined) {
        const problem = JsonSchemaCheck.check(spec.reportSchema)
        if (problem !== undefined) {
          issues.push(new FieldIssue({ path: "reportSchema", message: `not a valid JSON Schema: ${problem}` }))
        }
      }
      if (issues.length > 0) return yield* invalid("the agent spec is invalid", issues)
      yield* store.putAgent(by.orgId, spec)
      return spec
    })

  const getAgent: Service["getAgent"] = (by, agentId, version) =>
    Effect.flatMap(store.getAgent(by.orgId, agentId, version), (found) =>
      Option.match(found, {
        onNone: () => Effect.fail(new AgentNotFound({ agentId, ...(version === undefined ? {} : { version }) })),
        onSome: Effect.succeed
      }))

  const load = (by: Principal, sessionId: string) =>
    Effect.flatMap(
      Effect.suspend(() => {
        const live = supervisor.peek(by.orgId, sessionId)
        return Option.isSome(live) ? Effect.succeed(live) : store.getSession(by.orgId, sessionId)
      }),
      (found) =>
        Option.match(found, {
          onNone: () => Effect.fail(new SessionNotFound({ sessionId })),
          onSome: (session): Effect.Effect<Session> => Effect.succeed(session)
        })
    )

  /** The context block of inherited reports; every inherited session must share the org and the scope. */
  const inherited = (by: Principal, scope: string, sessionIds: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const blocks: Array<string> = []
      for (const id of sessionIds) {
        const source = yield* load(by, id)
        if (source.scope !== scope) {
          return yield* new ScopeMismatch({
            message: `inherited artifact ${id} belongs to another scope`,
            expected: scope,
            actual: source.scope
          })
        }
        if (source.state.report !== undefined) {
          blocks.push(`Report of earlier session ${id}:\n${JSON.stringify(source.state.report.data)}`)
        }
      }
      return blocks.join("\n\n")
    })

  /**
   * How long `cancel` waits for the cancelled burst to land: a store write that times out stops the burst, whose own
   * landing is a second bounded write, hence twice the persistence timeout (host ceiling: an agent's can only be
   * tighter), plus 5 s for the loop's in-flight call to stop and the author hook to run.
   */
  const cancelWait = Duration.millis(2 * ceiling.persistTimeoutMs + 5_000)

  const { earlier, replay } = Idempotency.make(store)
  const idempotency = Idempotency.record

  /**
   * Validates a start, then stores the session with its first prompt (and the idempotency record) in one step:
   * from then on the prompt runs, in this process or, after a crash, in the next.
   */
  /**
   * Refuses a new burst of an org whose daily budget cannot pay for even its first call (`BudgetExhausted`, with when
   * it resets): what is left is below that call's least cost — the agent's system prompt and the message at the
   * route's input prices, and one output token. The call would be refused anyway; the person who asks learns it now,
   * with nothing stored.
   */
  const withinOrgBudget = (
    by: Principal,
    spec: AgentSpec,
    text: string
  ): Effect.Effect<void, BudgetExhausted | PersistenceFailed> => {
    const perDay = OrgBudget.perDayOf(orgBudgets, by.orgId)
    if (perDay === undefined) return Effect.void
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const { day, resetsAt } = OrgBudget.dayOf(now)
      const prices = Option.getOrElse(providers.route(spec.tier), () => []).flatMap((p) =>
        p.pricing === undefined ? [] : [p.pricing]
      )
      // On the low side (4 characters a token): a burst refused here could not have made its call.
      const least = Cost.worstCase(prices, Math.floor((Prompt.system(spec).length + text.length) / 4), 1)
      return Effect.flatMap(
        store.daySpend(by.orgId, day),
        (spent) =>
          perDay - spent > least ? Effect.void : Effect.fail(
            new BudgetExhausted({
              message: `${
                OrgBudget.exhaustedMessage(by.orgId, perDay, spent, resetsAt)
              }; no new burst starts until then`,
              orgId: by.orgId,
              perDayMicros: perDay,
              spentMicros: spent,
              resetsAt: new Date(resetsAt).toISOString()
            })
          )
      )
    })
  }

  const create = (by: Principal, input: StartRequest, options: SendOptions) =>
    Effect.gen(function*() {
      const request = yield* decodeStart(input).pipe(
        Effect.mapError((error) => invalid("the session request is invalid", issuesOf(error)))
      )
      const print = Idempotency.fingerprint("start", request)
      const before = yield* earlier(by, options.idempotencyKey, print)
      if (Option.isSome(before)) return before.value
      const spec = yield* getAgent(by, request.agentId, request.version)
      yield* withinOrgBudget(by, spec, request.prompt)
      if (request.sessionId !== undefined) {
        const existing = yield* store.getSession(by.orgId, request.sessionId)
        if (Option.isSome(existing)) {
          return yield* existing.value.scope === request.scope
            ? Effect.fail(
              invalid("the session already exists", [
                new FieldIssue({ path: "sessionId", message: "already exists: use continue to send a follow-up" })
              ])
            )
            : Effect.fail(
              new ScopeMismatch({
                message: `session ${request.sessionId} is bound to another scope`,
                expected: request.scope,
                actual: existing.value.scope
              })
            )
        }
      }
      const inheritedContext = yield* inherited(by, request.scope, request.inheritedArtifacts ?? [])
      // Knowledge: only the spec's sources, only the caller's org; a failed retrieval degrades the run, never ends it.
      const retrieved = spec.knowledgeSources.length === 0 || Option.isNone(retriever)
        ? { context: Option.none<string>(), error: Option.none<string>() }
        : yield* Knowledge.contextFor(retriever.value, request.prompt, by, spec.knowledgeSources)
      const context = [Option.getOrElse(retrieved.context, () => ""), inheritedContext].filter((c) => c.length > 0)
        .join("\n\n")
      const now = yield* Clock.currentTimeMillis
      const session: Session = {
        id: request.sessionId ?? SessionId.make(ids.sessionId()),
        principal: by,
        scope: request.scope,
        agentId: spec.id,
        agentVersion: spec.version,
        createdAt: now,
        updatedAt: now,
        state: initialState
      }
      const message: InboxMessage = {
        id: ids.messageId(),
        sessionId: session.id,
        orgId: by.orgId,
        kind: "run",
        text: request.prompt,
        ...(context.length > 0 ? { context } : {}),
        ...(Option.isSome(retrieved.error)
          ? { notes: [{ code: "knowledge.retrieve", message: retrieved.error.value }] }
          : {}),
        acceptedAt: now
      }
      // The prompt is stored and will run: the session is `running` from the caller's point of view (a retry with
      // the same key answers the same).
      const answer = view({ ...session, state: { ...session.state, status: "running" } })
      const stored = yield* store.accept({
        session,
        message,
        ...idempotency(by, options.idempotencyKey, print, session.id, answer, now)
      })
      if (stored._tag === "Duplicate") return yield* replay(stored.first, print)
      // Recorded in the store too, where the database itself refuses a cross-scope artifact; a refused start never
      // runs its prompt.
      yield* Effect.forEach(
        request.inheritedArtifacts ?? [],
        (from) => store.inheritArtifact(by.orgId, session.id, from),
        { discard: true }
      ).pipe(Effect.tapError(() => Effect.ignore(store.settle(session.id, message.id))))
      yield* supervisor.adopt(session, spec)
      return { _tag: "Created" as const, session, answer, opening: Supervisor.fromInbox(message) }
    })

  /** Validates a follow-up and stores it (with the idempotency record) before it is queued. */
  const accept = (
    by: Principal,
    sessionId: string,
    text: string,
    options: SendOptions & { readonly scope?: string },
    refuseWhileWaiting: boolean
  ) =>
    Effect.gen(function*() {
      if (text.trim().length === 0) {
        return yield* invalid("the message is empty", [
          new FieldIssue({ path: "text", message: "must not be empty" })
        ])
      }
      const print = Idempotency.fingerprint("message", { sessionId, text })
      const before = yield* earlier(by, options.idempotencyKey, print)
      if (Option.isSome(before)) return before.value
      const session = yield* load(by, sessionId)
      if (options.scope !== undefined && options.scope !== session.scope) {
        return yield* new ScopeMismatch({
          message: `session ${sessionId} is bound to another scope`,
          expected: options.scope,
          actual: session.scope
        })
      }
      if (refuseWhileWaiting && session.state.status === "awaiting_confirmation") {
        return yield* new InvalidSessionState({
          sessionId,
          message: SessionActor.waitingForDecision
        })
      }
      if (OrgBudget.perDayOf(orgBudgets, by.orgId) !== undefined) {
        const spec = yield* store.getAgent(by.orgId, session.agentId, session.agentVersion)
        if (Option.isSome(spec)) yield* withinOrgBudget(by, spec.value, text)
      }
      const now = yield* Clock.currentTimeMillis
      const message: InboxMessage = {
        id: ids.messageId(),
        sessionId,
        orgId: by.orgId,
        kind: "continue",
        text,
        acceptedAt: now
      }
      const answer = view({ ...session, state: { ...session.state, status: "running" } })
      const stored = yield* store.accept({
        message,
        ...idempotency(by, options.idempotencyKey, print, sessionId, answer, now)
      })
      if (stored._tag === "Duplicate") return yield* replay(stored.first, print)
      return { _tag: "Accepted" as const, answer, opening: Supervisor.fromInbox(message) }
    })

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
    publishAgent,
    getAgent,
    listAgents: (by) => store.listAgents(by.orgId),
    start: (by, input, options = {}) =>
      Effect.gen(function*() {
        const created = yield* create(by, input, options)
        // A retry answers the session as it stands now (a landed one with its view), never the first answer's stale
        // `running`.
        if (created._tag === "Replay") return yield* asItStands(by, created.first)
        // The first burst runs on the actor; nobody awaits it here.
        yield* detach(by, created.session.id, created.opening)
        return created.answer
      }),
    run: (by, input, options = {}) =>
      Effect.flatMap(create(by, input, options), (created) =>
        created._tag === "Replay"
          ? service.get(by, created.first.sessionId)
          : send(by, created.session.id, created.opening)),
    continue: (by, sessionId, text, options = {}) =>
      Effect.flatMap(
        accept(by, sessionId, text, options, false),
        (accepted) => accepted._tag === "Replay" ? service.get(by, sessionId) : send(by, sessionId, accepted.opening)
      ),
    post: (by, sessionId, text, options = {}) =>
      Effect.flatMap(accept(by, sessionId, text, options, true), (accepted) =>
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
