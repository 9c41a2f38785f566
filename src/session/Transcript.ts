/**
 * Writing the transcript: persist, then broadcast.
 *
 * A turn is persisted before it is broadcast so a client that reads the transcript and then subscribes never misses
 * one. Appends run detached from the burst's cancellation (a cancel waits for the in-flight write instead of leaving
 * a half-written transcript) and carry their own timeout, so a stalled database fails the burst as infrastructure
 * rather than hanging it.
 */
import { Duration, Effect } from "effect"
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
  ports.store.appendTurn(sessionId, entry, at).pipe(
    // The write itself stays interruptible so the timeout can stop it; the caller's cancel cannot (see header).
    Effect.interruptible,
    Effect.timeoutFail({
      duration: Duration.millis(timeoutMs),
      onTimeout: () =>
        new PersistenceFailed({ operation: "appendTurn", message: `the store did not answer within ${timeoutMs} ms` })
    }),
    Effect.tap((turn) => ports.events.publish({ _tag: "turn", sessionId, seq: turn.seq, turn })),
    Effect.uninterruptible
  )
