/**
 * Replay — re-runs a stored burst's loop against what was recorded, and says where it diverges.
 *
 * Prevents "the rails decided" from being a claim nobody can check. A stored session keeps, per burst, every model
 * attempt verbatim (reply or classified error, with its timing), every tool result (and the executor's own output
 * when a rail changed what the model saw), every rail decision, and what the loop ran with (`Trajectory.replay`:
 * effective limits, exit policy, route, offered tools, counters before, the jitter seed, the cancel time). Replay
 * builds a world of exactly that — the stored spec version, in-memory ports, providers that answer attempt by attempt
 * from the record, an executor that answers call by call (asking again, at their recorded times, the samples its
 * tool servers asked for during each call: they are model calls of the burst) — and runs the REAL burst
 * (`Run.burst`) in it on a `TestClock` driven by the recorded timings: a replayed attempt or call takes as long as it
 * took, the chain's own timers and backoffs (seeded: the same jitter) and the deadline timer fire on the same
 * clock. It then compares every turn, every attempt, every tool record, every rail decision, the counter snapshots,
 * the usage, the exit reason and (for the last burst) the report with what is stored, and stops at the first
 * divergence with its path.
 *
 * Times are compared within a slack (`timeSlackMs`, 1 s by default), one way: a recording on a real clock also spent
 * time in store writes, which the replay does not, so a replayed time may be earlier than the recorded one but not
 * later than it by more than the slack; every number a rail decided on (delays, counts, sizes) is compared exactly.
 * A burst that crashed (a defect, a process that died, a store that stopped it) is verified up to where its record
 * ends. Records older than replay (no `replay` block), and bursts stopped before their first turn, are skipped with
 * the reason.
 */
import { Deferred, Effect, Exit, Fiber, Layer, Option, TestClock, TestContext } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import { AgentNotFound, SessionNotFound } from "../domain/Errors.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { ExitReason } from "../domain/ExitReason.js"
import type { Turn, TurnEntry } from "../domain/Message.js"
import type { Session } from "../domain/Session.js"
import { initialState } from "../domain/Session.js"
import type { RailDecision, Trajectory } from "../domain/Trajectory.js"
import { Usage } from "../domain/Usage.js"
import * as LiveEvents from "../events/LiveEvents.js"
import { Providers } from "../model/ModelProvider.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import * as Limits from "../rails/Limits.js"
import * as MemoryStore from "../store/MemoryStore.js"
import { SessionStore } from "../store/SessionStore.js"
import { ToolExecutor } from "../tools/ToolExecutor.js"
import type * as Burst from "./Burst.js"
import * as Ids from "./Ids.js"
import { firstDifference, plain } from "./internal/replayDiff.js"
import type { Feed } from "./internal/replayWorld.js"
import {
  byCallId,
  crashedBurst,
  drive,
  replayExecutor,
  replayProviders,
  samplesOf,
  sleepUntil
} from "./internal/replayWorld.js"
import * as OrgGate from "./OrgGate.js"
import * as Run from "./Run.js"
import * as Transcript from "./Transcript.js"

/** A stored burst and what it needs: the agent spec of its version, its session, the whole transcript. */
export interface RecordedBurst {
  readonly spec: AgentSpec
  readonly session: Session
  readonly turns: ReadonlyArray<Turn>
  readonly trajectory: Trajectory
  /** Whether this is the session's last burst (its report is the session's). */
  readonly last?: boolean
}

/** The first place a replay differs from the record. */
export interface Divergence {
  readonly runId: string
  /** Where, e.g. `modelCalls[2].provider`, `turns[seq 7].entry.text`, `decisions[3].delayMs`, `exitReason`. */
  readonly path: string
  readonly recorded: unknown
  readonly replayed: unknown
}

