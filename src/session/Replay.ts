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
import { Chunk, Clock, Deferred, Effect, Exit, Fiber, Layer, Option, TestClock, TestContext } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import { AgentNotFound, ProviderError, SessionNotFound } from "../domain/Errors.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { ExitReason } from "../domain/ExitReason.js"
import type { Turn, TurnEntry } from "../domain/Message.js"
import type { Session } from "../domain/Session.js"
import { initialState } from "../domain/Session.js"
import type { ModelAttempt, RailDecision, ToolCallRecord, Trajectory } from "../domain/Trajectory.js"
import { Usage } from "../domain/Usage.js"
import * as LiveEvents from "../events/LiveEvents.js"
import type { ModelProvider } from "../model/ModelProvider.js"
import { Providers } from "../model/ModelProvider.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import * as Limits from "../rails/Limits.js"
import * as MemoryStore from "../store/MemoryStore.js"
import { SessionStore } from "../store/SessionStore.js"
import type { SampleRequest, ToolDef, ToolOutcome } from "../tools/ToolExecutor.js"
import { ToolExecutor } from "../tools/ToolExecutor.js"
import type * as Burst from "./Burst.js"
import * as Ids from "./Ids.js"
import * as OrgGate from "./OrgGate.js"
import * as Run from "./Run.js"
import * as ToolCall from "./ToolCall.js"
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

/** The keys whose values are clock readings: a replayed one may be earlier than the recorded one, not later. */
const clockKeys: ReadonlySet<string> = new Set(["at", "startedAt", "endedAt", "activeMs"])

/**
 * The first difference between two JSON-like values, by path. Clock readings compare within the slack one way: a
 * recording on a real clock also spent time in store writes, which the replay does not, so a replayed time may be
 * earlier than the recorded one by any amount but later by at most `slack`. A duration next to its start compares
 * as its END (start + duration: the replay waits for the recorded end), other durations within the slack.
 */
export const firstDifference = (
  recorded: unknown,
  replayed: unknown,
  path: string,
  slack: number,
  key = ""
): Option.Option<{ readonly path: string; readonly recorded: unknown; readonly replayed: unknown }> => {
  if (typeof recorded === "number" && typeof replayed === "number") {
    if (clockKeys.has(key)) {
      return replayed - recorded <= slack
        ? Option.none()
        : Option.some({ path, recorded, replayed })
    }
    if (key === "durationMs") {
      return Math.abs(replayed - recorded) <= slack ? Option.none() : Option.some({ path, recorded, replayed })
    }
  }
  if (Array.isArray(recorded) && Array.isArray(replayed)) {
    const n = Math.min(recorded.length, replayed.length)
    for (let i = 0; i < n; i++) {
      const d = firstDifference(recorded[i], replayed[i], `${path}[${i}]`, slack)
      if (Option.isSome(d)) return d
    }
    return recorded.length === replayed.length
      ? Option.none()
      : Option.some({ path: `${path}.length`, recorded: recorded.length, replayed: replayed.length })
  }
  if (isObject(recorded) && isObject(replayed)) {
    const ends = typeof recorded.startedAt === "number" && typeof recorded.durationMs === "number" &&
      typeof replayed.startedAt === "number" && typeof replayed.durationMs === "number"
    if (ends) {
      const rec = (recorded.startedAt as number) + (recorded.durationMs as number)
      const rep = (replayed.startedAt as number) + (replayed.durationMs as number)
      if (Math.abs(rep - rec) > slack) {
        return Option.some({ path: `${path}.(startedAt + durationMs)`, recorded: rec, replayed: rep })
      }
    }
    const keys = [...new Set([...Object.keys(recorded), ...Object.keys(replayed)])].sort()
    for (const k of keys) {
      if (ends && k === "durationMs") continue
      const d = firstDifference(recorded[k], replayed[k], path === "" ? k : `${path}.${k}`, slack, k)
      if (Option.isSome(d)) return d
    }
    return Option.none()
  }
  return Object.is(recorded, replayed) ? Option.none() : Option.some({ path, recorded, replayed })
}

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A value as plain JSON (class instances such as `Usage` compare by their fields). */
const plain = (u: unknown): unknown => u === undefined ? undefined : JSON.parse(JSON.stringify(u))

/** What the record says, as the replay consumes it. */
interface Feed {
  readonly attempts: ReadonlyArray<ModelAttempt>
  next: number
  /** The recorded calls by call id, in dispatch order (a model may reuse an id within a burst). */
  readonly calls: ReadonlyMap<string, Array<ToolCallRecord>>
  /** The recorded samples (the first attempt of each) by the call they served, in order, still to ask. */
  readonly samples: Map<string, Array<ModelAttempt>>
  /** The record has no more to give a burst that crashed: the replay stops there. */
  ended: boolean
  divergence: Divergence | undefined
  /** Bumped by every replayed request, so the driver knows the burst is still moving. */
  progress: number
}

