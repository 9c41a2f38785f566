/**
 * Writing the transcript: persist, then broadcast.
 *
 * A turn is persisted before it is broadcast so a client that reads the transcript and then subscribes never misses
 * one. Appends run detached from the burst's cancellation (a cancel waits for the in-flight write instead of leaving
 * a half-written transcript) and carry their own timeout, enforced by the store, so a stalled database fails the
 * burst as infrastructure rather than hanging it.
 */
import { Effect } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
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
  // The store enforces the timeout where the append waits (SessionStore.appendTurn), so this runs in the caller's
  // own fiber with no timer and no forked fiber: at thousands of appends a second those were most of the runtime's
  // garbage, and the GC pauses they caused were the append latency's tail (docs/benchmarks.md, "Store").
  ports.store.appendTurn(sessionId, entry, at, timeoutMs).pipe(
    Effect.tap((turn) => ports.events.publish({ _tag: "turn", sessionId, seq: turn.seq, turn })),
    Effect.uninterruptible
  )