/** What the replay of one burst showed. */
export type BurstResult =
  | {
    readonly _tag: "Verified"
    readonly runId: string
    readonly exitReason: ExitReason
    /** `true` for a crashed burst: verified up to where its record ends. */
    readonly prefix: boolean
    readonly attempts: number
    readonly toolCalls: number
    readonly decisions: number
    readonly turns: number
  }
  | { readonly _tag: "Skipped"; readonly runId: string; readonly why: string }
  | { readonly _tag: "Diverged"; readonly divergence: Divergence }

/** How to replay. */
export interface Options {
  /** The host's exit policy (with the host's own checks); default: Corral's. The agent's own are applied on top. */
  readonly policy?: ExitPolicy.ExitPolicy
  /** How far a replayed time may be from the recorded one (store writes take time in a recording); default 1000. */
  readonly timeSlackMs?: number
}

const defaultSlackMs = 1000

/**
 * The first difference between two JSON-like values, by path; clock readings within the slack, one way (see
 * internal/replayDiff.ts).
 */
export { firstDifference } from "./internal/replayDiff.js"

/**
 * The decisions to compare: never the storm-line waits (other sessions' throttles caused them: a replay, alone on
 * its providers, cannot reproduce them), and without the exit when the record ends at a crash the replay cannot
 * reproduce.
 */
const exits = (decisions: ReadonlyArray<RailDecision>, prefix: boolean) =>
  decisions.filter((d) => d._tag !== "storm_wait" && !(prefix && d._tag === "exit"))

/** Compares what the replay produced with the record; `prefix` for a burst whose record ends at a crash. */
const compare = (
  recorded: RecordedBurst,
  b: Burst.Burst,
  landed: Option.Option<Run.Landed>,
  slack: number
): Option.Option<Omit<Divergence, "runId">> => {
  const t = recorded.trajectory
  // A crashed burst (a defect, a dead process, a store that stopped it) is verified up to where its record ends.
  const prefix = Option.isNone(landed) || crashedBurst(t)
  // A crashed burst is compared over what both sides have: the record ends at the crash, and the replay, stopped
  // there, may have stored what a clean stop stores (interrupted results) where the crash stored nothing.
  const pair = <X>(path: string, rec: ReadonlyArray<X>, rep: ReadonlyArray<X>): readonly [string, unknown, unknown] => {
    if (!prefix) return [path, rec, rep]
    const n = Math.min(rec.length, rep.length)
    return [path, rec.slice(0, n), rep.slice(0, n)]
  }
  const modelTools = t.toolCalls.filter((c) => c.origin === "model")
  const replayedTools = b.toolCalls.filter((c) => c.origin === "model")
  const stored = recorded.turns.filter((turn) => turn.seq >= t.turns.from && turn.seq <= t.turns.to).map((turn) =>
    turn.entry
  )
  // A leading `tool_results` is the store's closing of calls another writer left open: the replay starts after it.
  const entries = stored[0]?.kind === "tool_results" ? stored.slice(1) : stored
  const pairs: Array<readonly [string, unknown, unknown]> = [
    pair("turns", entries, b.recorded),
    pair("modelCalls", t.modelCalls, b.attempts),
    pair("toolCalls", modelTools, replayedTools),
    pair("decisions", exits(t.decisions ?? [], prefix), exits(b.decisions, prefix)),
    pair("budgets", t.budgets, b.budgets)
  ]
  if (Option.isSome(landed) && !prefix) {
    pairs.push(["usage", t.usage, landed.value.trajectory.usage], ["exitReason", t.exitReason, landed.value.reason])
    const report = recorded.session.state.report
    if (recorded.last === true && report !== undefined && report.exitReason === t.exitReason) {
      const { artifact: _a, ...storedReport } = report
      const { artifact: _b, ...replayedReport } = landed.value.report
      pairs.push(["report", storedReport, replayedReport])
    }
  }
  for (const [path, rec, rep] of pairs) {
    const d = firstDifference(plain(rec), plain(rep), path, slack)
    if (Option.isSome(d)) return d
  }
  return Option.none()
}

