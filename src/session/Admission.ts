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
   * ends however it ends. A burst whose `cancel` is completed — and the gate told so with `cancelled` — runs at once
   * while it waits (or when it comes to wait), without a place (it only lands `cancelled`). Interruption while
   * waiting gives up the turn in the queue.
   */
  readonly admit: <A, E, R>(burst: Effect.Effect<A, E, R>, cancel: Deferred.Deferred<void>) => Effect.Effect<A, E, R>
  /**
   * Tells the gate that `cancel` was completed, by whoever completes it. A waiting burst learns of its cancel from
   * this call instead of racing its turn against the cancel — a race forks two fibers for every burst that waits,
   * thousands of them in a spike of starts.
   */
  readonly cancelled: (cancel: Deferred.Deferred<void>) => void
  /** Bursts holding a place now. */
  readonly running: () => number
  /** Bursts waiting for a place now. */
  readonly waiting: () => number
}

/** A gate admitting at most `max` bursts at once; `max` ≤ 0 or not finite admits every burst at once. */
export const make = (max: number): Gate => {
  if (!Number.isFinite(max) || max <= 0) {
    return { admit: (burst) => burst, cancelled: () => {}, running: () => 0, waiting: () => 0 }
  }
  let held = 0
  const queue: Array<Ticket> = []
  // The waiting tickets by their burst's cancel, and the cancels already completed (one may come before its wait).
  const waitingBy = new Map<Deferred.Deferred<void>, Ticket>()
  const done = new WeakSet<Deferred.Deferred<void>>()

  // A place handed to the next in line is never returned to the pool in between, so nobody overtakes the queue.
  const release = () => {
    const next = queue.shift()
    if (next === undefined) {
      held--
      return
    }
    waitingBy.delete(next.cancel)
    next.granted = true
    Deferred.unsafeDone(next.deferred, Exit.void)
  }

  const cancelled = (cancel: Deferred.Deferred<void>): void => {
    done.add(cancel)
    const ticket = waitingBy.get(cancel)
    if (ticket === undefined) return
    // Woken without a place: out of the queue, and the burst only records its cancellation.
    waitingBy.delete(cancel)
    const at = queue.indexOf(ticket)
    if (at >= 0) queue.splice(at, 1)
    Deferred.unsafeDone(ticket.deferred, Exit.void)
  }

  const admit = <A, E, R>(burst: Effect.Effect<A, E, R>, cancel: Deferred.Deferred<void>): Effect.Effect<A, E, R> =>
    Effect.suspend(() => {
      if (held < max) {
        held++
        return Effect.ensuring(burst, Effect.sync(release))
      }
      // Cancelled before it came to wait: it goes in at once, without a place.
      if (done.has(cancel)) return burst
      const ticket: Ticket = { deferred: Deferred.unsafeMake<void>(FiberId.none), cancel, granted: false }
      queue.push(ticket)
      waitingBy.set(cancel, ticket)
      // Out of the queue; a place granted meanwhile (the grant may race an interruption) goes back.
      const leave = Effect.sync(() => {
        waitingBy.delete(cancel)
        const at = queue.indexOf(ticket)
        if (at >= 0) queue.splice(at, 1)
        else if (ticket.granted) release()
      })
      return Deferred.await(ticket.deferred).pipe(
        Effect.onInterrupt(() => leave),
        Effect.zipRight(Effect.suspend(() =>
          ticket.granted
            ? Effect.ensuring(burst, Effect.sync(release))
            // Cancelled while waiting (`cancelled` took it out of the queue): the burst records its cancellation.
            : burst
        ))
      )
    })

  return { admit, cancelled, running: () => held, waiting: () => queue.length }
}

interface Ticket {
  readonly deferred: Deferred.Deferred<void>
  readonly cancel: Deferred.Deferred<void>
  /** Set when a released place is handed to this ticket. */
  granted: boolean
}