const crashedBurst = (t: Trajectory) => t.exitReason === "crashed"

/** Waits for the replayed time `until` (recorded), plus `then` ms, on the TestClock. */
const sleepUntil = (until: number, then: number) =>
  Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sleep(Math.max(0, until - now) + then))

const replayProviders = (t: Trajectory, feed: Feed, diverge: (d: Omit<Divergence, "runId">) => void) =>
  (t.replay?.route ?? []).map((entry): ModelProvider => ({
    name: entry.name,
    model: entry.model,
    maxAttempts: entry.maxAttempts,
    timeoutMs: entry.timeoutMs,
    ...(entry.pricing === undefined ? {} : { pricing: entry.pricing }),
    ...(entry.maxOutputTokens === undefined ? {} : { maxOutputTokens: entry.maxOutputTokens }),
    complete: (request) =>
      Effect.suspend(() => {
        feed.progress += 1
        const i = feed.next
        // A sample asked again answers only from its own attempts: one past them was in flight when its tool call
        // ended (the recording kept no attempt of it), so it waits for the same end here, taking no record.
        const asked = sampleAsked(request.system)
        if (asked !== undefined) {
          const next = feed.attempts[i]?.sampled
          if (next?.callId !== asked.callId || next.n !== asked.n) return Effect.never
        }
        const rec = feed.attempts[i]
        if (rec === undefined) {
          // Past the record: in flight when the burst ended (a timer or a cancel ends it), or where a crash struck.
          if (crashedBurst(t)) feed.ended = true
          return Effect.never
        }
        feed.next += 1
        const request_ = { messages: request.messages.length, tools: request.tools.length }
        if (rec.provider !== entry.name) {
          diverge({ path: `modelCalls[${i}].provider`, recorded: rec.provider, replayed: entry.name })
          return Effect.never
        }
        const d = firstDifference(rec.request, request_, `modelCalls[${i}].request`, 0)
        if (Option.isSome(d)) {
          diverge(d.value)
          return Effect.never
        }
        const error = rec.error
        // A timeout the chain itself raised: let its own timer fire on the replayed clock.
        if (error?.kind === "timeout" && rec.durationMs >= entry.timeoutMs) return Effect.never
        return Effect.zipRight(
          sleepUntil(rec.startedAt, rec.durationMs),
          rec.reply !== undefined
            ? Effect.succeed(rec.reply)
            : Effect.fail(
              new ProviderError({
                kind: error?.kind ?? "server",
                message: error?.message ?? "",
                provider: entry.name,
                ...(error?.status === undefined ? {} : { status: error.status }),
                ...(error?.retryAfterMs === undefined ? {} : { retryAfterMs: error.retryAfterMs }),
                usage: rec.usage
              })
            )
        )
      })
  }))

const replayExecutor = (
  t: Trajectory,
  feed: Feed,
  diverge: (d: Omit<Divergence, "runId">) => void
): ToolExecutor["Type"] => {
  const defs: ReadonlyArray<ToolDef> = (t.replay?.tools ?? []).map((tool) => ({
    name: tool.name,
    description: "",
    parameters: { type: "object" },
    effect: tool.effect === "write" ? "write" : "read",
    source: tool.source,
    ...(tool.unavailable === undefined ? {} : { unavailable: tool.unavailable })
  }))
  return {
    list: () => Effect.succeed(defs),
    call: (name, argumentsJson, ctx) =>
      Effect.suspend((): Effect.Effect<ToolOutcome> => {
        feed.progress += 1
        const rec = feed.calls.get(ctx.callId)?.shift()
        if (rec === undefined) {
          if (crashedBurst(t)) feed.ended = true
          else diverge({ path: `toolCalls[callId ${ctx.callId}]`, recorded: undefined, replayed: name })
          return Effect.never
        }
        if (rec.name !== name || rec.arguments !== argumentsJson) {
          diverge({
            path: `toolCalls[callId ${ctx.callId}]`,
            recorded: { name: rec.name, arguments: rec.arguments },
            replayed: { name, arguments: argumentsJson }
          })
          return Effect.never
        }
        // The samples its server asked for during the call, asked again at their recorded times: they pass the
        // replayed gate and counters, and the replayed providers answer them from the record. One the call's end
        // stopped before any attempt was recorded passes the gate again and waits, unanswered, for the same end.
        const queued = feed.samples.get(ctx.callId) ?? []
        const mine = queued.splice(0, rec.samples ?? 0)
        const unanswered = (rec.samples ?? 0) - mine.length
        const ask = (request: SampleRequest) =>
          ctx.sample === undefined
            ? Effect.sync(() =>
              diverge({ path: `toolCalls[callId ${ctx.callId}].samples`, recorded: rec.samples, replayed: 0 })
            )
            : Effect.ignore(ctx.sample(request))
        const samples = Effect.zipRight(
          Effect.forEach(
            mine,
            (first) =>
              Effect.zipRight(
                sleepUntil(first.startedAt, 0),
                ask(replayedSample(first.sampled!, first.request.messages))
              ),
            { discard: true }
          ),
          // No attempt of these was recorded: none of the record answers them.
          Effect.forEach(
            Array.from({ length: unanswered }),
            () => ask(replayedSample({ callId: ctx.callId, n: -1 }, 0)),
            { concurrency: "unbounded", discard: true }
          )
        )
        // Alongside the call, which ends at its recorded end whatever they do: a sample still running then is
        // stopped by it, as in the recording (where the calling tool's deadline, or its end, stopped it).
        const alongside = Effect.fork(samples)
        // Stopped by the end of the burst (a timer or a cancel): it ends the same way here.
        if (rec.failure === "interrupted" && rec.result.startsWith(ToolCall.interruptedText)) {
          return Effect.zipRight(alongside, Effect.never)
        }
        return Effect.zipRight(
          alongside,
          Effect.as(sleepUntil(rec.startedAt ?? 0, rec.durationMs), {
            content: rec.output ?? rec.result,
            isError: rec.isError,
            ...(rec.attachments === undefined ? {} : { attachments: rec.attachments }),
            ...(rec.failure === undefined ? {} : { failure: rec.failure })
          })
        )
      })
  }
}

