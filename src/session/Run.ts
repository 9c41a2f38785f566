/**
 * One burst's lifecycle around the loop: open, run, land, persist.
 *
 * Marks the session `running` before any work (so a crash leaves a trace that recovery can find), runs the loop
 * raced against the cancel signal, turns a defect inside the burst into exit reason `crashed`, lands a report for
 * every exit, then saves the trajectory and the session state and announces `exit` and `report`. The trajectory is
 * saved open as the burst goes (internal/trajectoryLog), so a process that dies mid-burst leaves its attempts and
 * usage behind.
 *
 * Infrastructure is not an analysis outcome, but it must still end the burst visibly: when the store fails (a write
 * refused or not answered within the persistence timeout), the burst stops at once, an `error` event goes out on the
 * session's stream, an ERROR line names the session, and the burst lands as `crashed` with the session
 * `interrupted` (a follow-up resumes it); its `exit` and `report` go out live at once, whatever the store does, so
 * a follower never waits for the store to hear how the burst ended. That landing is saved now if the store takes
 * it, else handed to the host (`later`), which retries until the store answers; either way the burst then fails with
 * `PersistenceFailed`, so the actor rebuilds from the store (a timed-out write may still have landed). A trajectory
 * the store refuses at an otherwise clean landing is logged and recorded on the session (`storeError`), never in the
 * record that failed.
 */
import { Cause, Clock, Deferred, Effect, Either, Option, Random } from "effect"
import type { Context } from "effect"
import { AgentSpec } from "../domain/AgentSpec.js"
import type { IssuedToken } from "../domain/Approval.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { ExitReason } from "../domain/ExitReason.js"
import type { TurnEntry } from "../domain/Message.js"
import type { Report } from "../domain/Report.js"
import type { PendingConfirmation, Session, SessionState } from "../domain/Session.js"
import type { ToolCallRecord, Trajectory } from "../domain/Trajectory.js"
import { SessionEvents } from "../events/SessionEvents.js"
import { Providers } from "../model/ModelProvider.js"
import type { ToolSpec } from "../model/ModelProvider.js"
import * as Cost from "../rails/Cost.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import * as Limits from "../rails/Limits.js"
import * as OrgBudget from "../rails/OrgBudget.js"
import { SessionStore } from "../store/SessionStore.js"
import * as GenAi from "../telemetry/GenAi.js"
import * as Metrics from "../telemetry/Metrics.js"
import * as Tracing from "../telemetry/Tracing.js"
import * as Approvals from "../tools/Approvals.js"
import type { ToolDef } from "../tools/ToolExecutor.js"
import { ToolExecutor } from "../tools/ToolExecutor.js"
import * as Burst from "./Burst.js"
import { Ids } from "./Ids.js"
import * as TrajectoryLog from "./internal/trajectoryLog.js"
import * as Landing from "./Landing.js"
import * as Loop from "./Loop.js"
import * as OrgGate from "./OrgGate.js"
import * as Prompt from "./Prompt.js"

/** What a burst is asked to do. */
export interface Request {
  readonly session: Session
  readonly spec: AgentSpec
  /** The conversation so far (entries of the persisted transcript, in order). */
  readonly history: ReadonlyArray<TurnEntry>
  /** The entry that opens the burst (persisted before the first model call), if any. */
  readonly opening: TurnEntry | undefined
  /** Completing this cancels the burst: exit `cancelled`, transcript kept. */
  readonly cancel?: Deferred.Deferred<void>
  /** Problems met before the burst (e.g. a failed retrieval), recorded in its trajectory. */
  readonly notes?: ReadonlyArray<{ readonly code: string; readonly message: string }>
  /**
   * Takes the landing of a burst the store stopped when it could not be saved at once: the host runs it again until
   * the store answers. Without it the landing is only logged.
   */
  readonly later?: (settle: Effect.Effect<void, PersistenceFailed>) => void
  /** The seed of the burst's jitter; default: drawn from `Random` (a replay passes the recorded one). */
  readonly seed?: number
  /** The fixed part of a call's input estimate (`Burst.Context.promptChars`); a replay passes the recorded one. */
  readonly promptChars?: number | undefined
  /** The org's daily budget as the burst meets it; a replay passes the recorded one (default: `OrgBudgets`, live). */
  readonly org?: OrgGate.OrgGate | undefined
  /** Receives the burst record as soon as it exists (the actor's handle on a running burst). */
  readonly onStart?: (burst: Burst.Burst) => void
}

