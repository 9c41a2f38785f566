/**
 * The open trajectory of a running burst, saved as it goes.
 *
 * A process that dies mid-burst must not take the burst's model attempts and their usage with it: usage is billed
 * whatever happened. So after every model attempt and every persisted turn the burst "touches" its log, and the log
 * saves the trajectory as it stands (`open: true`). Saves never delay the burst: one writer fiber per burst, woken
 * by a latch, so a touch costs a latch opening (no effect: a plain call); a save runs `spacingMs` after the touch that woke it, and every touch
 * meanwhile (or while it writes) joins it or the next one: latest wins, at most one save in flight per burst and at
 * most one every `spacingMs`. Why 250 ms: a real model call takes seconds, so every attempt is saved on its own well
 * before the next; a burst of sub-millisecond turns (workload A) that saved per touch spent ~10 % of its time per
 * turn on it, and now saves nothing provisional. What a crash can take is the last `spacingMs` of a burst. A failed provisional save is only
 * logged: the landing's save, which `close` orders after any provisional one, is the one that counts.
 *
 * Provisional saves are insurance, never worth starving the turns' own writes: at most `inFlight` run at once in the
 * process, whatever the number of bursts. A burst whose save waits for a slot keeps running, its touches meanwhile
 * join that save, and the save writes the trajectory as it stands when the slot comes (latest wins). Without the cap,
 * 300 bursts at once each saved four times a second once their turns slowed under load; those saves took most of the
 * database pool, and the turns' appends and state saves ran into the pool's bound and crashed their bursts
 * (docs/benchmarks.md at 09f4c1e, "the server path"). Two slots: one save can wait on a slow statement while another proceeds.
 *
 * The writer is a child of the burst's fiber: if the burst is interrupted without closing its log (the process is
 * shutting down), the writer goes with it.
 */
import { Effect, Fiber } from "effect"
import type { PersistenceFailed } from "../../domain/Errors.js"
import type { Trajectory } from "../../domain/Trajectory.js"

/** A burst's trajectory log. */
export interface TrajectoryLog {
  /**
   * Schedules a save of the trajectory as it stands now; returns at once. A plain function, not an effect: it runs
   * after every turn and attempt, and only opens a latch.
   */
  readonly touch: () => void
  /** Stops further provisional saves and waits for the one in flight (so the landing's save comes last). */
  readonly close: Effect.Effect<void>
}

/** The least time between two provisional saves of one burst (see the module header). */
export const spacingMs = 250

/** Provisional saves in flight at once in the process (see the module header). */
export const inFlight = 2
const slots = Effect.unsafeMakeSemaphore(inFlight)

/** A log that saves what `build` gives (the trajectory as it stands) through `save`; starts its writer. */
export const make = (
  save: (trajectory: Trajectory) => Effect.Effect<void, PersistenceFailed>,
  build: Effect.Effect<Trajectory>,
  onError: (error: PersistenceFailed) => Effect.Effect<void>
): Effect.Effect<TrajectoryLog> =>
  Effect.gen(function*() {
    const wake = yield* Effect.makeLatch(false)
    // Held while a save runs: `close` takes it, so no provisional save can start (or still run) after it.
    const writing = yield* Effect.makeSemaphore(1)
    let closed = false
    const writer = yield* Effect.fork(Effect.forever(Effect.gen(function*() {
      yield* wake.await
      // Debounced: the touches of the next `spacingMs` join this save, and a burst shorter than that saves nothing
      // provisional at all (its landing saves the whole trajectory).
      yield* Effect.sleep(spacingMs)
      yield* wake.close
      yield* slots.withPermits(1)(
        writing.withPermits(1)(
          Effect.suspend(() => closed ? Effect.void : Effect.flatMap(build, save).pipe(Effect.catchAll(onError)))
        )
      )
    })))
    return {
      touch: () => {
        if (!closed) wake.unsafeOpen()
      },
      close: Effect.suspend(() =>
        closed ? Effect.void : writing.withPermits(1)(Effect.sync(() => {
          closed = true
        })).pipe(Effect.zipRight(Fiber.interrupt(writer)), Effect.asVoid)
      )
    }
  })
