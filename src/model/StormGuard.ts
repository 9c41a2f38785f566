/**
 * StormGuard — storm safety for one provider, shared by every session that calls it.
 *
 * Prevents the thundering herd without making anyone wait for it. Each session obeys its own Retry-After (the
 * chain sleeps it), but a provider shedding load drops MANY sessions at once, and a Retry-After is an exact instant:
 * two hundred sessions told "2 s" come back on the same millisecond, are shed again, and the wave repeats. A session
 * cannot see the others; this guard, wrapped around the provider once per process, can. Two mechanisms:
 *
 * **A paced release with additive increase, multiplicative decrease.** While calm, attempts pass untouched. A
 * `rate_limit` or `overloaded` answer starts a storm: the provider's Retry-After (or, without one, a jittered pause
 * in [`pauseMs`/2, `pauseMs`]) plus a jitter in [0, `jitterMs`], drawn once per storm, closes a gate. Only the answer
 * that OPENS the storm sets it — a throttle answering an attempt released later never moves the gate (that was how
 * an earlier design stalled the herd for a minute, then let it go in a wave): its own session waits its own
 * Retry-After, and the release rate is halved instead. During the storm every attempt — a retry whose Retry-After
 * is over, or a new session's first — joins one line and leaves at its planned place: `max(arrival, gate)`, and at
 * least 1 / rate after the place before it. The line is in arrival order, except that a call on its last attempt
 * at this provider (it took `maxAttempts` − 1 throttles here) goes behind the others: while the provider still
 * rejects, its next rejections go to calls with attempts to spare (a line in arrival order alone let a session take
 * three 429s while another took one, and fail). Only the last attempt yields: ranking every call by the throttles
 * it took would put each retry behind every new call, a session's finalize call included, and stretch the wait. The
 * rate starts at `startRate` when the gate reopens — so the first release goes alone: the probe — and grows linearly
 * by `rampRate` per second up to `maxRate`. A throttle after the reopening halves it (at most once per `decreaseEveryMs`, never below `minRate`)
 * and the line is planned again, order kept. A waiter woken late (this process stalled, and every due timer fires
 * at once) plans the line again from the last release, so a stall delays the line instead of bunching it. The
 * storm ends once the rate is back at `maxRate` and nobody waits.
 *
 * Bounds (defaults). (1) Released attempts: consecutive releases are at least 1 / `maxRate` apart — at most
 * ⌈10 ms · `maxRate`⌉ = 1 per 10 ms window while a storm lasts, whatever the herd. (2) Waiting: when the provider has
 * recovered by the time the gate reopens, an attempt that reaches the guard as its own Retry-After ends leaves
 * within `jitterMs` + `releaseSpreadMs(n)` of that instant, `n` the attempts ahead of it in line (at most one per
 * other call waiting) — the time the ramp takes to release `n` attempts (~2.1 s for 200; a lone session waits its
 * Retry-After plus at most `jitterMs` = 100 ms). The chain sleeps the Retry-After itself: nothing else is added on
 * top. (3) No wait at the guard exceeds half the provider's attempt timeout (the wait counts against it), so a paced
 * attempt always has time to run. Why these numbers: 20/s probes once per 50 ms, long enough for a throttling
 * provider's answer to come back and halve the rate before many more go; 100/s (one release per 10 ms) is reached
 * within 0.2 s — over real HTTP a higher ceiling let a busy event loop bunch several requests into one 10 ms window,
 * for a little less wait (docs/benchmarks.md, "Storm"); one halving per 250 ms lets a provider that keeps rejecting
 * settle the line near the ceiling (the ramp regains 100/s in 250 ms) instead of crawling at the floor; 100 ms of
 * jitter de-synchronises several Corral processes at a cost a person does not notice. A Retry-After beyond
 * `maxGateMs` (the chain's 60 s cap) starts no storm: the chain fails over at once, and holding the others first
 * would only delay that.
 *
 * **A circuit breaker.** `failureThreshold` (5) consecutive transient failures — `server`, `timeout`,
 * `overloaded`, across all sessions — open the circuit for a jittered period in [`openMs`/2, `openMs`] (5–10 s:
 * long enough for a load balancer to move traffic or a replica to restart, short against a session's 5-minute
 * active time; jittered so that several Corral processes do not re-probe in lockstep). While open, attempts fail at
 * once with the same kind and a Retry-After spread over the end of the period, so the chain fails over or backs off
 * without sending a request. After the period the circuit is half-open: one more failure reopens it, a success
 * closes it. `rate_limit` does not count: it is pacing, handled above. Five because one or two failures are noise
 * in a fleet of sessions and a few more are already a pattern.
 *
 * An attempt that waited is reported, with its wait, to the caller's `waitListener`: the provider chain records it
 * in the burst's trajectory as a `storm_wait` decision, so the trace and the viewer's waterfall show where the time
 * went.
 *
 * `wrap` builds the guard's state (internal/stormLine.ts: the storm's line and pacer) and answers with the provider
 * over it; a failure's effect on the storm and the circuit is internal/stormCircuit.ts.
 *
 * An attempt interrupted from outside (the chain's timeout, which cannot be told apart from a cancelled session)
 * counts as a `timeout` failure: a provider that hangs must open the circuit like one that errors. Time comes from
 * `Clock` and jitter from `Random`, so a TestClock and a seeded `Random` replay a storm exactly.
 */
