/**
 * stormCircuit — what a guarded provider (StormGuard) makes of a failed attempt: a throttle starts a storm or slows
 * its line (stormLine.ts), and consecutive transient failures open the circuit, during which attempts fail at once.
 */
import { Clock, Effect, Random } from "effect"
import type { ErrorKind } from "../../domain/ErrorKind.js"
import { ProviderError } from "../../domain/Errors.js"
import type { Guard } from "./stormLine.js"
import { onThrottle } from "./stormLine.js"

const transient = new Set<ErrorKind>(["server", "timeout", "overloaded"])

/** The kinds that are pacing, not sickness: they start a storm. */
export const throttled = new Set<ErrorKind>(["rate_limit", "overloaded"])

/** Uniform integer in [lo, hi], from the `Random` service. */
const uniform = (lo: number, hi: number): Effect.Effect<number> =>
  Random.nextIntBetween(Math.floor(lo), Math.floor(Math.max(lo, hi)) + 1)

/** A failed attempt: a throttle paces the line; a transient failure counts towards opening the circuit. */
export const onFailure = Effect.fnUntraced(function*(guard: Guard, error: ProviderError) {
  const { jitterMs, maxGateMs, openMs, pauseMs, threshold } = guard.settings
  const now = yield* Clock.currentTimeMillis
  if (throttled.has(error.kind)) {
    const retryAfter = error.retryAfterMs
    const jitter = yield* uniform(0, jitterMs)
    if (retryAfter === undefined) onThrottle(guard, now, yield* uniform(pauseMs / 2, pauseMs), jitter)
    else if (retryAfter <= maxGateMs) onThrottle(guard, now, retryAfter, jitter)
  }
  if (!transient.has(error.kind)) {
    // Auth, quota, a bad request, a refusal: the provider answered coherently, so it is not sick.
    if (error.kind !== "rate_limit") guard.consecutive = 0
    return
  }
  guard.consecutive++
  if (guard.consecutive < threshold || now < guard.openUntil) return
  const period = yield* uniform(openMs / 2, openMs)
  guard.openUntil = now + period
  guard.openSpreadMs = Math.max(pauseMs, Math.floor(period / 2))
  guard.openKind = error.kind
  guard.opened++
  // Half-open once the period ends: the next failure reopens at once, a success resets the count.
  guard.consecutive = threshold - 1
})

/** An attempt while the circuit is open: fails at once, with a Retry-After spread over the end of the period. */
export const rejectOpen = Effect.fnUntraced(function*(guard: Guard, now: number) {
  guard.rejected++
  const { provider } = guard
  const slot = guard.openUntil + (yield* uniform(0, guard.openSpreadMs))
  return yield* Effect.fail(
    new ProviderError({
      kind: guard.openKind,
      provider: provider.name,
      message:
        `${provider.name} is failing (${guard.settings.threshold} consecutive ${guard.openKind} failures): circuit ` +
        `open for ${guard.openUntil - now} ms more; no request sent`,
      retryAfterMs: Math.max(0, slot - now)
    })
  )
})