/** Replays one stored burst (see the module comment). Never fails: what went wrong is the result. */
export const verifyBurst = (recorded: RecordedBurst, options: Options = {}): Effect.Effect<BurstResult> =>
  Effect.gen(function*() {
    const t = recorded.trajectory
    const skipped = (why: string): BurstResult => ({ _tag: "Skipped", runId: t.runId, why })
    const record = t.replay
    if (record === undefined) return skipped("recorded before replay records existed")
    if (t.open === true) return skipped("still running")
    const first = recorded.turns.find((turn) => turn.seq === t.turns.from)
    if (t.turns.from === 0 || first === undefined) return skipped("stopped before its first turn was stored")
    // A burst opens with its user turn, unless the store first closed calls another writer left open
    // (store/Pairing.ts): that closing turn belongs to the conversation the burst starts from.
    const closedFirst = first.entry.kind === "tool_results"
    const openingSeq = closedFirst ? t.turns.from + 1 : t.turns.from
    const opening = recorded.turns.find((turn) => turn.seq === openingSeq)
    if (opening === undefined) return skipped("stopped before its first turn was stored")
    // The conversation as a loaded actor holds it (calls left open mid-transcript closed: Transcript.history).
    const history: Array<TurnEntry> = Transcript.history(recorded.turns.filter((turn) => turn.seq < openingSeq))
    const feed: Feed = {
      attempts: t.modelCalls,
      next: 0,
      calls: byCallId(t.toolCalls),
      samples: samplesOf(t.modelCalls),
      ended: false,
      divergence: undefined,
      progress: 0
    }
    const diverge = (d: Omit<Divergence, "runId">) => {
      feed.divergence ??= { runId: t.runId, ...d }
    }
    const policy = options.policy ?? ExitPolicy.defaults
    // The checks must be the recorded ones, in the recorded order. A host's own check is code: a replay without it
    // cannot say what it would have decided (not verified, not diverged); a known check in another order diverges.
    const replayedPolicy = ExitPolicy.names(ExitPolicy.effective(policy, recorded.spec.exitPolicy).policy)
    const missing = record.policy.filter((name) => !replayedPolicy.includes(name))
    if (missing.length > 0) {
      return skipped(`needs the host's own exit check(s) ${missing.join(", ")}: replay with the host's policy`)
    }
    const p = firstDifference(record.policy, replayedPolicy, "replay.policy", 0)
    if (Option.isSome(p)) return { _tag: "Diverged", divergence: { runId: t.runId, ...p.value } }
    const session: Session = {
      ...recorded.session,
      state: {
        ...initialState,
        modelCalls: record.before.modelCalls,
        toolCalls: record.before.toolCalls,
        usage: new Usage({ inputTokens: record.before.tokens, outputTokens: 0 }),
        activeMs: record.before.activeMs,
        providerIndex: record.before.providerIndex,
        exhausted: record.before.exhausted
      }
    }
    const world = Layer.mergeAll(
      LiveEvents.layer,
      Layer.succeed(ToolExecutor, replayExecutor(t, feed, diverge)),
      Layer.succeed(Providers, Providers.fromRoutes({ [recorded.spec.tier]: replayProviders(t, feed, diverge) }))
    ).pipe(Layer.provideMerge(MemoryStore.layerMemory))
    let b: Burst.Burst | undefined
    const run = Effect.gen(function*() {
      const store = yield* SessionStore
      yield* Effect.orDie(store.createSession(session))
      yield* TestClock.setTime(t.startedAt)
      const cancel = yield* Deferred.make<void>()
      if (record.cancelledAt !== undefined) {
        yield* Effect.fork(Effect.zipRight(sleepUntil(record.cancelledAt, 0), Deferred.succeed(cancel, undefined)))
      }
      const fiber = yield* Effect.fork(Run.burst({
        session,
        spec: recorded.spec,
        history,
        opening: opening.entry,
        cancel,
        seed: record.seed,
        promptChars: record.promptChars,
        org: record.orgPerDayMicros === undefined
          ? undefined
          : OrgGate.replay(session.principal.orgId, record.orgPerDayMicros, t.decisions ?? []),
        onStart: (burst) => (b = burst)
      }))
      yield* drive(fiber, feed, diverge)
      return yield* Fiber.await(fiber)
    }).pipe(
      Effect.provide(world),
      Effect.provideService(Limits.Limits, record.limits),
      Effect.provideService(ExitPolicy.Policy, policy),
      Effect.provideService(Ids.Ids, { ...Ids.random, runId: () => t.runId }),
      Effect.provide(TestContext.TestContext)
    )
    const exit = yield* run
    if (feed.divergence !== undefined) return { _tag: "Diverged", divergence: feed.divergence }
    if (b === undefined) return skipped("the replay did not start")
    const landed = Exit.isSuccess(exit) ? Option.some(exit.value) : Option.none<Run.Landed>()
    if (Option.isNone(landed) && !feed.ended && !crashedBurst(t)) {
      return {
        _tag: "Diverged",
        divergence: { runId: t.runId, path: "exitReason", recorded: t.exitReason, replayed: "(the replay failed)" }
      }
    }
    const d = compare(recorded, b, landed, options.timeSlackMs ?? defaultSlackMs)
    if (Option.isSome(d)) return { _tag: "Diverged", divergence: { runId: t.runId, ...d.value } }
    return {
      _tag: "Verified",
      runId: t.runId,
      exitReason: t.exitReason,
      prefix: Option.isNone(landed) || crashedBurst(t),
      attempts: b.attempts.length,
      toolCalls: b.toolCalls.filter((c) => c.origin === "model").length,
      decisions: b.decisions.length,
      turns: b.recorded.length
    }
  })

