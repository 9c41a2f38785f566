/**
 * corralAccept — how `Corral` takes a message in: a start (`create`) or a follow-up (`accept`) is validated, then
 * stored with its idempotency record in one step before anything runs it. From then on the message runs, in this
 * process or, after a crash, in the next; a retry with the same key finds the first answer instead of creating
 * anything.
 */
import { Clock, Effect, Option } from "effect"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import { BudgetExhausted, FieldIssue, InvalidSessionState, ScopeMismatch } from "../../domain/Errors.js"
import type { InvalidRequest, PersistenceFailed } from "../../domain/Errors.js"
import { SessionId } from "../../domain/Ids.js"
import type { InboxMessage } from "../../domain/Inbox.js"
import type { Principal } from "../../domain/Principal.js"
import type { Session } from "../../domain/Session.js"
import { initialState, view } from "../../domain/Session.js"
import * as Knowledge from "../../knowledge/Context.js"
import * as Cost from "../../rails/Cost.js"
import * as OrgBudget from "../../rails/OrgBudget.js"
import * as Prompt from "../Prompt.js"
import { waitingForDecision } from "../SessionActor.js"
import * as Supervisor from "../Supervisor.js"
import type { Ports, SendOptions } from "./corralPorts.js"
import { getAgent, invalid, issuesOf, load } from "./corralPorts.js"
import * as Idempotency from "./idempotency.js"

/**
 * Refuses a new burst of an org whose daily budget cannot pay for even its first call (`BudgetExhausted`, with when
 * it resets): what is left is below that call's least cost — the agent's system prompt and the message at the
 * route's input prices, and one output token. The call would be refused anyway; the person who asks learns it now,
 * with nothing stored.
 */
const withinOrgBudget = (
  ports: Ports,
  by: Principal,
  spec: AgentSpec,
  text: string
): Effect.Effect<void, BudgetExhausted | PersistenceFailed> => {
  const perDay = OrgBudget.perDayOf(ports.orgBudgets, by.orgId)
  if (perDay === undefined) return Effect.void
  return Effect.flatMap(Clock.currentTimeMillis, (now) => {
    const { day, resetsAt } = OrgBudget.dayOf(now)
    const prices = Option.getOrElse(ports.providers.route(spec.tier), () => []).flatMap((p) =>
      p.pricing === undefined ? [] : [p.pricing]
    )
    // On the low side (4 characters a token): a burst refused here could not have made its call.
    const least = Cost.worstCase(prices, Math.floor((Prompt.system(spec).length + text.length) / 4), 1)
    return Effect.flatMap(
      ports.store.daySpend(by.orgId, day),
      (spent) =>
        perDay - spent > least ? Effect.void : Effect.fail(
          new BudgetExhausted({
            message: `${OrgBudget.exhaustedMessage(by.orgId, perDay, spent, resetsAt)}; no new burst starts until then`,
            orgId: by.orgId,
            perDayMicros: perDay,
            spentMicros: spent,
            resetsAt: new Date(resetsAt).toISOString()
          })
        )
    )
  })
}

