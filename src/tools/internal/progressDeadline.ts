/**
 * The deadline of one MCP call that may report progress.
 *
 * A call gets `ms` (the server's `timeoutMs`, capped by the burst's effective `toolTimeoutMs`) of silence: every progress
 * notification proves the server is still working on it and restarts that window. Progress is not completion,
 * though — a server stuck in a loop that keeps reporting would hold the call (and the burst's tool phase) for ever —
 * so the window never reaches past a hard cap of `PROGRESS_CAP_FACTOR` × `ms` after the call started. At the
 * defaults (60 s per call) the cap is 5 min, the default active time of a whole session: a call cannot outlive its
 * burst's active-time deadline anyway, so a larger cap would never be reached, and a smaller one would cut off the
 * long, honestly reporting operations progress exists for.
 *
 * Time comes from Effect's `Clock`, so the window and the cap are tested with `TestClock`.
 */
import { Clock, Effect, Queue } from "effect"

/** The hard cap on a call that keeps reporting progress, as a multiple of its timeout (see the module header). */
export const PROGRESS_CAP_FACTOR = 5

/** Why the deadline passed: no progress for a whole window, or the hard cap. */
export type Expiry = "quiet" | "cap"

/**
 * Completes when the call's deadline passes: `ms` after it started, moved to `ms` after each signal on `progressed`,
 * never later than `capMs` after it started. Never fails.
 */
export const run = (ms: number, capMs: number, progressed: Queue.Dequeue<void>): Effect.Effect<Expiry> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeMillis
    const hardEnd = startedAt + Math.max(ms, capMs)
    let due = startedAt + ms
    // Whether progress asked for more than the cap allowed: only then did the cap, not silence, end the call.
    let clipped = false
    while (true) {
      const now = yield* Clock.currentTimeMillis
      if (now >= due) return clipped ? "cap" : "quiet"
      const signal = yield* Effect.raceFirst(
        Effect.as(Effect.sleep(due - now), "elapsed" as const),
        Effect.as(Queue.take(progressed), "progress" as const)
      )
      if (signal === "progress") {
        const wanted = (yield* Clock.currentTimeMillis) + ms
        clipped = wanted > hardEnd
        due = Math.min(wanted, hardEnd)
      }
    }
  })
