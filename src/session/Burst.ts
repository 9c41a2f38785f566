/**
 * The running record of one burst: counters, budgets, rail state, and what the trajectory will say.
 *
 * One burst runs on one fiber, so this is a plain mutable record owned by that fiber; the actor keeps a reference so
 * that a cancelled or crashed burst still lands with the counters it really spent.
 */
import { Effect, Random, Ref } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { ExitReason } from "../domain/ExitReason.js"
import type { Limits } from "../domain/Limits.js"
import type { TurnEntry } from "../domain/Message.js"
import type { Report } from "../domain/Report.js"
import type { PendingConfirmation, Session, SessionState } from "../domain/Session.js"
import type {
  BudgetSnapshot,
  ModelAttempt,
  RailDecision,
  ReplayRecord,
  ToolCallRecord,
  Trajectory
} from "../domain/Trajectory.js"
import { Usage } from "../domain/Usage.js"
import type { ModelProvider, ToolSpec } from "../model/ModelProvider.js"
import type * as ProviderChain from "../model/ProviderChain.js"
import * as ActiveTime from "../rails/ActiveTime.js"
import type * as Budget from "../rails/Budget.js"
import * as Counters from "../rails/Counters.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import * as RepeatGuard from "../rails/RepeatGuard.js"
import type { ToolDef, ToolExecutor } from "../tools/ToolExecutor.js"
import type { OrgGate } from "./OrgGate.js"
import type * as Transcript from "./Transcript.js"

/** What a burst runs with; fixed for its whole length. */
export interface Context {
  readonly session: Session
  readonly spec: AgentSpec
  readonly limits: Limits
  /** The exit policy of the burst (the host's, with the agent's own checks and order). */
  readonly policy: ExitPolicy.ExitPolicy
  readonly providers: ReadonlyArray<ModelProvider>
  readonly runId: string
  readonly ports: Transcript.Ports
  readonly executor: ToolExecutor["Type"]
  /** The tools this agent may call (its allowlist ∩ what the executor offers), by name. */
  readonly tools: ReadonlyMap<string, ToolDef>
  /** The same tools as the model sees them, sorted by name. */
  readonly toolSpecs: ReadonlyArray<ToolSpec>
  /**
   * The characters every call of the burst sends besides its messages (the system prompt and the tool list): the
   * fixed part of a call's input estimate for a cost budget (`Cost.estimateTokens`). Recorded for replay.
   */
  readonly promptChars: number
  /** The org's daily budget, when it has one: every model call holds its worst case there first (`OrgGate`). */
  readonly org?: OrgGate | undefined
}

/** The mutable state of one burst. */
export interface Burst {
  readonly startedAt: number
  readonly activeBefore: number
  /** The session's counters when the burst opened (for the burst's own share, and the replay record). */
  readonly before: ReplayRecord["before"]
  /** The seed of `random`, recorded so a replay draws the same jitter. */
  readonly seed: number
  /** The burst's own randomness (retry jitter): seeded, so a replay of the burst draws the same numbers. */
  readonly random: Random.Random
  /** When the burst saw its cancel signal, if it did. */
  cancelledAt: number | undefined
  counters: Counters.Counters
  budget: Budget.Budget
  usage: Usage
  /** Micro-dollars the session has spent, this burst's attempts included (`before.costMicros` + the burst's). */
  cost: number
  /** Whether any attempt of the burst was priced (its provider has prices): the trajectory then says what it cost. */
  priced: boolean
  readonly chain: Ref.Ref<ProviderChain.ChainState>
  repeat: RepeatGuard.RepeatGuard
  strikes: number
  empties: number
  pruned: boolean
  /**
   * The conversation before this burst: the actor's, or the store's when the store showed the actor's was behind (it
   * closed calls another writer left open: `Loop.record`).
   */
  history: ReadonlyArray<TurnEntry>
  /** The conversation the model sees: the session's history plus this burst's turns (after any prune). */
  messages: Array<TurnEntry>
  /** The entries this burst persisted, in order (the conversation after the burst is history + these, unpruned). */
  readonly recorded: Array<TurnEntry>
  firstSeq: number
  lastSeq: number
  readonly attempts: Array<ModelAttempt>
  readonly toolCalls: Array<ToolCallRecord>
  readonly errors: Array<{ readonly code: string; readonly message: string }>
  readonly budgets: Array<BudgetSnapshot>
  /** Every rail decision, in order; the last is the exit. */
  readonly decisions: Array<RailDecision>
  pending: Array<PendingConfirmation>
  /** Samples that reached the model, by the tool call they served (`ModelAttempt.sampled.n` is the count). */
  readonly samples: Map<string, number>
  /** The providers whose `reasoning_dropped` decision this burst has recorded (once each). */
  readonly dropsReported: Set<string>
  /** Saves the open trajectory as it stands, without waiting (internal/trajectoryLog); a no-op until the log is set. */
  touch: () => void
}