/** A landed burst. */
export interface Landed {
  readonly reason: ExitReason
  readonly report: Report
  readonly state: SessionState
  readonly trajectory: Trajectory
  /** The conversation after the burst (history + this burst's entries). */
  readonly messages: ReadonlyArray<TurnEntry>
  /** The approval tokens of the writes the burst left pending: shown once, in the response to this burst. */
  readonly tokens: ReadonlyArray<IssuedToken>
}

/**
 * The tools an agent may call: its allowlist ∩ what the executor offers, sorted by name. An allowed tool that is
 * unavailable now (its server is down) is not offered to the model, and neither is one the executor does not know
 * at all (its server was removed, or renamed it): each with a note for the trajectory saying why. The unavailable one
 * stays callable: a model that calls it anyway (it knows the tool from earlier turns) reaches the executor, which
 * tries its server at once and, if it is still down, answers that the tool is temporarily unavailable — never
 * "unknown tool", which would tell the model the tool does not exist.
 */
const allowedTools = (all: ReadonlyArray<ToolDef>, spec: AgentSpec) => {
  const allow = new Set(spec.tools)
  const tools = new Map<string, ToolDef>()
  const specs: Array<ToolSpec> = []
  const notes: Array<{ readonly code: string; readonly message: string }> = []
  const known = new Set<string>()
  for (const def of all) {
    known.add(def.name)
    if (!allow.has(def.name)) continue
    if (def.unavailable !== undefined) {
      notes.push({ code: "tool_unavailable", message: `tool "${def.name}" was not offered: ${def.unavailable}` })
      tools.set(def.name, def)
      continue
    }
    tools.set(def.name, def)
    specs.push({ name: def.name, description: def.description, parameters: def.parameters })
  }
  for (const name of spec.tools) {
    if (!known.has(name)) {
      notes.push({
        code: "tool_unknown",
        message: `tool "${name}" of the agent's allowlist is not known to this host: it was not offered`
      })
    }
  }
  return { tools, specs, notes }
}

/**
 * The spec with its `mcpPrompt`'s text added after its instructions, fetched now (bounded by the tool timeout). When
 * the prompt cannot be had (server down or unknown, no such prompt), the burst runs on the spec's own instructions
 * and says why: a note in the trajectory and a warning line naming the session.
 */
const withMcpPrompt = (
  executor: ToolExecutor["Type"],
  spec: AgentSpec,
  ctx: Parameters<NonNullable<ToolExecutor["Type"]["prompt"]>>[1]
): Effect.Effect<{ readonly spec: AgentSpec; readonly notes: ReadonlyArray<{ code: string; message: string }> }> => {
  const ref = spec.mcpPrompt
  if (ref === undefined) return Effect.succeed({ spec, notes: [] })
  const slash = ref.name.indexOf("/")
  const prompt = { server: ref.name.slice(0, slash), name: ref.name.slice(slash + 1), arguments: ref.arguments ?? {} }
  const fetched = executor.prompt === undefined
    ? Effect.fail(`prompt "${ref.name}": this host has no MCP servers`)
    : executor.prompt(prompt, ctx)
  return Effect.matchEffect(fetched, {
    onSuccess: (text) =>
      Effect.succeed({
        spec: text.trim().length === 0
          ? spec
          : new AgentSpec({ ...spec, instructions: `${spec.instructions}\n\n${text}` }),
        notes: []
      }),
    onFailure: (message) =>
      Effect.as(
        Effect.logWarning(`session ${ctx.sessionId}: ${message}; the burst runs on the agent's own instructions`),
        { spec, notes: [{ code: "mcp_prompt_unavailable", message }] }
      )
  })
}

/** The route of the agent's tier; an unknown tier has none (every model call fails over to nothing) and a note. */
const routeOf = (providers: Providers["Type"], spec: AgentSpec) =>
  Option.match(providers.route(spec.tier), {
    onSome: (route) => ({ route, notes: [] }),
    onNone: () => ({
      route: [],
      notes: [{
        code: "tier_unknown",
        message: `the agent's tier "${spec.tier}" is not configured on this host (tiers: ${
          providers.tiers.join(", ") || "none"
        }): no model can be called`
      }]
    })
  })

