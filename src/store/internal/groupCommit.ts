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
 * A caller interrupted before a writer takes its item withdraws it (it is never written); once the item is in
 * flight, the outcome is whatever the database did.
 *
 * Deadlines: a caller may give its item a timeout. A database that stops answering (a hung statement, a lost
 * connection the socket has not noticed yet) would otherwise hold every caller queued behind it forever, so one sweeper
 * per group commit fails each item whose deadline has passed with `timedOut`, whether it is still queued or already
 * in flight; a queued item that timed out is never written. An in-flight one may still commit: its caller saw a
 * failure, and the next read shows whether it landed. Given `patience` (internal/overload.ts), an item whose deadline
 * passes while the database goes on answering (this group commit's batches, or whatever else counts) gets more time
 * instead, up to its ceiling: a flood of work is not an outage. The deadline lives here, on the item, rather than in a timeout
 * around the caller's Effect: that costs a timer and two forked fibers per call, and on the append path of a
 * thousand sessions those short-lived fibers were most of the garbage behind the store's latency tail (measured,
 * docs/benchmarks.md "Store").
 */
import { Array as Arr, Clock, Duration, Effect, Exit } from "effect"
import type { Fiber, Scope } from "effect"
import type { Patience } from "../../internal/boundedWait.js"

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
  /**
   * The failure given to an item not written within its timeout (`waitedMs`: since it was submitted; `extended`:
   * `patience` gave it more time first).
   */
  readonly timedOut: (item: A, waitedMs: number, extended: boolean) => E
  /** How often deadlines are checked (default 100 ms): an item fails at most this much after its deadline. */
  readonly sweepEvery?: Duration.DurationInput
  /**
   * Consulted at an item's deadline: more time while the database answers others (internal/overload.ts). Every
   * batch written counts as an answer.
   */
  readonly patience?: Patience
}

/**
 * One submitted item. A class, not an object literal with a closure: one allocation per item, and no per-item
 * function (which tsx, compiling with esbuild's `keepNames`, would also name with a `defineProperty` call).
 */
class Pending<A, B, E> {
  constructor(
    readonly item: A,
    /** The Effect.async callback that completes the caller's Effect. */
    private readonly callback: (outcome: Effect.Effect<B, E>) => void,
    /** The fiber waiting for the outcome. */
    private readonly caller: Fiber.RuntimeFiber<B, E>,
    /** When it was submitted (Clock milliseconds). */
    readonly submittedAt: number,
    /** Its timeout (ms; Infinity: none). */
    readonly timeoutMs: number,
    /** The answers `patience` had counted when it was submitted, or last given more time. */
    public seen: number
  ) {
    this.deadline = submittedAt + timeoutMs
  }
  /** When it fails unwritten (Clock milliseconds; Infinity: never); later when `patience` gives it more time. */
  deadline: number
  /** Whether `patience` gave it more time. */
  extended = false
  private resumed = false
  /** Whether its caller already has an outcome (a timeout, before or while the item was written). */
  get done(): boolean {
    return this.resumed
  }
  /** Completes the caller's Effect; only the first call counts (result, batch failure, timeout, or shutdown). */
  resume(outcome: Exit.Exit<B, E>): void {
    if (this.resumed) return
    this.resumed = true
    this.callback(outcome)
  }
  /**
   * The caller has stopped waiting. It waits until `resume`, so having ended means it was interrupted. Checked
   * when a writer takes the item, instead of registering a canceler per item: a canceler makes Effect wrap every
   * submission in an interruption handler, which cost more than the rest of the submission (measured).
   */
  get withdrawn(): boolean {
    return this.caller.unsafePoll() !== null
  }
}

/**
 * One lane: its queue (a plain array: only this module touches it), the batches its writer took and is writing, and
 * its writer's wake-up call when idle.
 */
interface Lane<A, B, E> {
  queue: Array<Pending<A, B, E>>
  taken: Array<Array<Pending<A, B, E>>>
  wake: (() => void) | undefined
}

