/**
 * The `SessionEvents` port: live events per session, with replay from the store so that a client that reads the
 * transcript and then subscribes never misses a turn.
 */
import { Chunk, Context, Effect, Option, Stream } from "effect"
import type { Scope } from "effect"
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

/**
 * An open subscription, read by pulling: the form a consumer that writes each batch somewhere (the server's SSE
 * body) uses without a Stream's stages between the session and its writes — those cost a followed turn as much as
 * running it (docs/benchmarks.md).
 */
export interface Subscription {
  /**
   * The next events in order: the replay first, then as many live events as are ready (waiting for at least one).
   * An empty array means the subscription has ended (only with `until`, or for a session `orgId` cannot see); it
   * stays ended. Fails with the store's `PersistenceFailed` when a gap must be read and cannot be.
   */
  readonly next: Effect.Effect<ReadonlyArray<SessionEvent>, PersistenceFailed>
}

/** Publish after persist; subscribe from a sequence number. */
export class SessionEvents extends Context.Tag("corral/events/SessionEvents")<SessionEvents, {
  /** Broadcasts an event to the session's live subscribers. `turn` events must already be persisted. */
  readonly publish: (event: SessionEvent) => Effect.Effect<void>
  /**
   * Stored turns with `seq > fromSeq` (of `orgId`'s session), then live events, with no gap and no duplicate turn.
   * The subscription lasts as long as the scope; it does not end by itself unless `options.until` says when. Fails
   * with the store's `PersistenceFailed` (the replay's reads).
   */
  readonly open: (
    orgId: string,
    sessionId: string,
    fromSeq: number,
    options?: SubscribeOptions
  ) => Effect.Effect<Subscription, PersistenceFailed, Scope.Scope>
  /** `open` as a stream (one chunk per `next`). */
  readonly subscribe: (
    orgId: string,
    sessionId: string,
    fromSeq: number,
    options?: SubscribeOptions
  ) => Stream.Stream<SessionEvent, PersistenceFailed>
}>() {}

/** A service with `open` and what goes with it, completed with `subscribe` (`open` as a stream). */
export const withSubscribe = <S extends Omit<Context.Tag.Service<SessionEvents>, "subscribe">>(
  service: S
): S & Pick<Context.Tag.Service<SessionEvents>, "subscribe"> => ({
  ...service,
  subscribe: (orgId, sessionId, fromSeq, options) => toStream(service.open(orgId, sessionId, fromSeq, options))
})

/** A subscription's events as a stream, one chunk per `next`, ending when it ends. */
export const toStream = <E, R>(
  open: Effect.Effect<Subscription, E, R | Scope.Scope>
): Stream.Stream<SessionEvent, E | PersistenceFailed, Exclude<R, Scope.Scope>> =>
  Stream.unwrapScoped(Effect.map(open, (subscription) =>
    Stream.repeatEffectChunkOption(
      Effect.matchEffect(subscription.next, {
        onFailure: (error) => Effect.fail(Option.some(error)),
        onSuccess: (events) =>
          events.length === 0 ? Effect.fail(Option.none()) : Effect.succeed(Chunk.unsafeFromArray(events))
      })
    )))
