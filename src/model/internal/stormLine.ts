/**
 * stormLine — a guarded provider's state (StormGuard) and its storm line: the gate a storm closes, the pacer's rate
 * (additive increase from the reopening, halved by a throttle after it), and the waiters with their planned release
 * instants. Plain functions over the `Guard` record, one per guarded provider.
 */
import { Clock, Effect, FiberRef } from "effect"
import type { ErrorKind } from "../../domain/ErrorKind.js"
import type { ModelProvider, ModelRequest } from "../ModelProvider.js"
import type { Options, Wait } from "../StormGuard.js"

/** An attempt waiting in line. */
interface Waiter {
  readonly earliest: number
  /** 1 for a call on its last attempt here (it goes behind the others), 0 otherwise. */
  readonly rank: number
  slot: number
}

/** The bounds a guard runs with, resolved from `Options` and its provider. */
export interface Settings {
  readonly threshold: number
  readonly openMs: number
  readonly pauseMs: number
  readonly maxGateMs: number
  readonly jitterMs: number
  readonly startRate: number
  readonly rampRate: number
  readonly maxRate: number
  readonly minRate: number
  readonly decreaseEveryMs: number
  /** Half the provider's attempt timeout: no wait at the guard is longer. */
  readonly maxWaitMs: number
  /** A call that took this many throttles here has one attempt left. */
  readonly lastAttemptAfter: number
  readonly minGapMs: number
}

/** One guarded provider's state. */
export interface Guard {
  readonly provider: ModelProvider
  readonly settings: Settings
  readonly onRelease: Options["onRelease"]
  readonly waitListener: FiberRef.FiberRef<((wait: Wait) => Effect.Effect<void>) | undefined>
  // The storm: the gate, and the pacer's line (rate = rampFrom + rampRate · (t − rampStart), at most maxRate).
  storm: boolean
  gateUntil: number
  rampStart: number
  rampFrom: number
  nextFree: number
  lastRelease: number
  lastDecrease: number
  /**
   * The waiters, in order — calls on their last attempt behind the others, then arrival — each with its planned
   * release instant.
   */
  readonly line: Array<Waiter>
  /** How many throttles each request (one chain call, all its attempts) has taken from this provider. */
  readonly rejections: WeakMap<ModelRequest, number>
  storms: number
  gated: number
  // The circuit.
  openUntil: number
  openSpreadMs: number
  openKind: ErrorKind
  consecutive: number
  opened: number
  rejected: number
}

/** The release rate at `t`. */
export const rateAt = (guard: Guard, t: number) =>
  Math.min(
    guard.settings.maxRate,
    guard.rampFrom + guard.settings.rampRate * Math.max(0, t - guard.rampStart) / 1000
  )

// The next place in line no earlier than `earliest`, nor sooner after the last actual release than the ceiling
// allows (a release can come later than its plan, and the plan's next place would then be too close to it).
const place = (guard: Guard, earliest: number) => {
  const slot = Math.max(earliest, guard.nextFree, guard.lastRelease + guard.settings.minGapMs)
  guard.nextFree = slot + 1000 / rateAt(guard, slot)
  return slot
}

// Plans every waiter again from `now`, in the same order: after a halving, or when the process stalled and
// timers fired late (all at once, whatever the plan), so the line keeps its spacing and its order.
const replan = (guard: Guard, now: number) => {
  guard.nextFree = Math.max(now, guard.lastRelease + guard.settings.minGapMs)
  for (const waiter of guard.line) waiter.slot = place(guard, Math.max(waiter.earliest, now))
}

// Joins the line at its rank; behind everyone it simply takes the next place, ahead of others the line moves.
const join = (guard: Guard, waiter: Waiter, now: number) => {
  const at = guard.line.findIndex((other) => waiter.rank < other.rank)
  if (at === -1) {
    guard.line.push(waiter)
    waiter.slot = place(guard, waiter.earliest)
    return
  }
  guard.line.splice(at, 0, waiter)
  replan(guard, now)
}

/** Whether no storm is on at `now`: it ends once the rate is back at its ceiling and nobody waits. */
export const calmNow = (guard: Guard, now: number) => {
  if (
    guard.storm && now >= guard.gateUntil && guard.line.length === 0 && guard.nextFree <= now &&
    rateAt(guard, now) >= guard.settings.maxRate
  ) guard.storm = false
  return !guard.storm
}

/**
 * A throttle at `now`: when calm, it opens a storm whose gate is its own wait plus the storm's jitter; after the
 * reopening it halves the rate (at most once per `decreaseEveryMs`) and plans the line again.
 */
export const onThrottle = (guard: Guard, now: number, waitMs: number, jitter: number) => {
  if (calmNow(guard, now)) {
    guard.storm = true
    guard.storms++
    guard.gateUntil = now + waitMs + jitter
    guard.rampStart = guard.gateUntil
    guard.rampFrom = guard.settings.startRate
    guard.nextFree = guard.gateUntil
    return
  }
  // Before the reopening the herd is held already; after it, a throttle means the rate is still too high.
  if (now < guard.gateUntil || now - guard.lastDecrease < guard.settings.decreaseEveryMs) return
  guard.lastDecrease = now
  guard.rampFrom = Math.max(guard.settings.minRate, rateAt(guard, now) / 2)
  guard.rampStart = now
  replan(guard, now + 1000 / guard.rampFrom)
}

/** During a storm: waits for this attempt's place in line (the plan may move while it waits). */
export const pass = (guard: Guard, arrivedAt: number, request: ModelRequest) => {
  const { lastAttemptAfter, maxWaitMs, minGapMs } = guard.settings
  const waiter: Waiter = {
    earliest: Math.max(arrivedAt, guard.gateUntil),
    rank: (guard.rejections.get(request) ?? 0) >= lastAttemptAfter ? 1 : 0,
    slot: 0
  }
  return Effect.acquireUseRelease(
    Effect.sync(() => {
      guard.gated++
      join(guard, waiter, arrivedAt)
    }),
    () =>
      Effect.gen(function*() {
        let now = arrivedAt
        while (waiter.slot > now && now - arrivedAt < maxWaitMs) {
          // Whole milliseconds, rounded up: a release never precedes its place (clocks tick in ms).
          yield* Effect.sleep(Math.ceil(Math.min(waiter.slot - now, maxWaitMs - (now - arrivedAt))))
          now = yield* Clock.currentTimeMillis
          // Woken late (the process stalled: the others are due too), or too soon after a release that was
          // itself late: keep the spacing, plan the line again from here.
          if (now - waiter.slot > minGapMs || now < guard.lastRelease + minGapMs) replan(guard, now)
        }
        guard.lastRelease = now
        guard.onRelease?.({ arrivedAt, releasedAt: now })
        const listener = yield* FiberRef.get(guard.waitListener)
        if (listener !== undefined && now > arrivedAt) {
          yield* listener({ provider: guard.provider.name, arrivedAt, releasedAt: now })
        }
      }),
    () =>
      Effect.sync(() => {
        const at = guard.line.indexOf(waiter)
        if (at !== -1) guard.line.splice(at, 1)
      })
  )
}