/**
 * Resumes on the event loop's next check phase. A writer woken by the first item yields here once before taking its
 * batch, so everything that the pending I/O and timer callbacks are about to submit joins the batch. Without it, a
 * database that answers within microtasks (the embedded PGlite) never lets those callbacks run between batches:
 * the writer then takes one item at a time and group commit silently stops grouping (measured: batches of 1 and a
 * tenth of the throughput under paced load).
 */
const nextTurnOfEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/** FNV-1a: a stable, cheap spread of keys over lanes. */
const hash = (key: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193)
  return h >>> 0
}

// A lane's writer, in steps: wait for work (`idle`), take the queued items as batches (`take`), write each
// (`writeBatch`) and give every item its outcome (`settle`).

/** Takes up to `maxItems` from the lane and splits them into batches under the weight cap, preserving order. */
const take = <A, B, E>(
  lane: Lane<A, B, E>,
  maxItems: number,
  options: Options<A, B, E>
): Array<Array<Pending<A, B, E>>> => {
  const taken = lane.queue.length <= maxItems ? lane.queue : lane.queue.slice(0, maxItems)
  lane.queue = lane.queue.length <= maxItems ? [] : lane.queue.slice(maxItems)
  const batches: Array<Array<Pending<A, B, E>>> = []
  let current: Array<Pending<A, B, E>> = []
  let weight = 0
  for (const pending of taken) {
    if (pending.done || pending.withdrawn) continue
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

/** Gives each item of a written batch its own outcome, or the whole write's failure. */
const settle = <A, B, E>(
  batch: ReadonlyArray<Pending<A, B, E>>,
  exit: Exit.Exit<ReadonlyArray<Exit.Exit<B, E>>, E>
): void => {
  for (let i = 0; i < batch.length; i++) {
    const pending = batch[i]!
    if (Exit.isFailure(exit)) pending.resume(Exit.failCause(exit.cause))
    else {
      pending.resume(
        exit.value[i] ?? Exit.die(new Error(`group commit: write returned no result for item ${i}`))
      )
    }
  }
}

/** Writes one batch and settles its items (`patience` counts a written batch as an answer). */
const writeBatch = <A, B, E>(taken: Array<Pending<A, B, E>>, options: Options<A, B, E>): Effect.Effect<void> => {
  // Items that timed out while an earlier batch of the same take was being written are not written.
  const batch = taken.some((p) => p.done) ? taken.filter((p) => !p.done) : taken
  const items = batch.map((p) => p.item)
  if (!Arr.isNonEmptyReadonlyArray(items)) return Effect.void
  // Interrupted mid-batch (the scope is closing), the batch is still in `lane.taken`, and the finalizer fails it:
  // nobody is left waiting. Not an `Effect.onInterrupt` here: that handler, once per batch, kept every batch's items
  // (their payloads) reachable from garbage the young-generation collector has to treat as live, doubling what the
  // scavenges copied and the pauses that make the latency tail (`scripts/bench/fiberGc.ts session`: p99 19–25 →
  // 8–13 ms; docs/benchmarks.md, "Store").
  return options.write(items).pipe(
    Effect.exit,
    Effect.flatMap((exit) =>
      Effect.sync(() => {
        if (options.patience !== undefined && Exit.isSuccess(exit)) options.patience.answered()
        settle(batch, exit)
      })
    )
  )
}

/** Suspends the writer until its lane has work. */
const idle = <A, B, E>(lane: Lane<A, B, E>): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (lane.queue.length > 0) return resume(Effect.void)
    lane.wake = () => {
      lane.wake = undefined
      resume(Effect.void)
    }
    return Effect.sync(() => {
      lane.wake = undefined
    })
  })

/**
 * Starts the lane writers (and the deadline sweeper) in the current scope and returns the submit function: it
 * resolves with the item's own result once its batch was written, or fails with the item's error, the batch's
 * error, `timedOut` when `timeoutMs` passed first, or `closed()` after the scope closed.
 */
