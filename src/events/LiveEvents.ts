/**
 * LiveEvents — the `SessionEvents` port: a PubSub per watched session plus replay from the store.
 *
 * A session nobody watches costs nothing: `publish` finds no hub and returns. The hub is created by the first
 * subscriber and dropped when the last one leaves.
 *
 * No gap, no duplicate: `subscribe` joins the hub FIRST and only then reads the store. Turns are persisted before
 * they are published, so any turn missing from the read is still to be published to a subscriber that already
 * listens; a turn both read and published is dropped by sequence number. If live turns arrive out of order (two
 * writers raced between persist and publish), the missing range is read from the store before the later turn is
 * emitted, so the subscriber always sees seq n+1 right after seq n.
 *
 * Hubs are unbounded: a bounded hub would either block the session loop on a slow client (back-pressure) or drop
 * turns (sliding). A slow client's backlog is the server's to cut off.
 */
import { Effect, Layer, Option, PubSub, Stream } from "effect"
import type { Context, Scope } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { Turn } from "../domain/Message.js"
import type { SessionEvent } from "../domain/SessionEvent.js"
import { SessionStore } from "../store/SessionStore.js"
import { SessionEvents } from "./SessionEvents.js"

/** The service, plus how many sessions currently have a live hub (for tests and metrics). */
export interface LiveEvents extends Context.Tag.Service<SessionEvents> {
  /** Sessions with at least one subscriber. Never fails. */
  readonly liveSessions: Effect.Effect<number>
}

interface Hub {
  readonly pubsub: PubSub.PubSub<SessionEvent>
  subscribers: number
}

const turnEvent = (turn: Turn): SessionEvent => ({ _tag: "turn", sessionId: turn.sessionId, seq: turn.seq, turn })

/**
 * Builds the service over the `SessionStore`. `publish` never fails; `subscribe` fails only with the store's
 * `PersistenceFailed` (initial replay or a gap fill) and, for a session `orgId` cannot see, ends at once, empty.
 */
export const make: Effect.Effect<LiveEvents, never, SessionStore> = Effect.map(SessionStore, (store) => {
  const hubs = new Map<string, Hub>()

  /** Joins (or opens) the session's hub for the life of `scope`; the last one out drops it. */
  const join = (sessionId: string): Effect.Effect<Hub, never, Scope.Scope> =>
    Effect.acquireRelease(
      Effect.suspend(() => {
        const existing = hubs.get(sessionId)
        if (existing !== undefined) {
          existing.subscribers++
          return Effect.succeed(existing)
        }
        return Effect.map(PubSub.unbounded<SessionEvent>(), (pubsub) => {
          // Re-check: another subscriber may have opened a hub while this one was being built.
          const raced = hubs.get(sessionId)
          const hub = raced ?? { pubsub, subscribers: 0 }
          if (raced === undefined) hubs.set(sessionId, hub)
          hub.subscribers++
          return hub
        })
      }),
      (hub) =>
        Effect.suspend(() => {
          hub.subscribers--
          if (hub.subscribers > 0 || hubs.get(sessionId) !== hub) return Effect.void
          hubs.delete(sessionId)
          return PubSub.shutdown(hub.pubsub)
        })
    )

  const subscribe = (
    orgId: string,
    sessionId: string,
    fromSeq: number
  ): Stream.Stream<SessionEvent, PersistenceFailed> =>
    Stream.unwrapScoped(Effect.gen(function*() {
      if (Option.isNone(yield* store.getSession(orgId, sessionId))) return Stream.empty
      const hub = yield* join(sessionId)
      // Subscribe before reading the store: that ordering is the whole no-gap guarantee.
      const live = yield* PubSub.subscribe(hub.pubsub)
      const stored = yield* store.turns(orgId, sessionId, fromSeq)
      let last = Math.max(fromSeq, stored.length > 0 ? stored[stored.length - 1]!.seq : fromSeq)

      const onLive = (event: SessionEvent): Effect.Effect<ReadonlyArray<SessionEvent>, PersistenceFailed> => {
        if (event._tag !== "turn") return Effect.succeed([event])
        if (event.seq <= last) return Effect.succeed([])
        if (event.seq === last + 1) {
          last = event.seq
          return Effect.succeed([event])
        }
        // A later turn overtook an earlier one between persist and publish: fill the gap from the store.
        return Effect.map(store.turns(orgId, sessionId, last), (turns) => {
          const upTo = turns.filter((t) => t.seq <= event.seq)
          if (upTo.length > 0) last = upTo[upTo.length - 1]!.seq
          return upTo.map(turnEvent)
        })
      }

      return Stream.concat(
        Stream.fromIterable(stored.map(turnEvent)),
        Stream.fromQueue(live).pipe(Stream.mapConcatEffect(onLive))
      )
    }))

  return {
    // One synchronous step: the hub cannot be dropped (and shut down) between the lookup and the offer, so a
    // publisher is never interrupted by a subscriber leaving.
    publish: (event) =>
      Effect.sync(() => {
        hubs.get(event.sessionId)?.pubsub.unsafeOffer(event)
      }),
    subscribe,
    liveSessions: Effect.sync(() => hubs.size)
  }
})

/** `SessionEvents` over the `SessionStore` in context. */
export const layer: Layer.Layer<SessionEvents, never, SessionStore> = Layer.effect(SessionEvents, make)