/** The trajectory records of decided writes no trajectory has recorded yet: calls of the approval handler. */
export const unreported = (pending: ReadonlyArray<PendingConfirmation>): ReadonlyArray<ToolCallRecord> =>
  pending.flatMap((p) =>
    p.resolution === undefined || p.unreported !== true ? [] : [{
      callId: p.callId,
      name: p.tool,
      origin: "handler" as const,
      effect: "write" as const,
      source: p.source ?? "none",
      status: p.resolution.status ??
        (p.resolution.decision === "reject"
          ? "not_executed" as const
          : p.resolution.isError
          ? "error" as const
          : "ok" as const),
      durationMs: p.resolution.durationMs ?? 0,
      arguments: p.arguments,
      result: p.resolution.content,
      isError: p.resolution.isError
    }]
  )

/**
 * Saves the landing of a burst the store stopped: its trajectory, then — if no one has moved the session on since —
 * its state. Safe to run again (the trajectory is upserted by run id). Its `exit` and `report` were announced live
 * before (see `stopped`), so this publishes nothing.
 */
const settleStopped = (
  ports: { readonly store: SessionStore["Type"] },
  session: Session,
  landed: { readonly trajectory: Trajectory; readonly state: SessionState }
): Effect.Effect<void, PersistenceFailed> =>
  Effect.gen(function*() {
    const { store } = ports
    yield* store.saveTrajectory(landed.trajectory)
    const current = yield* store.getSession(session.principal.orgId, session.id)
    if (Option.isSome(current) && current.value.state.status === "running") {
      yield* store.saveState(session.id, landed.state, landed.trajectory.endedAt)
    }
  })

/**
 * Runs one burst to its landing. Fails only with `PersistenceFailed` (infrastructure), after ending visibly. Its
 * spans (`invoke_agent`, landing and finalize included) are made only when tracing is on (`telemetry/Tracing`).
 */
export const burst = (
  request: Request
): Effect.Effect<Landed, PersistenceFailed, SessionStore | SessionEvents | ToolExecutor | Providers> =>
  Tracing.scoped(GenAi.invokeAgent(request, run))

/** A burst set up to run: its context, its record, and what it started from. */
interface Started {
  readonly request: Request
  readonly ctx: Burst.Context
  readonly b: Burst.Burst
  readonly before: SessionState
  readonly startedAt: number
  readonly mint: () => string
  readonly store: Context.Tag.Service<SessionStore>
  readonly events: Context.Tag.Service<SessionEvents>
}

/** Sets the burst up: its limits, policy, tools, route, org budget and context, and its record started. */
const start = (request: Request) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const events = yield* SessionEvents
    const executor = yield* ToolExecutor
    const providers = yield* Providers
    const ids = yield* Ids
    const ceiling = yield* Limits.Limits
    const { session, spec } = request
    const limits = Limits.effective(ceiling, spec.limits)
    const policy = ExitPolicy.effective(yield* ExitPolicy.Policy, spec.exitPolicy)
    const runId = ids.runId()
    yield* GenAi.runStarted(runId)
    const listed = yield* executor.list({
      sessionId: session.id,
      principal: session.principal,
      scope: session.scope,
      runId
    })
    const { notes, specs, tools } = allowedTools(listed, spec)
    const route = routeOf(providers, spec)
    const instructed = yield* withMcpPrompt(executor, spec, {
      sessionId: session.id,
      principal: session.principal,
      scope: session.scope,
      runId,
      timeoutMs: limits.toolTimeoutMs
    })
    const perDay = OrgBudget.perDayOf(yield* OrgBudget.OrgBudgets, session.principal.orgId)
    const org = "org" in request
      ? request.org
      : perDay === undefined
      ? undefined
      : OrgGate.live(store, session.principal.orgId, perDay, session.id)
    const ctx: Burst.Context = {
      session,
      spec: instructed.spec,
      limits,
      policy: policy.policy,
      providers: route.route,
      runId,
      ports: { store: Metrics.timeAppends(store), events },
      executor,
      tools,
      toolSpecs: specs,
      // Only a cost budget reads it (`ModelCall`'s gate): without one, nothing is measured.
      promptChars: request.promptChars ??
        (Cost.bounded(limits) || org !== undefined
          ? Prompt.system(instructed.spec).length + JSON.stringify(specs).length
          : 0),
      org
    }
    const startedAt = yield* Clock.currentTimeMillis
    const before = session.state
    const seed = request.seed ?? (yield* Random.nextIntBetween(0, 2 ** 31))
    const b = Burst.start(before, request.history, startedAt, seed)
    if (request.notes !== undefined) b.errors.push(...request.notes)
    b.errors.push(...notes, ...route.notes, ...instructed.notes)
    if (Option.isSome(policy.problem)) {
      b.errors.push({
        code: "exit_policy_invalid",
        message: `the agent's exit policy does not fit this host's (${
          policy.problem.value.issues.map((i) => `${i.path}: ${i.message}`).join("; ")
        }); the host's policy applies`
      })
    }
    // Decided writes not yet in any trajectory (an approval round, or an unknown outcome found at recovery).
    b.toolCalls.push(...unreported(before.pending))
    request.onStart?.(b)
    const started: Started = { request, ctx, b, before, startedAt, mint: ids.token, store, events }
    return started
  })