export const make = <A, B, E>(
  options: Options<A, B, E>
): Effect.Effect<(item: A, timeoutMs?: number) => Effect.Effect<B, E>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const laneCount = Math.max(1, Math.floor(options.lanes))
    const maxItems = Math.max(1, Math.floor(options.maxItems))
    const window = Duration.decode(options.window ?? Duration.zero)
    const sweepEvery = Duration.decode(options.sweepEvery ?? Duration.millis(100))
    const { patience } = options
    const lanes: Array<Lane<A, B, E>> = Array.from({ length: laneCount }, () => ({
      queue: [],
      taken: [],
      wake: undefined
    }))
    let closed = false

    // Plain callbacks and arrays instead of a Queue and a Deferred per item: on the append path of a thousand
    // sessions the Effect bookkeeping per item cost more than the item's share of the INSERT (measured).

    const writer = (lane: Lane<A, B, E>) =>
      Effect.gen(function*() {
        yield* idle(lane)
        yield* nextTurnOfEventLoop
        if (Duration.toMillis(window) > 0) yield* Effect.sleep(window)
        lane.taken = take(lane, maxItems, options)
        for (const batch of lane.taken) yield* writeBatch(batch, options)
        lane.taken = []
      }).pipe(Effect.forever)

    /**
     * Fails every queued or in-flight item whose deadline has passed; tells whether an item with a deadline is still
     * waiting (the sweeper parks when none is, so an idle store, or a test's TestClock, has no timer to run).
     */
    const sweep = Effect.map(Clock.currentTimeMillis, (now) => {
      let waiting = false
      const expire = (pending: Pending<A, B, E>) => {
        if (pending.done || pending.deadline === Infinity) return
        if (pending.deadline <= now) {
          const waited = now - pending.submittedAt
          const more = patience === undefined ? 0 : patience.more(waited, pending.timeoutMs, pending.seen)
          if (patience === undefined || more <= 0) {
            pending.resume(Exit.fail(options.timedOut(pending.item, waited, pending.extended)))
            return
          }
          pending.seen = patience.answers
          pending.deadline = now + more
          pending.extended = true
        }
        waiting = true
      }
      for (const lane of lanes) {
        for (const pending of lane.queue) expire(pending)
        for (const batch of lane.taken) for (const pending of batch) expire(pending)
      }
      return waiting
    })

    /** The parked sweeper's wake-up call, made by a submission with a deadline. */
    let wakeSweeper: (() => void) | undefined
    const parked = Effect.async<void>((resume) => {
      wakeSweeper = () => {
        wakeSweeper = undefined
        resume(Effect.void)
      }
      return Effect.sync(() => {
        wakeSweeper = undefined
      })
    })
    const sweeper = Effect.gen(function*() {
      yield* parked
      while (true) {
        yield* Effect.sleep(sweepEvery)
        if (!(yield* sweep)) yield* parked
      }
    })

    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        closed = true
        for (const lane of lanes) {
          const left = lane.queue
          lane.queue = []
          for (const pending of left) pending.resume(Exit.fail(options.closed()))
          // The batch a writer was interrupted in (the writers stop before this runs: forked later, closed earlier).
          for (const batch of lane.taken) for (const pending of batch) pending.resume(Exit.fail(options.closed()))
        }
      })
    )
    for (const lane of lanes) yield* Effect.forkScoped(writer(lane))
    yield* Effect.forkScoped(sweeper)

    const enqueue = (item: A, submittedAt: number, timeoutMs: number): Effect.Effect<B, E> =>
      Effect.withFiberRuntime<B, E>((caller) =>
        Effect.async<B, E>((resume) => {
          if (closed) return resume(Exit.fail(options.closed()))
          const lane = lanes[laneCount === 1 ? 0 : hash(options.key(item)) % laneCount]!
          lane.queue.push(
            new Pending(item, resume, caller, submittedAt, timeoutMs, patience === undefined ? 0 : patience.answers)
          )
          lane.wake?.()
          if (timeoutMs !== Infinity) wakeSweeper?.()
        })
      )

    return (item: A, timeoutMs?: number): Effect.Effect<B, E> =>
      timeoutMs === undefined
        ? enqueue(item, 0, Infinity)
        : Effect.clockWith((clock) => enqueue(item, clock.unsafeCurrentTimeMillis(), timeoutMs))
  })
