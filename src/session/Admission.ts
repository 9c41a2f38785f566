/**
 * Admission — the per-process cap on bursts running at once.
 *
 * Prevents: overload collapse. Every accepted message is stored before it is acknowledged, so a spike of a thousand
 * starts is a thousand bursts that all want the CPU, the provider's connections and the store's pool at the same
 * moment. Unbounded, they all slow down together until their store calls run into the persistence timeout and land
 * `crashed` (measured: 1,000 at once on the 10-connection pool, docs/benchmarks.md). Capped, the surplus waits in
 * the session's durable inbox, in order of arrival, and a waiting session reads `running` (its message is accepted
 * and will run). Waiting costs nothing but memory for the message; a cancel during the wait ends the burst at once
 * (`cancelled`, without a model call) instead of keeping its place.
 *
 * The bound is a count, not a rate: a model that answers in seconds needs many bursts in flight to keep two cores
 * busy (CPU per turn ≈ 10 ms, model latency ≈ 1–3 s: a few hundred), so the default of 256 sits above what this
 * process can usefully run with real providers, and well below where a spike of starts breaks the pool.
 */
import { Deferred, Effect, Exit, FiberId } from "effect"

/** The default cap on bursts running at once in one process. */
export const defaultMaxRunning = 256

/** A process's admission gate. */
export interface Gate {
  /**
   * Runs `burst` once a place is free (at once when one is), first come first served, releasing the place when it
   * ends however it ends. A `cancel` completed while waiting lets `burst` run at once, without a place (it only
   * lands `cancelled`). Interruption while waiting gives up the turn in the queue.
   */
  readonly admit: <A, E, R>(burst: Effect.Effect<A, E, R>, cancel: Deferred.Deferred<void>) => Effect.Effect<A, E, R>
  /** Bursts holding a place now. */
  readonly running: () => number
  /** Bursts waiting for a place now. */
  readonly waiting: () => number
}

/** A gate admitting at most `max` bursts at once; `max` ≤ 0 or not finite admits every burst at once. */
export const make = (max: number): Gate => {
  if (!Number.isFinite(max) || max <= 0) {
    return { admit: (burst) => burst, running: () => 0, waiting: () => 0 }
  }
  let held = 0
  const queue: Array<Ticket> = []

  // A place handed to the next in line is never returned to the pool in between, so nobody overtakes the queue.
  const release = () => {
    const next = queue.shift()
    if (next === undefined) {
      held--
      return
    }
    next.granted = true
    Deferred.unsafeDone(next.deferred, Exit.void)
  }

  const admit = <A, E, R>(burst: Effect.Effect<A, E, R>, cancel: Deferred.Deferred<void>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      if (held < max) {
        held++
        return Effect.ensuring(burst, Effect.sync(release))
      }
      const ticket: Ticket = { deferred: Deferred.unsafeMake<void>(FiberId.none), granted: false }
      queue.push(ticket)
      // Out of the queue; a place granted meanwhile (the grant may race a cancel or an interruption) goes back.
      const leave = Effect.sync(() => {
        const at = queue.indexOf(ticket)
        if (at >= 0) queue.splice(at, 1)
        else if (ticket.granted) release()
      })
      return Effect.raceFirst(Deferred.await(ticket.deferred), Deferred.await(cancel)).pipe(
        Effect.onInterrupt(() => leave),
        Effect.zipRight(Effect.suspend(() =>
          ticket.granted
            ? Effect.ensuring(burst, Effect.sync(release))
            // Cancelled while waiting: out of the queue, and the burst only records its cancellation.
            : Effect.zipRight(leave, burst)
        ))
      )
    })

  return { admit, running: () => held, waiting: () => queue.length }
}

interface Ticket {
  readonly deferred: Deferred.Deferred<void>
  /** Set when a released place is handed to this ticket. */
  granted: boolean
}