import { Clock, Effect, FiberRef } from "effect"
import { ProviderError } from "../domain/Errors.js"
import { onFailure, rejectOpen, throttled } from "./internal/stormCircuit.js"
import type { Guard } from "./internal/stormLine.js"
import { calmNow, pass, rateAt } from "./internal/stormLine.js"
import type { ModelProvider, ModelRequest } from "./ModelProvider.js"

/** The guard's bounds; every field has a default (see the module comment for why it sits there). */
export interface Options {
  /** Consecutive transient failures that open the circuit (default 5). */
  readonly failureThreshold?: number
  /** The ceiling of the jittered open period, in ms (default 10 000; the period is uniform in [openMs/2, openMs]). */
  readonly openMs?: number
  /** The gate's pause when a throttle gives no Retry-After, in ms (default 1 000, jittered in [pause/2, pause]). */
  readonly pauseMs?: number
  /** The longest Retry-After that starts a storm, in ms (default 60 000, the chain's cap); beyond it: no storm. */
  readonly maxGateMs?: number
  /** The widest random delay added to a storm's gate, drawn once per storm, in ms (default 100). */
  readonly jitterMs?: number
  /** Releases per second when the gate reopens: the probe rate (default 20). */
  readonly startRate?: number
  /** How fast the release rate grows, in releases per second per second (default 400). */
  readonly rampRate?: number
  /** The release rate's ceiling during a storm, per second (default 100: at most 1 release per 10 ms). */
  readonly maxRate?: number
  /** The floor a throttle can halve the release rate to, per second (default 5). */
  readonly minRate?: number
  /** At most one halving per this many ms (default 250: a batch of throttles from one burst counts once). */
  readonly decreaseEveryMs?: number
  /**
   * Called when an attempt that waited is released, with the `Clock` instants it arrived and was released
   * (metrics, tests). Must not throw.
   */
  readonly onRelease?: (release: { readonly arrivedAt: number; readonly releasedAt: number }) => void
}

/** An attempt's wait in a storm line: when it arrived at the guard and when it was released (`Clock` ms). */
export interface Wait {
  readonly provider: string
  readonly arrivedAt: number
  readonly releasedAt: number
}

/**
 * Who hears of this fiber's waits in a storm line (the provider chain sets it on the fiber an attempt runs on, to
 * record a `storm_wait` rail decision): called once per attempt that waited, after its release. Unset: nobody.
 */
export const waitListener: FiberRef.FiberRef<((wait: Wait) => Effect.Effect<void>) | undefined> = FiberRef
  .unsafeMake<((wait: Wait) => Effect.Effect<void>) | undefined>(undefined)

/** The defaults of `Options`. */
export const defaults = {
  failureThreshold: 5,
  openMs: 10_000,
  pauseMs: 1_000,
  maxGateMs: 60_000,
  jitterMs: 100,
  startRate: 20,
  rampRate: 400,
  maxRate: 100,
  minRate: 5,
  decreaseEveryMs: 250
} as const

/** What the guard currently believes about its provider (epoch milliseconds of the `Clock`). */
export interface Status {
  /** Whether a storm is on: attempts are paced. */
  readonly storm: boolean
  /** Attempts do not go before this instant (the storm's opening Retry-After). */
  readonly gateUntil: number
  /** The current release rate, per second (`maxRate` when calm). */
  readonly rate: number
  /** Attempts waiting for their release now. */
  readonly waiting: number
  /** Attempts arriving before this instant fail fast. */
  readonly openUntil: number
  readonly consecutiveFailures: number
  /** How many times the circuit opened. */
  readonly opened: number
  /** How many storms started. */
  readonly storms: number
  /** How many attempts waited for a release. */
  readonly gated: number
  /** How many attempts failed fast on the open circuit. */
  readonly rejected: number
}

/** The guard's state of `provider` when it is a guarded provider (`wrap`), `undefined` otherwise. */
export const statusOf = (provider: ModelProvider): Status | undefined => {
  const status = (provider as Partial<Guarded>).status
  return typeof status === "function" ? status() : undefined
}

/** A guarded provider: the port, plus a look at the guard's state. */
export interface Guarded extends ModelProvider {
  /** The guard's current state (for tests, metrics and readiness). */
  readonly status: () => Status
}

interface Pace {
  readonly startRate: number
  readonly rampRate: number
  readonly maxRate: number
}

