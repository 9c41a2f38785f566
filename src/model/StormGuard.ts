/**
 * StormGuard — storm safety for one provider, shared by every session that calls it.
 *
 * Prevents the thundering herd. The provider chain's rules are per session: each session obeys Retry-After and
 * jitters its own backoff, but a provider shedding load drops MANY sessions at once, and a Retry-After is an
 * exact instant — two hundred sessions told "1 second" all come back on the same millisecond, are shed again, and
 * the wave repeats. A session cannot see the others; this guard, wrapped around the provider once per process,
 * can. Two mechanisms:
 *
 * - **A shared jittered gate.** A `rate_limit` or `overloaded` answer closes the gate for the provider's
 *   Retry-After (or, without one, a jittered pause of ~`pauseMs`). Every attempt that arrives while the gate is
 *   closed — a retry or a new session — waits, then is released at its own uniformly random instant in a window
 *   after the gate reopens, so the provider sees a ramp instead of a wall. The window is as wide as the wait
 *   (clamped to [`pauseMs`, `spreadMaxMs`]): a provider that asked for 1 s gets the herd back over ~1 s. A
 *   Retry-After beyond `maxGateMs` (the chain's 60 s cap) does not close the gate: each session then fails over
 *   at once, and holding them for a minute first would only delay that. No single wait exceeds half the
 *   provider's attempt timeout, so a gated attempt still has time to run.
 * - **A circuit breaker.** `failureThreshold` (5) consecutive transient failures — `server`, `timeout`,
 *   `overloaded`, across all sessions — open the circuit for a jittered period in [`openMs`/2, `openMs`]
 *   (5–10 s: long enough for a load balancer to move traffic or a replica to restart, short against a session's
 *   5-minute active time; jittered so that several Corral processes do not re-probe in lockstep). While open,
 *   attempts fail at once with the same kind and a Retry-After spread over the end of the period, so the chain
 *   fails over or backs off without sending a request. After the period the circuit is half-open: one more
 *   failure reopens it, a success closes it. `rate_limit` does not count: it is pacing, handled by the gate.
 *   Five because one or two failures are noise in a fleet of sessions and a few more are already a pattern.
 *
 * An attempt interrupted from outside (the chain's timeout, which cannot be told apart from a cancelled session)
 * counts as a `timeout` failure: a provider that hangs must open the circuit like one that errors. Time comes from
 * `Clock` and jitter from `Random`, so a TestClock and a seeded `Random` replay a storm exactly.
 */
import { Clock, Effect, Random } from "effect"
import type { ErrorKind } from "../domain/ErrorKind.js"
import { ProviderError } from "../domain/Errors.js"
import type { ModelProvider } from "./ModelProvider.js"

/** The guard's bounds; every field has a default (see the module comment for why it sits there). */
export interface Options {
  /** Consecutive transient failures that open the circuit (default 5). */
  readonly failureThreshold?: number
  /** The ceiling of the jittered open period, in ms (default 10 000; the period is uniform in [openMs/2, openMs]). */
  readonly openMs?: number
  /** The gate's pause when a throttle gives no Retry-After, in ms (default 1 000, jittered in [pause/2, pause]). */
  readonly pauseMs?: number
  /** The widest release window after the gate reopens, in ms (default 5 000). */
  readonly spreadMaxMs?: number
  /** The longest Retry-After the gate honours, in ms (default 60 000, the chain's cap); beyond it: no gate. */
  readonly maxGateMs?: number
  /**
   * Called when a gated attempt is released, with the `Clock` instant it arrived and the instant the gate planned
   * to let it go (metrics, tests). Must not throw.
   */
  readonly onRelease?: (release: { readonly arrivedAt: number; readonly slot: number }) => void
}

/** The defaults of `Options`. */
export const defaults = {
  failureThreshold: 5,
  openMs: 10_000,
  pauseMs: 1_000,
  spreadMaxMs: 5_000,
  maxGateMs: 60_000
} as const

/** What the guard currently believes about its provider (epoch milliseconds of the `Clock`). */
export interface Status {
  /** Attempts arriving before this instant wait (then spread over `gateSpreadMs`). */
  readonly gateUntil: number
  readonly gateSpreadMs: number
  /** Attempts arriving before this instant fail fast. */
  readonly openUntil: number
  readonly consecutiveFailures: number
  /** How many times the circuit opened. */
  readonly opened: number
  /** How many attempts waited at the gate. */
  readonly gated: number
  /** How many attempts failed fast on the open circuit. */
  readonly rejected: number
}

/** A guarded provider: the port, plus a look at the guard's state. */
export interface Guarded extends ModelProvider {
  /** The guard's current state (for tests, metrics and readiness). */
  readonly status: () => Status
}

const transient = new Set<ErrorKind>(["server", "timeout", "overloaded"])
const throttled = new Set<ErrorKind>(["rate_limit", "overloaded"])

