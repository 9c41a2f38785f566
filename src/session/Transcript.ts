/**
 * Writing the transcript: persist, then broadcast.
 *
 * A turn is persisted before it is broadcast so a client that reads the transcript and then subscribes never misses
 * one. Appends run detached from the burst's cancellation (a cancel waits for the in-flight write instead of leaving
 * a half-written transcript) and carry their own timeout, so a stalled database fails the burst as infrastructure
 * rather than hanging it.
 */
import { Cause, Duration, Effect, Exit, Fiber, Option, Runtime } from "effect"
import { PersistenceFailed } from "../domain/Errors.js"
import type { Turn, TurnEntry } from "../domain/Message.js"
import type { SessionEvents } from "../events/SessionEvents.js"
import type { SessionStore } from "../store/SessionStore.js"

/** The ports a transcript writer needs, resolved once per session. */
export interface Ports {
  readonly store: SessionStore["Type"]
  readonly events: SessionEvents["Type"]
}

/**
 * Appends `entry` to the session's transcript and publishes it. Uninterruptible from the outside; fails with
 * `PersistenceFailed` when the store fails or does not answer within `timeoutMs`.
 */
export const append = (
  ports: Ports,
  sessionId: string,
  entry: TurnEntry,
  at: number,
  timeoutMs: number
): Effect.Effect<Turn, PersistenceFailed> =>
  Effect.flatMap(Effect.runtime<never>(), (runtime) => {
    // Sync-first: an in-memory store answers without suspending, so no timer and no fiber are needed. Only a write
    // that suspends (a database) is awaited against the timeout.
    const exit = Runtime.runSyncExit(runtime)(ports.store.appendTurn(sessionId, entry, at))
    const stored: Effect.Effect<Turn, PersistenceFailed> = Exit.isSuccess(exit)
      ? Effect.succeed(exit.value)
      : Option.match(Cause.dieOption(exit.cause), {
        onNone: () => exit,
        onSome: (defect) => Runtime.isAsyncFiberException(defect) ? awaitWrite(defect.fiber, timeoutMs) : exit
      })
    return stored.pipe(
      Effect.tap((turn) => ports.events.publish({ _tag: "turn", sessionId, seq: turn.seq, turn })),
      Effect.uninterruptible
    )
  })

/** Awaits a write that suspended; the write itself can be stopped by the timeout, never by the caller's cancel. */
const awaitWrite = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  timeoutMs: number
): Effect.Effect<Turn, PersistenceFailed> =>
  // The suspended fiber is the one running `appendTurn`, so its result is a Turn or a PersistenceFailed.
  (Fiber.join(fiber) as Effect.Effect<Turn, PersistenceFailed>).pipe(
    Effect.interruptible,
    Effect.timeoutFail({
      duration: Duration.millis(timeoutMs),
      onTimeout: () =>
        new PersistenceFailed({ operation: "appendTurn", message: `the store did not answer within ${timeoutMs} ms` })
    }),
    Effect.onError(() => Fiber.interrupt(fiber))
  )
