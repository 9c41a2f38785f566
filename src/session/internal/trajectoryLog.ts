/**
 * The open trajectory of a running burst, saved as it goes.
 *
 * A process that dies mid-burst must not take the burst's model attempts and their usage with it: usage is billed
 * whatever happened. So after every model attempt and every persisted turn the burst "touches" its log, and the log
 * saves the trajectory as it stands (`open: true`). Saves never delay the burst: one writer fiber at a time, and
 * touches that arrive while it writes coalesce into one more save of the latest state (latest wins, so a busy
 * store sees at most one save in flight per burst). A failed provisional save is only logged: the landing's save,
 * which `close` orders after any provisional one, is the one that counts.
 */
import { Effect, Fiber } from "effect"
import type { PersistenceFailed } from "../../domain/Errors.js"
import type { Trajectory } from "../../domain/Trajectory.js"

/** A burst's trajectory log. */
export interface TrajectoryLog {
  /** Schedules a save of the trajectory as it stands now; returns at once. */
  readonly touch: Effect.Effect<void>
  /** Stops further provisional saves and waits for the one in flight (so the landing's save comes last). */
  readonly close: Effect.Effect<void>
}

/** A log that saves what `build` gives (the trajectory as it stands) through `save`. */
export const make = (
  save: (trajectory: Trajectory) => Effect.Effect<void, PersistenceFailed>,
  build: Effect.Effect<Trajectory>,
  onError: (error: PersistenceFailed) => Effect.Effect<void>
): TrajectoryLog => {
  let writer: Fiber.RuntimeFiber<void> | undefined
  let dirty = false
  let closed = false

  const write: Effect.Effect<void> = Effect.suspend(() => {
    dirty = false
    return Effect.flatMap(build, save).pipe(
      Effect.catchAll(onError),
      Effect.zipRight(Effect.suspend(() => (dirty && !closed ? write : Effect.sync(() => (writer = undefined)))))
    )
  })

  return {
    touch: Effect.suspend(() => {
      if (closed) return Effect.void
      if (writer !== undefined) {
        dirty = true
        return Effect.void
      }
      return Effect.map(Effect.forkDaemon(write), (fiber) => {
        // The writer may already have finished (a store that answers synchronously): keep only a live one.
        if (fiber.unsafePoll() === null) writer = fiber
      })
    }),
    close: Effect.suspend(() => {
      closed = true
      const current = writer
      return current === undefined ? Effect.void : Fiber.await(current).pipe(Effect.asVoid)
    })
  }
}
