/**
 * Bounded waits that start one fiber, not three.
 *
 * `Effect.timeoutFail(Effect.disconnect(self))`, which gave every store statement its deadline, forks the statement
 * (disconnect's daemon), then races it on a second fiber against the timer on a third (`raceFibersWith`) and
 * interrupts the loser: on the server path most of a model turn's fibers were started inside such operators
 * (docs/benchmarks.md at 09f4c1e, "The server path at 1,000 at once", has the count). Here the bounded effect runs on one fiber and the caller waits for it with
 * `Effect.async`: the fiber's exit (an observer) or the timer, whichever comes first. The timer is the caller's
 * `Clock`: a plain `setTimeout` under the live clock (which is all its sleep is), else the clock's own sleep on a
 * fiber, so a `TestClock` moves these deadlines as it moves any other.
 *
 * Unlike `Fiber.join`, the end of a wait does not merge the fiber's FiberRefs into the caller's (the sync-first path
 * never did either): what the bounded effect sets for itself stays with it.
 */
import { Clock, Context, Duration, Effect, Exit, Fiber, Runtime } from "effect"
import type { FiberId, RuntimeFlags } from "effect"
import { constVoid, dual } from "effect/Function"

/** How long to wait, and the failure when nothing came in time (as `Effect.timeoutFail` takes them). */
export interface Bound<E2> {
  readonly duration: Duration.DurationInput
  /** The failure; `waitedMs` is the whole wait (more than `duration` when `patience` gave it more time). */
  readonly onTimeout: (waitedMs: number) => E2
  /** Consulted when the bound runs out; a success of the bounded effect counts as an answer to it. */
  readonly patience?: Patience
}

/**
 * Lets a wait run past its bound while the other side is busy rather than gone (store/internal/overload.ts: a
 * database answering other statements).
 */
export interface Patience {
  /** Moves with every answer. */
  readonly answers: number
  /** Counts one answer. */
  answered(): void
  /**
   * At the end of a bound: how much longer (ms) a wait may go on that has waited `waitedMs` in all under a bound of
   * `timeoutMs`, having seen `seen` answers when it began (or last got more time); 0 to give up.
   */
  more(waitedMs: number, timeoutMs: number, seen: number): number
}

// Effect's live clock treats a sleep longer than a JS timer can hold as never ending; so does this.
const maxTimerMillis = 2 ** 31 - 1
const liveClock: unknown = Object.getPrototypeOf(Clock.make())

type Caller = Fiber.RuntimeFiber<unknown, unknown>

const runtimeOf = <R>(caller: Caller, runtimeFlags: RuntimeFlags.RuntimeFlags): Runtime.Runtime<R> =>
  Runtime.make({
    context: caller.currentContext as Context.Context<R>,
    runtimeFlags,
    fiberRefs: caller.getFiberRefs()
  })

/** Calls `fire` once `millis` passed on `caller`'s clock, unless the returned disarm ran first. */
const arm = (caller: Caller, runtimeFlags: RuntimeFlags.RuntimeFlags, millis: number, fire: () => void) => {
  const clock = Context.get(caller.currentDefaultServices, Clock.Clock)
  if (Object.getPrototypeOf(clock) === liveClock) {
    if (millis > maxTimerMillis) return constVoid
    const handle = setTimeout(fire, millis)
    return () => clearTimeout(handle)
  }
  // Started at once, so the sleep is registered with the clock before the caller next yields; interruptible even
  // when the caller is not, so a disarm ends it.
  const sleeper = Runtime.runFork(runtimeOf<never>(caller, runtimeFlags))(
    Effect.interruptible(clock.sleep(Duration.millis(millis)))
  )
  let armed = true
  sleeper.addObserver((exit) => {
    if (armed && Exit.isSuccess(exit)) fire()
  })
  const by = caller.id()
  return () => {
    armed = false
    sleeper.unsafeInterruptAsFork(by)
  }
}

const interruptInBackground = (fiber: Fiber.RuntimeFiber<unknown, unknown>, by: FiberId.FiberId) => {
  if (fiber.unsafePoll() === null) fiber.unsafeInterruptAsFork(by)
}

