/**
 * Sync-first: run an effect on the spot and pay for concurrency only if it suspends.
 *
 * A model that answers from memory (a scripted model, a cache) or a tool that answers in-process finishes without
 * ever suspending; racing it against a timer (a fork for each side, a timer set and cleared) cost more than the call
 * itself (docs/benchmarks.md at 09f4c1e, "the turn path"). `start` runs the effect synchronously on a fresh fiber with the
 * caller's context (its services, span, log annotations, clock): `Done` with the exit when it finished, otherwise
 * `Suspended` with the fiber, which keeps running on the normal scheduler — and which the caller must join under its
 * bound and interrupt if it stops waiting (`within` does, with `boundedWait.joinWithin`: no further fiber). The
 * bound is then exactly what it was: the effect did not wait for anything outside the process before the fiber was
 * handed over.
 */
import { Cause, Effect, Exit, Option, Runtime } from "effect"
import type { Duration, Fiber } from "effect"
import * as BoundedWait from "./boundedWait.js"

/** The effect finished without suspending, or the fiber it still runs on. */
export type Started<A, E> =
  | { readonly _tag: "Done"; readonly exit: Exit.Exit<A, E> }
  | { readonly _tag: "Suspended"; readonly fiber: Fiber.RuntimeFiber<A, E> }

/** Runs `self` synchronously on a fresh fiber with `runtime`'s context (see the module comment). */
export const start = <A, E>(runtime: Runtime.Runtime<never>, self: Effect.Effect<A, E>): Started<A, E> => {
  const exit = Runtime.runSyncExit(runtime)(self)
  if (Exit.isFailure(exit)) {
    const defect = Cause.dieOption(exit.cause)
    if (Option.isSome(defect) && Runtime.isAsyncFiberException(defect.value)) {
      return { _tag: "Suspended", fiber: defect.value.fiber as Fiber.RuntimeFiber<A, E> }
    }
  }
  return { _tag: "Done", exit }
}

/**
 * Runs `self` sync-first: at once when it does not suspend (no fork, no timer), otherwise joins its fiber within
 * `duration` (failing with `onTimeout`) and interrupts it when the wait ends early (timeout or the caller's own
 * interruption). `adapt` changes the runtime `self` starts with — e.g. `Runtime.setFiberRef`, where
 * `Effect.locally` around `self` would enter and leave a region (two fiber-ref writes and an uninterruptible
 * acquire-use-release) on a fiber that only lives for `self`. The wait does not
 * merge the fiber's refs back into the caller's (internal/boundedWait), so nothing leaks out.
 */
export const within = <A, E, E2>(
  self: Effect.Effect<A, E>,
  duration: Duration.DurationInput,
  onTimeout: () => E2,
  adapt?: (runtime: Runtime.Runtime<never>) => Runtime.Runtime<never>
): Effect.Effect<A, E | E2> =>
  Effect.flatMap(Effect.runtime<never>(), (runtime) => {
    const started = start(adapt === undefined ? runtime : adapt(runtime), self)
    if (started._tag === "Done") return started.exit
    return BoundedWait.joinWithin(started.fiber, { duration, onTimeout })
  })