/** The store stopped the burst: end it visibly, land it as `crashed`, save that now or hand it to the host. */
const stopped = (s: Started, log: TrajectoryLog.TrajectoryLog, error: PersistenceFailed) =>
  Effect.gen(function*() {
    const { b, before, ctx, events, request, store } = s
    const { runId, session } = ctx
    yield* log.close
    b.errors.push({ code: "persistence", message: `${error.operation}: ${error.message}` })
    yield* Effect.logError(
      `session ${session.id}: burst ${runId} stopped: the store failed in ${error.operation}: ${error.message}; ` +
        "the session is interrupted (a follow-up resumes it once the store is back)"
    )
    // The client is told what happened, not the driver's words (those are in the log and the trajectory).
    yield* events.publish({
      _tag: "error",
      sessionId: session.id,
      seq: b.lastSeq,
      code: "store_unavailable",
      message: `the store did not take this burst's writes (${error.operation}); the burst stopped and the ` +
        "session is interrupted: send a follow-up once the store is back"
    })
    const reason = "crashed" as const
    // The burst lands as crashed whatever had ended it: one exit decision, the store's.
    const earlier = b.decisions.findIndex((d) => d._tag === "exit")
    if (earlier >= 0) b.decisions.splice(earlier, 1)
    Burst.decided(b, {
      _tag: "exit",
      at: yield* Clock.currentTimeMillis,
      check: "store",
      reason,
      notice: `the store failed in ${error.operation}`
    })
    const report = yield* Landing.land(ctx, b, reason)
    const endedAt = yield* Clock.currentTimeMillis
    const state: SessionState = {
      ...(yield* Burst.toState(b, before, reason, endedAt, report)),
      status: "interrupted"
    }
    // Announced live now, not once the store takes the landing: a follower waiting for `exit` must not wait
    // for the store (a partition may last longer than the follower does). Saved later, they are replayed from
    // the trajectory to whoever subscribes after.
    yield* events.publish({ _tag: "exit", sessionId: session.id, seq: b.lastSeq, reason })
    yield* events.publish({ _tag: "report", sessionId: session.id, seq: b.lastSeq, report })
    const settle = settleStopped({ store }, session, {
      trajectory: Burst.trajectory(ctx, b, reason, endedAt, report),
      state
    })
    const settled = yield* settle.pipe(Effect.as(true), Effect.orElseSucceed(() => false))
    if (!settled) {
      if (request.later === undefined) {
        yield* Effect.logError(`session ${session.id}: the landing of burst ${runId} could not be saved`)
      } else request.later(settle)
    }
    return yield* error
  })

