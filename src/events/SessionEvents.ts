/**
 * The `SessionEvents` port: live events per session, with replay from the store so that a client that reads the
 * transcript and then subscribes never misses a turn.
 */
import { Context } from "effect"
import type { Effect, Stream } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { SessionEvent } from "../domain/SessionEvent.js"

/** How `subscribe` replays and when its stream ends. */
export interface SubscribeOptions {
  /**
   * Also replay the `exit` and `report` of every burst that landed after turn `fromSeq` (one landing right after
   * that turn included), each right after its last turn
   * (they are live-only otherwise, so a late subscriber would never see how earlier bursts ended).
   */
  readonly landings?: boolean
  /**
   * `"landed"`: the stream ends after the `report` of the burst that runs (or is accepted and waits) when the
   * subscription starts — and right after the replay when none does. Implies `landings`.
   */
  readonly until?: "landed"
}

/** Publish after persist; subscribe from a sequence number. */
export class SessionEvents extends Context.Tag("corral/events/SessionEvents")<SessionEvents, {
  /** Broadcasts an event to the session's live subscribers. `turn` events must already be persisted. */
  readonly publish: (event: SessionEvent) => Effect.Effect<void>
  /**
   * Stored turns with `seq > fromSeq` (of `orgId`'s session), then live events, with no gap and no duplicate turn.
   * The stream does not end by itself, unless `options.until` says when.
   */
  readonly subscribe: (
    orgId: string,
    sessionId: string,
    fromSeq: number,
    options?: SubscribeOptions
  ) => Stream.Stream<SessionEvent, PersistenceFailed>
}>() {}
