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
import * as Pairing from "../store/Pairing.js"
import type { Appended, SessionStore } from "../store/SessionStore.js"

/** The ports a transcript writer needs, resolved once per session. */
export interface Ports {
  readonly store: SessionStore["Type"]
  readonly events: SessionEvents["Type"]
}

/**
 * Appends `entry` to the session's transcript and publishes it — after the `tool_results` turn the store wrote first
 * when `entry` followed calls left without results (`closed`: the caller adds it to its conversation before
 * `entry`). Uninterruptible from the outside; fails with `PersistenceFailed` when the store fails or does not answer
 * within `timeoutMs`.
 */
export const append = (
  ports: Ports,
  sessionId: string,
  entry: TurnEntry,
  at: number,
  timeoutMs: number
): Effect.Effect<Appended, PersistenceFailed> =>
  // The store enforces the timeout where the append waits (SessionStore.appendTurn), so this runs in the caller's
  // own fiber with no timer and no forked fiber: at thousands of appends a second those were most of the runtime's
  // garbage, and the GC pauses they caused were the append latency's tail (docs/benchmarks.md, "Store").
  ports.store.appendTurn(sessionId, entry, at, timeoutMs).pipe(
    Effect.tap((appended) => {
      if (appended.closed === undefined) {
        return ports.events.publish({ _tag: "turn", sessionId, seq: appended.seq, turn: appended })
      }
      const { closed, ...turn } = appended
      return Effect.zipRight(
        ports.events.publish({ _tag: "turn", sessionId, seq: closed.seq, turn: closed }),
        ports.events.publish({ _tag: "turn", sessionId, seq: turn.seq, turn })
      )
    }),
    Effect.uninterruptible
  )

/**
 * Assistant turns (their sequence numbers) followed by a turn other than their results: calls left open in the
 * middle of a transcript, as stores wrote them before they closed open calls themselves (store/Pairing.ts).
 */
export const unpaired = (turns: ReadonlyArray<Turn>): Array<number> => {
  const out: Array<number> = []
  for (let i = 1; i < turns.length; i++) {
    if (Pairing.opens(turns[i - 1]!.entry) && Pairing.breaks(turns[i]!.entry)) out.push(turns[i - 1]!.seq)
  }
  return out
}

/**
 * The conversation a transcript holds: every entry, with calls left open in the middle of it (`unpaired`) closed
 * as the store now closes them (`Pairing.closing`: `unknown_outcome`, never re-run), so a provider is never sent
 * an unpaired call. The closing entries are the model's view only: stored turns keep their numbers. An unpaired
 * tail is repaired in the store (see `repairTail`).
 */
export const history = (turns: ReadonlyArray<Turn>): Array<TurnEntry> => {
  const out: Array<TurnEntry> = []
  for (let i = 0; i < turns.length; i++) {
    const entry = turns[i]!.entry
    const closing = i > 0 && Pairing.breaks(entry) ? Pairing.closing(turns[i - 1]!.entry) : undefined
    if (closing !== undefined) out.push(closing)
    out.push(entry)
  }
  return out
}
