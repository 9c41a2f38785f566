/**
 * Retry — how long the provider chain waits before trying a throttled or failing provider again.
 *
 * Prevents two failures. First, synchronised retry storms: when a provider sheds load, every session it dropped
 * retries; unjittered exponential backoff lines them up on the same instants and the provider is hit by the same
 * wave again and again. Jitter is not optional: in an alert storm unjittered retries synchronise. Second, a
 * throttled provider parking a session for hours: a Retry-After is obeyed only up to `Limits.retryAfterCapMs`
 * (60 s); beyond it the chain fails over at once instead of sleeping (a spend-limit reply once asked for
 * 274,579,000 ms, three days). Backoff without Retry-After never exceeds the same cap, so no single sleep does.
 *
 * The schedule: exponential from 500 ms (half a second is long enough for a load balancer to move us, short enough
 * that a blip costs the user nothing), factor 2, with EQUAL jitter — the wait before retrying after attempt `n` is
 * uniform in [c/2, c] where c = min(cap, 500 ms · 2^(n−1)). Equal rather than full jitter: full jitter spreads
 * retries slightly better but may retry a struggling provider after ~0 ms; half the ceiling is a guaranteed floor
 * while the random half still de-synchronises the herd. Randomness comes from Effect's `Random` service, so a test
 * that seeds it (`Effect.withRandom(Random.make(seed))`) sees the same delays every run.
 */
import { Duration, Effect, Option, Random } from "effect"

/** The first backoff ceiling, in milliseconds. */
export const baseMs = 500

/** How much the backoff ceiling grows per attempt. */
export const factor = 2

/**
 * The un-jittered ceiling of the wait after failed attempt `attempt` (1-based): `500 ms · 2^(attempt−1)`, never
 * above `capMs`. Attempts below 1 count as 1.
 */
export const ceilingFor = (attempt: number, capMs: number): number =>
  Math.min(capMs, baseMs * Math.pow(factor, Math.max(0, Math.floor(attempt) - 1)))

/**
 * The jittered wait after failed attempt `attempt`, in whole milliseconds: uniform in [ceiling/2, ceiling]
 * (equal jitter, see the module comment), drawn from the `Random` service. Never fails; never above `capMs`.
 */
export const jitteredMillis = (attempt: number, capMs: number): Effect.Effect<number> => {
  const ceiling = Math.max(0, Math.floor(ceilingFor(attempt, capMs)))
  const floor = Math.floor(ceiling / 2)
  // nextIntBetween's upper bound is exclusive: +1 makes the ceiling itself reachable.
  return Effect.map(Random.nextIntBetween(0, ceiling - floor + 1), (spread) => floor + spread)
}

/**
 * How long to wait after failed attempt `attempt` (1-based) before the next one, given the provider's Retry-After
 * (uncapped, milliseconds) and the cap:
 * - Retry-After given and ≤ cap → exactly that delay (the provider knows when it will take us back);
 * - Retry-After given and > cap → `None`: fail over now, do not sleep;
 * - no Retry-After → `Some` of the jittered exponential backoff, never above the cap.
 * Never fails.
 */
export const delayFor = (
  attempt: number,
  retryAfterMs: number | undefined,
  capMs: number
): Effect.Effect<Option.Option<Duration.Duration>> => {
  if (retryAfterMs !== undefined) {
    return Effect.succeed(
      retryAfterMs <= capMs ? Option.some(Duration.millis(Math.max(0, retryAfterMs))) : Option.none()
    )
  }
  return Effect.map(jitteredMillis(attempt, capMs), (millis) => Option.some(Duration.millis(millis)))
}