/** A stored session, as replay reads it. */
export interface RecordedSession {
  readonly session: Session
  readonly turns: ReadonlyArray<Turn>
  readonly trajectories: ReadonlyArray<Trajectory>
  /** The agent spec of each version the session ran (by version). */
  readonly specs: ReadonlyMap<number, AgentSpec>
}

/** Reads a session, its transcript, its trajectories and its agent spec from the store. */
export const load = (
  orgId: string,
  sessionId: string
): Effect.Effect<RecordedSession, PersistenceFailed | SessionNotFound | AgentNotFound, SessionStore> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const found = yield* store.getSession(orgId, sessionId)
    if (Option.isNone(found)) return yield* new SessionNotFound({ sessionId })
    const session = found.value
    const spec = yield* store.getAgent(orgId, session.agentId, session.agentVersion)
    if (Option.isNone(spec)) {
      return yield* new AgentNotFound({ agentId: session.agentId, version: session.agentVersion })
    }
    return {
      session,
      turns: yield* store.turns(orgId, sessionId),
      trajectories: [...(yield* store.trajectories(orgId, sessionId))].sort((a, b) => a.startedAt - b.startedAt),
      specs: new Map([[session.agentVersion, spec.value]])
    }
  })

/** Replays every burst of a session in order; stops at the first divergence. */
export const verifySession = (
  recorded: RecordedSession,
  options: Options = {}
): Effect.Effect<ReadonlyArray<BurstResult>> =>
  Effect.gen(function*() {
    const results: Array<BurstResult> = []
    const last = recorded.trajectories.at(-1)
    for (const trajectory of recorded.trajectories) {
      const spec = recorded.specs.get(trajectory.agentVersion)
      if (spec === undefined) {
        results.push({
          _tag: "Skipped",
          runId: trajectory.runId,
          why: `agent version ${trajectory.agentVersion} is not stored`
        })
        continue
      }
      const result = yield* verifyBurst({
        spec,
        session: recorded.session,
        turns: recorded.turns,
        trajectory,
        last: trajectory === last
      }, options)
      results.push(result)
      if (result._tag === "Diverged") break
    }
    return results
  })