/**
 * A sample asked again: only the shape the record keeps (the number of messages) — the recorded replies answer it,
 * and what the tool made of the answer is in the recorded result.
 */
const replayedSample = (sampled: { readonly callId: string; readonly n: number }, messages: number): SampleRequest => ({
  server: "(replay)",
  // Which sample it is, for the replayed providers: the loop's requests carry the agent's prompt, never this.
  system: `${samplePrefix}${JSON.stringify(sampled)}`,
  messages: Array.from({ length: messages }, () => ({ role: "user" as const, text: "" })),
  maxTokens: 1
})

const samplePrefix = "\u0000corral/replay sample "

/** The recorded sample a replayed request asks again (`replayedSample`), if it is one. */
const sampleAsked = (system: string): { readonly callId: string; readonly n: number } | undefined =>
  system.startsWith(samplePrefix) ? JSON.parse(system.slice(samplePrefix.length)) : undefined

/** The first attempt of each recorded sample, by the call it served, in order. */
const samplesOf = (attempts: ReadonlyArray<ModelAttempt>) => {
  const samples = new Map<string, Array<ModelAttempt>>()
  const seen = new Set<string>()
  for (const attempt of attempts) {
    if (attempt.sampled === undefined) continue
    const key = `${attempt.sampled.callId} ${attempt.sampled.n}`
    if (seen.has(key)) continue
    seen.add(key)
    const list = samples.get(attempt.sampled.callId)
    if (list === undefined) samples.set(attempt.sampled.callId, [attempt])
    else list.push(attempt)
  }
  return samples
}

/** A macrotask: lets every fiber woken in the replay's world run before the driver looks again. */
const macrotask = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 0)))

/** Waits until the replay stops moving: the same progress and the same pending sleeps twice in a row. */
const settle = (feed: Feed) =>
  Effect.gen(function*() {
    let before = ""
    for (let i = 0; i < 200; i++) {
      yield* macrotask
      const now = `${feed.progress}|${Chunk.join(Chunk.map(yield* TestClock.sleeps(), String), ",")}`
      if (now === before) return
      before = now
    }
  })

/**
 * Runs `fiber` to its end, moving the TestClock to the next pending wake-up whenever the replay is idle. Stops early
 * on a divergence or when a crashed burst's record is spent.
 */
const drive = <A, E>(
  fiber: Fiber.RuntimeFiber<A, E>,
  feed: Feed,
  diverge: (d: Omit<Divergence, "runId">) => void
) =>
  Effect.gen(function*() {
    for (let step = 0; step < 100_000; step++) {
      yield* settle(feed)
      if (Option.isSome(yield* Fiber.poll(fiber))) return
      if (feed.divergence !== undefined || feed.ended) return yield* Fiber.interrupt(fiber)
      const sleeps = Chunk.toReadonlyArray(yield* TestClock.sleeps())
      if (sleeps.length === 0) {
        diverge({ path: "progress", recorded: "the burst's end", replayed: "a burst waiting on nothing" })
        return yield* Fiber.interrupt(fiber)
      }
      yield* TestClock.setTime(Math.min(...sleeps))
    }
    diverge({ path: "progress", recorded: "the burst's end", replayed: "still running after 100,000 clock steps" })
    yield* Fiber.interrupt(fiber)
  })

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

/** The calls the loop dispatched (a record with a start time), by call id, in order. */
const byCallId = (records: ReadonlyArray<ToolCallRecord>) => {
  const calls = new Map<string, Array<ToolCallRecord>>()
  for (const record of records) {
    if (record.origin !== "model" || record.startedAt === undefined) continue
    const list = calls.get(record.callId)
    if (list === undefined) calls.set(record.callId, [record])
    else list.push(record)
  }
  return calls
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