const paceOf = (options: Options): Pace => {
  const maxRate = Math.max(1, options.maxRate ?? defaults.maxRate)
  return {
    maxRate,
    startRate: Math.min(maxRate, Math.max(1, options.startRate ?? defaults.startRate)),
    rampRate: Math.max(0, options.rampRate ?? defaults.rampRate)
  }
}

/**
 * How long, in ms, the ramp takes from the gate's reopening to release `releases` attempts one after another — the
 * pacing part of the wait bound (module comment, bound 2): the last of a herd of `releases + 1` leaves this long
 * after the first. Pure; 0 for 0 releases.
 */
export const releaseSpreadMs = (releases: number, options: Options = {}): number => {
  const { maxRate, rampRate, startRate } = paceOf(options)
  let at = 0
  for (let i = 0; i < releases; i++) at += 1000 / Math.min(maxRate, startRate + rampRate * at / 1000)
  return at
}

/**
 * Wraps `provider` so every session calling the result shares one pacer and one circuit (module comment). Same
 * name, model, timeout and attempts as `provider`. The guarded `complete` fails with the provider's errors, or —
 * while the circuit is open — at once with a `ProviderError` of the kind that opened it, carrying the wait until
 * this caller's jittered slot as `retryAfterMs`. Wrap each provider once per process: two wrappers are two guards.
 */
export const wrap = (provider: ModelProvider, options: Options = {}): Guarded => {
  const guard = make(provider, options)
  const { maxRate } = guard.settings
  return {
    name: provider.name,
    model: provider.model,
    ...(provider.vendor === undefined ? {} : { vendor: provider.vendor }),
    ...(provider.pricing === undefined ? {} : { pricing: provider.pricing }),
    ...(provider.maxOutputTokens === undefined ? {} : { maxOutputTokens: provider.maxOutputTokens }),
    timeoutMs: provider.timeoutMs,
    maxAttempts: provider.maxAttempts,
    // Made once per guarded provider (`fnUntraced`), not per attempt: see session/Loop's `iteration`.
    complete: Effect.fnUntraced(function*(request: ModelRequest) {
      const now = yield* Clock.currentTimeMillis
      if (now < guard.openUntil) return yield* rejectOpen(guard, now)
      if (!calmNow(guard, now)) yield* pass(guard, now, request)
      return yield* provider.complete(request).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            guard.consecutive = 0
          })
        ),
        Effect.tapError((error) =>
          Effect.zipRight(
            Effect.sync(() => {
              if (throttled.has(error.kind)) guard.rejections.set(request, (guard.rejections.get(request) ?? 0) + 1)
            }),
            onFailure(guard, error)
          )
        ),
        Effect.onInterrupt(() =>
          onFailure(guard, new ProviderError({ kind: "timeout", provider: provider.name, message: "interrupted" }))
        )
      )
    }),
    status: () => ({
      storm: guard.storm,
      gateUntil: guard.gateUntil,
      rate: guard.storm ? rateAt(guard, Math.max(guard.gateUntil, guard.nextFree)) : maxRate,
      waiting: guard.line.length,
      openUntil: guard.openUntil,
      consecutiveFailures: guard.consecutive,
      opened: guard.opened,
      storms: guard.storms,
      gated: guard.gated,
      rejected: guard.rejected
    })
  }
}

/** A calm guard's state, its bounds resolved from `options` (defaults) and the provider's timeout and attempts. */
const make = (provider: ModelProvider, options: Options): Guard => {
  const { maxRate, rampRate, startRate } = paceOf(options)
  return {
    provider,
    settings: {
      threshold: Math.max(1, options.failureThreshold ?? defaults.failureThreshold),
      openMs: Math.max(1, options.openMs ?? defaults.openMs),
      pauseMs: Math.max(1, options.pauseMs ?? defaults.pauseMs),
      maxGateMs: options.maxGateMs ?? defaults.maxGateMs,
      jitterMs: Math.max(0, options.jitterMs ?? defaults.jitterMs),
      startRate,
      rampRate,
      maxRate,
      minRate: Math.min(startRate, Math.max(0.001, options.minRate ?? defaults.minRate)),
      decreaseEveryMs: Math.max(0, options.decreaseEveryMs ?? defaults.decreaseEveryMs),
      maxWaitMs: Math.floor(provider.timeoutMs / 2),
      lastAttemptAfter: Math.max(1, Math.floor(provider.maxAttempts) - 1),
      minGapMs: 1000 / maxRate
    },
    onRelease: options.onRelease,
    waitListener,
    storm: false,
    gateUntil: 0,
    rampStart: 0,
    rampFrom: startRate,
    nextFree: 0,
    lastRelease: Number.NEGATIVE_INFINITY,
    lastDecrease: Number.NEGATIVE_INFINITY,
    line: [],
    rejections: new WeakMap(),
    storms: 0,
    gated: 0,
    openUntil: 0,
    openSpreadMs: 0,
    openKind: "server",
    consecutive: 0,
    opened: 0,
    rejected: 0
  }
}