/** The context block of inherited reports; every inherited session must share the org and the scope. */
const inherited = (ports: Ports, by: Principal, scope: string, sessionIds: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const blocks: Array<string> = []
    for (const id of sessionIds) {
      const source = yield* load(ports, by, id)
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

/** A start whose session id is taken: `InvalidRequest` in the same scope, `ScopeMismatch` in another. */
const taken = (
  ports: Ports,
  by: Principal,
  sessionId: string,
  scope: string
): Effect.Effect<void, InvalidRequest | ScopeMismatch | PersistenceFailed> =>
  Effect.gen(function*() {
    const existing = yield* ports.store.getSession(by.orgId, sessionId)
    if (Option.isNone(existing)) return
    return yield* existing.value.scope === scope
      ? Effect.fail(
        invalid("the session already exists", [
          new FieldIssue({ path: "sessionId", message: "already exists: use continue to send a follow-up" })
        ])
      )
      : Effect.fail(
        new ScopeMismatch({
          message: `session ${sessionId} is bound to another scope`,
          expected: scope,
          actual: existing.value.scope
        })
      )
  })

/**
 * Validates a start, then stores the session with its first prompt (and the idempotency record) in one step:
 * from then on the prompt runs, in this process or, after a crash, in the next.
 */
export const create = (ports: Ports, by: Principal, input: unknown, options: SendOptions) =>
  Effect.gen(function*() {
    const request = yield* ports.decodeStart(input).pipe(
      Effect.mapError((error) => invalid("the session request is invalid", issuesOf(error)))
    )
    const print = Idempotency.fingerprint("start", request)
    const before = yield* ports.earlier(by, options.idempotencyKey, print)
    if (Option.isSome(before)) return before.value
    const spec = yield* getAgent(ports, by, request.agentId, request.version)
    yield* withinOrgBudget(ports, by, spec, request.prompt)
    if (request.sessionId !== undefined) yield* taken(ports, by, request.sessionId, request.scope)
    const inheritedContext = yield* inherited(ports, by, request.scope, request.inheritedArtifacts ?? [])
    // Knowledge: only the spec's sources, only the caller's org; a failed retrieval degrades the run, never ends it.
    const retrieved = spec.knowledgeSources.length === 0 || Option.isNone(ports.retriever)
      ? { context: Option.none<string>(), error: Option.none<string>() }
      : yield* Knowledge.contextFor(ports.retriever.value, request.prompt, by, spec.knowledgeSources)
    const context = [Option.getOrElse(retrieved.context, () => ""), inheritedContext].filter((c) => c.length > 0)
      .join("\n\n")
    const now = yield* Clock.currentTimeMillis
    const session: Session = {
      id: request.sessionId ?? SessionId.make(ports.ids.sessionId()),
      principal: by,
      scope: request.scope,
      agentId: spec.id,
      agentVersion: spec.version,
      createdAt: now,
      updatedAt: now,
      state: initialState
    }
    const message: InboxMessage = {
      id: ports.ids.messageId(),
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
    const stored = yield* ports.store.accept({
      session,
      message,
      ...Idempotency.record(by, options.idempotencyKey, print, session.id, answer, now)
    })
    if (stored._tag === "Duplicate") return yield* ports.replay(stored.first, print)
    // Recorded in the store too, where the database itself refuses a cross-scope artifact; a refused start never
    // runs its prompt.
    yield* Effect.forEach(
      request.inheritedArtifacts ?? [],
      (from) => ports.store.inheritArtifact(by.orgId, session.id, from),
      { discard: true }
    ).pipe(Effect.tapError(() => Effect.ignore(ports.store.settle(session.id, message.id))))
    yield* ports.supervisor.adopt(session, spec)
    return { _tag: "Created" as const, session, answer, opening: Supervisor.fromInbox(message) }
  })

/** Validates a follow-up and stores it (with the idempotency record) before it is queued. */
export const accept = (
  ports: Ports,
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
    const before = yield* ports.earlier(by, options.idempotencyKey, print)
    if (Option.isSome(before)) return before.value
    const session = yield* load(ports, by, sessionId)
    if (options.scope !== undefined && options.scope !== session.scope) {
      return yield* new ScopeMismatch({
        message: `session ${sessionId} is bound to another scope`,
        expected: options.scope,
        actual: session.scope
      })
    }
    if (refuseWhileWaiting && session.state.status === "awaiting_confirmation") {
      return yield* new InvalidSessionState({ sessionId, message: waitingForDecision })
    }
    if (OrgBudget.perDayOf(ports.orgBudgets, by.orgId) !== undefined) {
      const spec = yield* ports.store.getAgent(by.orgId, session.agentId, session.agentVersion)
      if (Option.isSome(spec)) yield* withinOrgBudget(ports, by, spec.value, text)
    }
    const now = yield* Clock.currentTimeMillis
    const message: InboxMessage = {
      id: ports.ids.messageId(),
      sessionId,
      orgId: by.orgId,
      kind: "continue",
      text,
      acceptedAt: now
    }
    const answer = view({ ...session, state: { ...session.state, status: "running" } })
    const stored = yield* ports.store.accept({
      message,
      ...Idempotency.record(by, options.idempotencyKey, print, sessionId, answer, now)
    })
    if (stored._tag === "Duplicate") return yield* ports.replay(stored.first, print)
    return { _tag: "Accepted" as const, answer, opening: Supervisor.fromInbox(message) }
  })
