/**
 * Group commit: many callers' writes leave in few statements.
 *
 * Under a thousand concurrent sessions, one INSERT per turn spends its time on round trips and commits, not on
 * rows. Here every write is queued on a lane and a single writer per lane takes whatever queued while its previous
 * batch was in flight (optionally after lingering a short window) and hands it to `write` as one batch. An idle
 * store therefore writes a lone turn at once (no added latency), and a busy one amortises each commit over
 * hundreds of rows.
 *
 * Ordering: an item's key always maps to the same lane, and a lane writes its batches one after another, so two
 * writes with the same key (one session's turns) reach the database in the order they were submitted. Lanes run
 * concurrently, so keys never wait on another lane's statement.
 *
 * Durability: a caller's Effect completes only with its own item's outcome from `write`, after the statement that
 * carried it returned; nothing is acknowledged before it is committed (persist-before-broadcast relies on it).
 * A caller interrupted while its item is still queued withdraws the item (it is never written); once the item is
 * in flight, the outcome is whatever the database did.
 */
import { Array as Arr, Deferred, Duration, Effect, Exit, Queue } from "effect"
import type { Scope } from "effect"

/** How batches are formed and written. */
export interface Options<A, B, E> {
  /** Batches in flight at once (at least 1). */
  readonly lanes: number
  /** Most items in one batch. */
  readonly maxItems: number
  /** Most total `weight` in one batch (a single heavier item still goes alone). */
  readonly maxWeight: number
  /** Items with the same key keep their submission order. */
  readonly key: (item: A) => string
  /** An item's size, counted against `maxWeight` (e.g. payload bytes). */
  readonly weight: (item: A) => number
  /** How long a writer waits after the first item of a batch for more to arrive; zero (default) waits for none. */
  readonly window?: Duration.DurationInput
  /**
   * Writes one batch and returns one Exit per item, in input order; a failure of the whole Effect fails every
   * item of the batch with it (the batch is expected to be atomic: one statement).
   */
  readonly write: (batch: Arr.NonEmptyReadonlyArray<A>) => Effect.Effect<ReadonlyArray<Exit.Exit<B, E>>, E>
  /** The failure given to items still queued or in flight when the scope closes. */
  readonly closed: () => E
}

interface Pending<A, B, E> {
  readonly item: A
  readonly done: Deferred.Deferred<B, E>
  /** Taken by a writer: from here on, interrupting the caller no longer withdraws the item. */
  taken: boolean
  withdrawn: boolean
}

/** FNV-1a: a stable, cheap spread of keys over lanes. */
const hash = (key: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  return h >>> 0
}

/**
 * Starts the lane writers in the current scope and returns the submit function: it resolves with the item's own
 * result once its batch was written, or fails with the item's error, the batch's error, or `closed()` after the
 * scope closed.
 */
export const make = <A, B, E>(options: Options<A, B, E>): Effect.Effect<(item: A) => Effect.Effect<B, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const laneCount = Math.max(1, Math.floor(options.lanes))
    const maxItems = Math.max(1, Math.floor(options.maxItems))
    const window = Duration.decode(options.window ?? Duration.zero)
    const queues: Array<Queue.Queue<Pending<A, B, E>>> = []
    for (let i = 0; i < laneCount; i++) queues.push(yield* Queue.unbounded<Pending<A, B, E>>())
    let closed = false

    /** Splits what a lane took into batches under the weight cap, preserving order. */
    const split = (taken: ReadonlyArray<Pending<A, B, E>>): Array<Array<Pending<A, B, E>>> => {
      const batches: Array<Array<Pending<A, B, E>>> = []
      let current: Array<Pending<A, B, E>> = []
      let weight = 0
      for (const pending of taken) {
        if (pending.withdrawn) continue
        const w = options.weight(pending.item)
        if (current.length > 0 && weight + w > options.maxWeight) {
          batches.push(current)
          current = []
          weight = 0
        }
        current.push(pending)
        weight += w
      }
      if (current.length > 0) batches.push(current)
      return batches
    }

    const writeBatch = (batch: Array<Pending<A, B, E>>) => {
      const items = batch.map((p) => p.item)
      if (!Arr.isNonEmptyReadonlyArray(items)) return Effect.void
      return options.write(items).pipe(
        Effect.exit,
        Effect.flatMap((exit) =>
          Effect.forEach(batch, (pending, i) => {
            if (Exit.isFailure(exit)) return Deferred.failCause(pending.done, exit.cause)
            const own = exit.value[i]
            return own === undefined
              ? Deferred.die(pending.done, new Error(`group commit: write returned no result for item ${i}`))
              : Deferred.done(pending.done, own)
          }, { discard: true })
        ),
        // Interrupted mid-batch (the scope is closing): nobody may be left waiting forever.
        Effect.onInterrupt(() =>
          Effect.forEach(batch, (pending) => Deferred.fail(pending.done, options.closed()), { discard: true })
        )
      )
    }

    const writer = (queue: Queue.Queue<Pending<A, B, E>>) =>
      Effect.gen(function*() {
        const first = yield* Queue.take(queue)
        if (Duration.toMillis(window) > 0) yield* Effect.sleep(window)
        const rest = yield* Queue.takeUpTo(queue, maxItems - 1)
        const taken = [first, ...rest]
        for (const pending of taken) pending.taken = true
        for (const batch of split(taken)) yield* writeBatch(batch)
      }).pipe(Effect.forever)

    yield* Effect.addFinalizer(() =>
      Effect.gen(function*() {
        closed = true
        for (const queue of queues) {
          const left = yield* Queue.takeAll(queue)
          for (const pending of left) yield* Deferred.fail(pending.done, options.closed())
        }
      })
    )
    for (const queue of queues) yield* Effect.forkScoped(writer(queue))

    return (item: A): Effect.Effect<B, E> =>
      Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          if (closed) return yield* Effect.fail(options.closed())
          const done = yield* Deferred.make<B, E>()
          const pending: Pending<A, B, E> = { item, done, taken: false, withdrawn: false }
          const queue = queues[hash(options.key(item)) % laneCount]!
          yield* Queue.offer(queue, pending)
          return yield* restore(Deferred.await(done)).pipe(
            Effect.onInterrupt(() =>
              Effect.sync(() => {
                if (!pending.taken) pending.withdrawn = true
              })
            )
          )
        })
      )
  })
