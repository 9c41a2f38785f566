/**
 * The `SessionEvents` port: live events per session, with replay from the store so that a client that reads the
 * transcript and then subscribes never misses a turn.
 */
import { Context } from "effect"
import type { Effect, Stream } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { SessionEvent } from "../domain/SessionEvent.js"

/** Publish after persist; subscribe from a sequence number. */
export class SessionEvents extends Context.Tag("corral/events/SessionEvents")<SessionEvents, {
  /** Broadcasts an event to the session's live subscribers. `turn` events must already be persisted. */
  readonly publish: (event: SessionEvent) => Effect.Effect<void>
  /**
   * Stored turns with `seq > fromSeq` (of `orgId`'s session), then live events, with no gap and no duplicate turn.
   * The stream does not end by itself.
   */
  readonly subscribe: (
    orgId: string,
    sessionId: string,
    fromSeq: number
  ) => Stream.Stream<SessionEvent, PersistenceFailed>
}>() {}