/** Opens a burst over the session's state and history; `seed` seeds its jitter. */
export const start = (
  state: SessionState,
  history: ReadonlyArray<TurnEntry>,
  now: number,
  seed: number
): Burst => ({
  startedAt: now,
  activeBefore: state.activeMs,
  before: {
    modelCalls: state.modelCalls,
    toolCalls: state.toolCalls,
    tokens: state.usage.total,
    activeMs: state.activeMs,
    providerIndex: state.providerIndex,
    exhausted: state.exhausted,
    costMicros: state.costMicros
  },
  seed,
  random: Random.make(seed),
  cancelledAt: undefined,
  counters: Counters.start(state.modelCalls),
  budget: { toolCalls: state.toolCalls, tokens: state.usage.total },
  usage: Usage.zero,
  cost: state.costMicros,
  priced: false,
  chain: Ref.unsafeMake<ProviderChain.ChainState>({ index: state.providerIndex, exhausted: state.exhausted }),
  repeat: RepeatGuard.empty,
  strikes: 0,
  empties: 0,
  pruned: false,
  history,
  messages: history.slice(),
  recorded: [],
  firstSeq: 0,
  lastSeq: 0,
  attempts: [],
  toolCalls: [],
  errors: [],
  budgets: [],
  decisions: [],
  pending: [],
  samples: new Map(),
  dropsReported: new Set(),
  touch: () => {}
})

/** Notes a persisted turn's sequence number. */
export const persisted = (burst: Burst, seq: number, entry: TurnEntry): void => {
  if (burst.firstSeq === 0) burst.firstSeq = seq
  burst.lastSeq = seq
  burst.messages.push(entry)
  burst.recorded.push(entry)
}

/** The exit policy's facts at `now` (`turn` after a tool turn). */
export const facts = (
  ctx: Context,
  burst: Burst,
  exhausted: boolean,
  now: number,
  turn?: ExitPolicy.TurnFacts
): ExitPolicy.Facts => ({
  limits: ctx.limits,
  modelCallsBurst: burst.counters.burst,
  modelCallsSession: burst.counters.session,
  toolCallsBurst: burst.budget.toolCalls - burst.before.toolCalls,
  toolCallsSession: burst.budget.toolCalls,
  tokensBurst: burst.budget.tokens - burst.before.tokens,
  tokensSession: burst.budget.tokens,
  costBurst: burst.cost - burst.before.costMicros,
  costSession: burst.cost,
  activeMs: ActiveTime.spent(burst.activeBefore, burst.startedAt, now),
  burstMs: Math.max(0, now - burst.startedAt),
  strikes: burst.strikes,
  exhausted,
  providers: ctx.providers.length,
  ...(turn === undefined ? {} : { turn })
})

/** Records a rail decision. */
export const decided = (burst: Burst, decision: RailDecision): void => {
  burst.decisions.push(decision)
}

/** Records the counters and budgets now (one snapshot per model call, for the trajectory). */
export const snapshot = (burst: Burst, now: number): void => {
  burst.budgets.push({
    at: now,
    modelCallsBurst: burst.counters.burst,
    modelCallsSession: burst.counters.session,
    toolCalls: burst.budget.toolCalls,
    tokens: burst.budget.tokens,
    activeMs: burst.activeBefore + (now - burst.startedAt),
    costMicros: burst.cost
  })
}

/**
 * The session state after the burst ended with `reason` at `now`, with the `report` it landed with (the caller may
 * still set its status). One literal with every field: a spread plus a field the spread lacked gives the object its
 * properties out of line, an extra array on every state a host keeps (docs/benchmarks.md, "Notes moved from the code").
 */
