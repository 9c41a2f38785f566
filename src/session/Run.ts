/**
 * One burst's lifecycle around the loop: open, run, land, persist.
 *
 * Marks the session `running` before any work (so a crash leaves a trace that recovery can find), runs the loop
 * raced against the cancel signal, turns a defect inside the burst into exit reason `crashed`, lands a report for
 * every exit, then saves the trajectory and the session state and announces `exit` and `report`. A trajectory that
 * cannot be saved is recorded, never raised; only transcript and state persistence failures fail the burst (they
 * are infrastructure, not analysis outcomes).
 */
import { Cause, Clock, Deferred, Effect, Either, Option } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { IssuedToken } from "../domain/Approval.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { ExitReason } from "../domain/ExitReason.js"
import type { TurnEntry } from "../domain/Message.js"
import type { Report } from "../domain/Report.js"
import type { Session, SessionState } from "../domain/Session.js"
import type { ToolCallRecord, Trajectory } from "../domain/Trajectory.js"
import { SessionEvents } from "../events/SessionEvents.js"
import { Providers } from "../model/ModelProvider.js"
import type { ToolSpec } from "../model/ModelProvider.js"
import * as Limits from "../rails/Limits.js"
import { SessionStore } from "../store/SessionStore.js"
import * as Approvals from "../tools/Approvals.js"
import type { ToolDef } from "../tools/ToolExecutor.js"
import { ToolExecutor } from "../tools/ToolExecutor.js"
import * as Burst from "./Burst.js"
import { Ids } from "./Ids.js"
import * as Landing from "./Landing.js"
import * as Loop from "./Loop.js"

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
  /** Calls made before the burst by the approval handler (decided writes), recorded first in its trajectory. */
  readonly handled?: ReadonlyArray<ToolCallRecord>
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
 * The tools an agent may call: its allowlist ∩ what the executor offers, sorted by name; an allowed tool that is
 * unavailable now (its server is down) is left out, with a note for the trajectory saying why.
 */
const allowedTools = (all: ReadonlyArray<ToolDef>, spec: AgentSpec) => {
  const allow = new Set(spec.tools)
  const tools = new Map<string, ToolDef>()
  const specs: Array<ToolSpec> = []
  const notes: Array<{ readonly code: string; readonly message: string }> = []
  for (const def of all) {
    if (!allow.has(def.name)) continue
    if (def.unavailable !== undefined) {
      notes.push({ code: "tool_unavailable", message: `tool "${def.name}" was not offered: ${def.unavailable}` })
      continue
    }
    tools.set(def.name, def)
    specs.push({ name: def.name, description: def.description, parameters: def.parameters })
  }
  return { tools, specs, notes }
}

/** Runs one burst to its landing. Fails only with `PersistenceFailed` (infrastructure). */
export const burst = (
  request: Request
): Effect.Effect<Landed, PersistenceFailed, SessionStore | SessionEvents | ToolExecutor | Providers> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const events = yield* SessionEvents
    const executor = yield* ToolExecutor
    const providers = yield* Providers
    const ids = yield* Ids
    const ceiling = yield* Limits.Limits
    const { session, spec } = request
    const limits = Either.getOrElse(Limits.tighten(ceiling, spec.limits), () => ceiling)
    const runId = ids.runId()
    const listed = yield* executor.list({
      sessionId: session.id,
      principal: session.principal,
      scope: session.scope,
      runId
    })
    const { notes, specs, tools } = allowedTools(listed, spec)
    const ctx: Burst.Context = {
      session,
      spec,
      limits,
      providers: Option.getOrElse(providers.route(spec.tier), () => []),
      runId,
      ports: { store, events },
      executor,
      tools,
      toolSpecs: specs
    }
    const startedAt = yield* Clock.currentTimeMillis
    const before = session.state
    yield* store.saveState(session.id, { ...before, status: "running", pending: [] }, startedAt)
    const b = Burst.start(before, request.history, startedAt)
    if (request.notes !== undefined) b.errors.push(...request.notes)
    b.errors.push(...notes)
    if (request.handled !== undefined) b.toolCalls.push(...request.handled)
    request.onStart?.(b)

    const loop = Loop.runBurst(ctx, b, request.opening)
    const cancellable = request.cancel === undefined
      ? loop
      : Effect.raceFirst(loop, Effect.as(Deferred.await(request.cancel), "cancelled" as const))
    const reason: ExitReason = yield* cancellable.pipe(
      Effect.catchAllDefect((defect) =>
        Effect.sync(() => {
          b.errors.push({ code: "crashed", message: Cause.pretty(Cause.die(defect)) })
          return "crashed" as const
        })
      )
    )

    const report = yield* Landing.land(ctx, b, reason)
    const endedAt = yield* Clock.currentTimeMillis
    const state: SessionState = { ...(yield* Burst.toState(b, before, reason, endedAt)), report }
    const trajectory = Burst.trajectory(ctx, b, reason, endedAt)
    // The pending writes' tokens are stored (hashed) before the state that makes the session wait for them.
    const { issued, records } = Approvals.issue({
      session,
      pending: state.status === "awaiting_confirmation" ? b.pending : [],
      now: endedAt,
      settings: yield* Approvals.ApprovalSettings,
      mint: ids.token
    })
    if (records.length > 0) yield* store.issueApprovals(session.id, records)
    yield* store.saveTrajectory(trajectory).pipe(
      Effect.catchAll((error) => Effect.sync(() => b.errors.push({ code: "trajectory.save", message: error.message })))
    )
    yield* store.saveState(session.id, state, endedAt)
    yield* events.publish({ _tag: "exit", sessionId: session.id, seq: b.lastSeq, reason })
    yield* events.publish({ _tag: "report", sessionId: session.id, seq: b.lastSeq, report })
    return { reason, report, state, trajectory, messages: b.messages, tokens: issued }
  })