/** The burst's loop, from the session marked `running` to the exit policy's decision (a cancel or a defect too). */
const loop = (s: Started) =>
  Effect.gen(function*() {
    const { b, before, ctx, request, startedAt, store } = s
    yield* store.saveState(ctx.session.id, { ...before, status: "running", pending: [] }, startedAt)
    // The open trajectory is saved from the start (debounced, internal/trajectoryLog): a burst that dies in a first
    // model call longer than the debounce still leaves a record.
    b.touch()
    const cancelled = Effect.map(Clock.currentTimeMillis, (at): ExitPolicy.Decision => {
      b.cancelledAt = at
      return { check: "cancel", reason: "cancelled", notice: "the burst was cancelled" }
    })
    // Cancelled before it began (while it waited for a place, session/Admission): the opening is recorded and
    // nothing else runs — no model call.
    const early = request.cancel !== undefined && (yield* Deferred.isDone(request.cancel))
    const cancellable = early
      ? Effect.zipRight(request.opening === undefined ? Effect.void : Loop.record(ctx, b, request.opening), cancelled)
      : request.cancel === undefined
      ? Loop.runBurst(ctx, b, request.opening)
      : Effect.raceFirst(
        Loop.runBurst(ctx, b, request.opening),
        Effect.zipRight(Deferred.await(request.cancel), cancelled)
      )
    return yield* cancellable.pipe(
      Effect.catchAllDefect((defect) =>
        Effect.sync((): ExitPolicy.Decision => {
          const pretty = Cause.pretty(Cause.die(defect))
          b.errors.push({ code: "crashed", message: pretty })
          return { check: "crash", reason: "crashed", notice: pretty.split("\n")[0] ?? "a defect" }
        })
      ),
      // Every rail and adapter of the burst reads the burst's effective limits, never the host's.
      Effect.provideService(Limits.Limits, ctx.limits)
    )
  })

/** Lands the burst on `decision`: its report, state, trajectory and approval tokens stored, `exit` and `report` sent. */
const land = (s: Started, log: TrajectoryLog.TrajectoryLog, decision: ExitPolicy.Decision) =>
  Effect.gen(function*() {
    const { b, before, ctx, events, store } = s
    const { runId, session } = ctx
    const reason: ExitReason = decision.reason
    Burst.decided(b, { _tag: "exit", at: yield* Clock.currentTimeMillis, ...decision })
    const report = yield* Landing.land(ctx, b, reason)
    const endedAt = yield* Clock.currentTimeMillis
    let state: SessionState = yield* Burst.toState(b, before, reason, endedAt, report)
    // The report is stored with the trajectory: a late subscriber is replayed every landing (events/Landings).
    const trajectory: Trajectory = Burst.trajectory(ctx, b, reason, endedAt, report)
    // The pending writes' tokens are stored (hashed) before the state that makes the session wait for them.
    const { issued, records } = Approvals.issue({
      session,
      pending: state.status === "awaiting_confirmation" ? b.pending : [],
      now: endedAt,
      settings: yield* Approvals.ApprovalSettings,
      mint: s.mint
    })
    const landed = yield* Effect.gen(function*() {
      if (records.length > 0) yield* store.issueApprovals(session.id, records)
      // After any provisional save, so the closed trajectory is the one that stays.
      yield* log.close
      yield* store.saveTrajectory(trajectory).pipe(
        Effect.catchAll((error) =>
          Effect.zipRight(
            Effect.logError(`session ${session.id}: trajectory ${runId} not saved: ${error.message}`),
            Effect.sync(() => {
              state = {
                ...state,
                storeError: { operation: "saveTrajectory", message: error.message, at: endedAt, runId }
              }
            })
          )
        )
      )
      yield* store.saveState(session.id, state, endedAt)
    }).pipe(Effect.either)
    if (Either.isLeft(landed)) return yield* stopped(s, log, landed.left)
    yield* events.publish({ _tag: "exit", sessionId: session.id, seq: b.lastSeq, reason })
    yield* events.publish({ _tag: "report", sessionId: session.id, seq: b.lastSeq, report })
    // The conversation as the store has it (not the pruned one the model last saw): a rebuilt actor reads the same.
    const out: Landed = {
      reason,
      report,
      state,
      trajectory,
      messages: [...b.history, ...b.recorded],
      tokens: issued
    }
    return out
  })

const run = (
  request: Request
): Effect.Effect<Landed, PersistenceFailed, SessionStore | SessionEvents | ToolExecutor | Providers> =>
  Effect.gen(function*() {
    const s = yield* start(request)
    const { b, ctx, store } = s
    const log = yield* TrajectoryLog.make(
      store.saveTrajectory,
      Effect.map(Clock.currentTimeMillis, (now) => ({ ...Burst.trajectory(ctx, b, "crashed", now), open: true })),
      (error) =>
        Effect.logWarning(`session ${ctx.session.id}: open trajectory ${ctx.runId} not saved: ${error.message}`)
    )
    b.touch = log.touch
    const ran = yield* Effect.either(loop(s))
    if (Either.isLeft(ran)) return yield* stopped(s, log, ran.left)
    return yield* land(s, log, ran.right)
  })