/**
 * Waits for `fiber` under `bound` (see the module comment). `abandon`: a timeout or the caller's interruption fails
 * the caller at once and interrupts the fiber in the background; otherwise both wait until the interrupted fiber
 * has ended. Must run under `uninterruptibleMask`, whose `restore` makes the wait itself interruptible: the cleanup
 * is installed before the caller can be interrupted.
 */
const race = <A, E, E2>(
  caller: Caller,
  runtimeFlags: RuntimeFlags.RuntimeFlags,
  fiber: Fiber.RuntimeFiber<A, E>,
  bound: Bound<E2>,
  abandon: boolean,
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>
): Effect.Effect<A, E | E2> => {
  const by = caller.id()
  const { patience } = bound
  const timeoutMs = Duration.toMillis(bound.duration)
  let waited = timeoutMs
  let seen = patience === undefined ? 0 : patience.answers
  let disarm: (() => void) | undefined
  let timedOut = false
  let observer: ((exit: Exit.Exit<A, E>) => void) | undefined
  const waiting = Effect.async<A, E | E2>((resume) => {
    observer = (exit) => {
      if (disarm !== undefined) disarm()
      if (patience !== undefined && !timedOut && Exit.isSuccess(exit)) patience.answered()
      resume(timedOut ? Effect.failSync(() => bound.onTimeout(waited)) : exit)
    }
    fiber.addObserver(observer)
    if (fiber.unsafePoll() !== null) return
    const fire = () => {
      const more = patience === undefined ? 0 : patience.more(waited, timeoutMs, seen)
      if (patience !== undefined && more > 0) {
        seen = patience.answers
        waited += more
        disarm = arm(caller, runtimeFlags, more, fire)
        return
      }
      disarm = undefined
      timedOut = true
      fiber.unsafeInterruptAsFork(by)
      if (abandon && observer !== undefined) {
        fiber.removeObserver(observer)
        resume(Effect.failSync(() => bound.onTimeout(waited)))
      }
    }
    disarm = arm(caller, runtimeFlags, timeoutMs, fire)
  })
  return Effect.onInterrupt(restore(waiting), () => {
    if (disarm !== undefined) disarm()
    if (observer !== undefined) fiber.removeObserver(observer)
    if (abandon) return Effect.sync(() => interruptInBackground(fiber, by))
    return Fiber.interruptAs(fiber, by)
  })
}

/**
 * `Effect.timeoutFail(Effect.disconnect(self), bound)` with one fiber: `self` runs on a daemon fiber; its exit is the
 * result (failures, defects and interruption unchanged). Once `bound.duration` passed the caller fails with
 * `bound.onTimeout()` at once and `self` is interrupted in the background, not waited for; an interrupted caller
 * interrupts it in the background too. `self` starts at once, so if it finishes without suspending there is no timer.
 */
export const disconnected: {
  <E2>(bound: Bound<E2>): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E | E2, R>
  <A, E, R, E2>(self: Effect.Effect<A, E, R>, bound: Bound<E2>): Effect.Effect<A, E | E2, R>
} = dual(
  2,
  <A, E, R, E2>(self: Effect.Effect<A, E, R>, bound: Bound<E2>): Effect.Effect<A, E | E2, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.withFiberRuntime<A, E | E2, R>((caller, status) => {
        const fiber = Runtime.runFork(runtimeOf<R>(caller, status.runtimeFlags))(restore(self))
        const early = fiber.unsafePoll()
        if (early !== null) return early
        return race(caller, status.runtimeFlags, fiber, bound, true, restore)
      })
    )
)

/**
 * `Fiber.join(fiber)` under `bound`, interrupting `fiber` when the wait ends early, as
 * `Fiber.join(fiber).pipe(Effect.onInterrupt(() => Fiber.interrupt(fiber)), Effect.timeoutFail(bound))` does but
 * without its two fibers: on a timeout the caller fails with `bound.onTimeout()` once the interrupted fiber has
 * ended; an interrupted caller, too, waits for it. Otherwise the fiber's exit is the result.
 */
export const joinWithin = <A, E, E2>(fiber: Fiber.RuntimeFiber<A, E>, bound: Bound<E2>): Effect.Effect<A, E | E2> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<A, E | E2>((caller, status) => {
      const done = fiber.unsafePoll()
      if (done !== null) return done
      return race(caller, status.runtimeFlags, fiber, bound, false, restore)
    })
  )