/** Uniform integer in [lo, hi], from the `Random` service. */
const uniform = (lo: number, hi: number): Effect.Effect<number> =>
  Random.nextIntBetween(Math.floor(lo), Math.floor(Math.max(lo, hi)) + 1)

/**
 * Wraps `provider` so every session calling the result shares one gate and one circuit (module comment). Same
 * name, model, timeout and attempts as `provider`. The guarded `complete` fails with the provider's errors, or —
 * while the circuit is open — at once with a `ProviderError` of the kind that opened it, carrying the wait until
 * this caller's jittered slot as `retryAfterMs`. Wrap each provider once per process: two wrappers are two guards.
 */
export const wrap = (provider: ModelProvider, options: Options = {}): Guarded => {
  const threshold = Math.max(1, options.failureThreshold ?? defaults.failureThreshold)
  const openMs = Math.max(1, options.openMs ?? defaults.openMs)
  const pauseMs = Math.max(1, options.pauseMs ?? defaults.pauseMs)
  const spreadMaxMs = Math.max(pauseMs, options.spreadMaxMs ?? defaults.spreadMaxMs)
  const maxGateMs = options.maxGateMs ?? defaults.maxGateMs
  const maxWaitMs = Math.floor(provider.timeoutMs / 2)

  let gateUntil = 0
  let gateSpreadMs = 0
  let openUntil = 0
  let openSpreadMs = 0
  let openKind: ErrorKind = "server"
  let consecutive = 0
  let opened = 0
  let gated = 0
  let rejected = 0

  const closeGate = (now: number, waitMs: number) => {
    const spread = Math.min(spreadMaxMs, Math.max(pauseMs, waitMs))
    // A gate still in force keeps its wider window: the herd it holds is at least as large.
    gateSpreadMs = now < gateUntil + gateSpreadMs ? Math.max(gateSpreadMs, spread) : spread
    gateUntil = Math.max(gateUntil, now + waitMs)
  }

  const onFailure = (error: ProviderError) =>
    Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      if (throttled.has(error.kind)) {
        const retryAfter = error.retryAfterMs
        if (retryAfter === undefined) closeGate(now, yield* uniform(pauseMs / 2, pauseMs))
        else if (retryAfter <= maxGateMs) closeGate(now, retryAfter)
      }
      if (!transient.has(error.kind)) {
        // Auth, quota, a bad request, a refusal: the provider answered coherently, so it is not sick.
        if (error.kind !== "rate_limit") consecutive = 0
        return
      }
      consecutive++
      if (consecutive < threshold || now < openUntil) return
      const period = yield* uniform(openMs / 2, openMs)
      openUntil = now + period
      openSpreadMs = Math.min(spreadMaxMs, Math.max(pauseMs, Math.floor(period / 2)))
      openKind = error.kind
      opened++
      // Half-open once the period ends: the next failure reopens at once, a success resets the count.
      consecutive = threshold - 1
    })

  // Waits while the gate is closed, then until this caller's random slot in the release window.
  const passGate = Effect.gen(function*() {
    let waited = 0
    let now = yield* Clock.currentTimeMillis
    if (now >= gateUntil + gateSpreadMs) return
    const arrivedAt = now
    gated++
    let slot = now
    while (waited < maxWaitMs) {
      slot = gateUntil + (yield* uniform(0, gateSpreadMs))
      if (slot <= now) break
      const wait = Math.min(slot - now, maxWaitMs - waited)
      yield* Effect.sleep(wait)
      waited += wait
      now = yield* Clock.currentTimeMillis
      // Released, unless new throttles closed the gate again while we slept.
      if (now >= gateUntil) break
    }
    options.onRelease?.({ arrivedAt, slot: Math.min(slot, arrivedAt + maxWaitMs) })
  })

  const rejectOpen = (now: number) =>
    Effect.gen(function*() {
      rejected++
      const slot = openUntil + (yield* uniform(0, openSpreadMs))
      return yield* Effect.fail(
        new ProviderError({
          kind: openKind,
          provider: provider.name,
          message: `${provider.name} is failing (${threshold} consecutive ${openKind} failures): circuit open for ` +
            `${openUntil - now} ms more; no request sent`,
          retryAfterMs: Math.max(0, slot - now)
        })
      )
    })

  return {
    name: provider.name,
    model: provider.model,
    timeoutMs: provider.timeoutMs,
    maxAttempts: provider.maxAttempts,
    complete: (request) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        if (now < openUntil) return yield* rejectOpen(now)
        yield* passGate
        return yield* provider.complete(request).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              consecutive = 0
            })
          ),
          Effect.tapError(onFailure),
          Effect.onInterrupt(() =>
            onFailure(new ProviderError({ kind: "timeout", provider: provider.name, message: "interrupted" }))
          )
        )
      }),
    status: () => ({
      gateUntil,
      gateSpreadMs,
      openUntil,
      consecutiveFailures: consecutive,
      opened,
      gated,
      rejected
    })
  }
}