export const toState = (
  burst: Burst,
  before: SessionState,
  reason: ExitReason,
  now: number,
  report: Report
): Effect.Effect<SessionState> =>
  Effect.map(Ref.get(burst.chain), ({ exhausted, index }): SessionState => {
    // Decided writes are remembered a while so that deciding the same token twice is answered, not refused. New
    // pending writes wait only when the burst stopped for them; a halt that outranked them leaves them undecided.
    const pending = [
      // Recorded in this burst's trajectory (Run.unreported), so no longer unreported.
      ...before.pending.filter((p) => p.resolution !== undefined).slice(-keepDecided).map(({ unreported: _, ...p }) =>
        p
      ),
      ...(reason === "confirmation_pending" ? burst.pending : [])
    ]
    const state: SessionState = {
      status: reason === "confirmation_pending" ? "awaiting_confirmation" as const : "idle" as const,
      modelCalls: burst.counters.session,
      toolCalls: burst.budget.toolCalls,
      usage: Usage.add(before.usage, burst.usage),
      costMicros: burst.cost,
      providerIndex: index,
      exhausted,
      activeMs: ActiveTime.spent(burst.activeBefore, burst.startedAt, now),
      bursts: before.bursts + 1,
      pending: pending.length === 0 ? none : pending,
      lastExitReason: reason,
      report
    }
    return before.storeError === undefined ? state : { ...state, storeError: before.storeError }
  })

/** How many decided writes a session remembers. */
const keepDecided = 20

// A burst's arrays grow by pushes and keep room for more (17 slots after the first push), and a host keeps every
// trajectory (the memory store: a quarter of a held session's bytes, docs/benchmarks.md): the trajectory gets copies
// of exactly their length, and one shared empty array for the empty ones.
const none: ReadonlyArray<never> = Object.freeze([])
const exact = <A>(items: ReadonlyArray<A>): ReadonlyArray<A> => items.length === 0 ? none : items.slice()

/**
 * The trajectory of the burst, with the `report` it landed with. One literal with every field, never
 * `{ ...trajectory, report }`: V8 gives each object made by a spread plus a property a hidden class of its own,
 * and a host keeps every trajectory (docs/benchmarks.md, "Notes moved from the code").
 */
export const trajectory = (
  ctx: Context,
  burst: Burst,
  reason: ExitReason,
  now: number,
  report?: Report
): Trajectory => ({
  runId: ctx.runId,
  sessionId: ctx.session.id,
  principal: ctx.session.principal,
  agentId: ctx.spec.id,
  agentVersion: ctx.spec.version,
  tier: ctx.spec.tier,
  startedAt: burst.startedAt,
  endedAt: now,
  turns: { from: burst.firstSeq, to: burst.lastSeq },
  modelCalls: exact(burst.attempts),
  toolCalls: exact(burst.toolCalls),
  errors: exact(burst.errors),
  budgets: exact(burst.budgets),
  usage: burst.usage,
  costMicros: burst.priced ? burst.cost - burst.before.costMicros : undefined,
  exitReason: reason,
  decisions: exact(burst.decisions),
  replay: replayRecord(ctx, burst),
  report
})

// The limits, check names and route are equal from one burst to the next of a session (of most sessions of an
// agent), yet each burst builds them anew; a host keeps many trajectories (the memory store keeps every one), and
// a copy per trajectory was a third of each trajectory's size. Equal values are therefore kept once. Bounded: the
// oldest of `sharedMax` distinct values is forgotten first (it is only shared less from then on).
const shared = new Map<string, unknown>()
const sharedMax = 256
const intern = <A>(value: A): A => {
  const key = JSON.stringify(value)
  const found = shared.get(key)
  if (found !== undefined) return found as A
  if (shared.size >= sharedMax) shared.delete(shared.keys().next().value!)
  shared.set(key, value)
  return value
}

/** What a replay of the burst needs beyond its turns and attempts. */
const replayRecord = (ctx: Context, burst: Burst): ReplayRecord => ({
  seed: burst.seed,
  limits: intern(ctx.limits),
  policy: intern(ExitPolicy.names(ctx.policy)),
  route: intern(ctx.providers.map((p) => ({
    name: p.name,
    model: p.model,
    maxAttempts: p.maxAttempts,
    timeoutMs: p.timeoutMs,
    ...(p.pricing === undefined ? {} : { pricing: p.pricing }),
    ...(p.maxOutputTokens === undefined ? {} : { maxOutputTokens: p.maxOutputTokens })
  }))),
  tools: intern([
    ...ctx.toolSpecs.map((spec) => {
      const def = ctx.tools.get(spec.name)
      return { name: spec.name, effect: def?.effect ?? "read", source: def?.source ?? "none" }
    }),
    // Callable though not offered (their server was down): a replay must dispatch a call to one the same way.
    ...Array.from(ctx.tools.values()).flatMap((def) =>
      def.unavailable === undefined ? [] : [{
        name: def.name,
        effect: def.effect,
        source: def.source,
        unavailable: def.unavailable
      }]
    )
  ]),
  before: burst.before,
  promptChars: ctx.promptChars,
  cancelledAt: burst.cancelledAt,
  ...(ctx.org === undefined ? {} : { orgPerDayMicros: ctx.org.perDay })
})
