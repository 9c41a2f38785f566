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
 * With `landings`, the replay also carries the `exit` and `report` of each burst that landed (events/Landings), right
 * after its last turn, and live copies of those are not repeated; with `until: "landed"` the stream ends after the
 * report of the burst that runs or waits when the subscription starts (see `withLandings` for the read order that
 * makes this race-free).
 *
 * Hubs are unbounded: a bounded hub would either block the session loop on a slow client (back-pressure) or drop
 * turns (sliding). A slow client's backlog is the server's to cut off.
 */
import { Chunk, Effect, Layer, Option, PubSub, Stream } from "effect"
import type { Context, Queue, Scope } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { Turn } from "../domain/Message.js"
import type { SessionEvent } from "../domain/SessionEvent.js"
import { SessionStore } from "../store/SessionStore.js"
import * as Landings from "./Landings.js"
import { SessionEvents } from "./SessionEvents.js"
import type { SubscribeOptions } from "./SessionEvents.js"

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

  /** Live events after the replay: turns in order (gaps filled from the store), landings not already replayed. */
  const follow = (
    orgId: string,
    sessionId: string,
    live: Queue.Dequeue<SessionEvent>,
    from: { last: number; landedUpTo: number }
  ): Stream.Stream<SessionEvent, PersistenceFailed> => {
    let last = from.last
    // A chunk at a time (whatever the queue held when pulled), synchronously unless a gap needs the store: per-event
    // effects were a measurable share of a followed turn's cost.
    const onChunk = (chunk: Chunk.Chunk<SessionEvent>): Effect.Effect<Chunk.Chunk<SessionEvent>, PersistenceFailed> => {
      const events = Chunk.toReadonlyArray(chunk)
      const out: Array<SessionEvent> = []
      const from_ = (start: number): Effect.Effect<Chunk.Chunk<SessionEvent>, PersistenceFailed> => {
        for (let i = start; i < events.length; i++) {
          const event = events[i]!
          if (event._tag === "exit" || event._tag === "report") {
            // Published after the subscription began but already replayed from the store.
            if (event.seq > from.landedUpTo) out.push(event)
            continue
          }
          if (event._tag !== "turn") {
            out.push(event)
            continue
          }
          if (event.seq <= last) continue
          if (event.seq === last + 1) {
            last = event.seq
            out.push(event)
            continue
          }
          // A later turn overtook an earlier one between persist and publish: fill the gap from the store.
          return Effect.flatMap(store.turns(orgId, sessionId, last), (turns) => {
            const upTo = turns.filter((t) => t.seq <= event.seq)
            if (upTo.length > 0) last = upTo[upTo.length - 1]!.seq
            for (const turn of upTo) out.push(turnEvent(turn))
            return from_(i + 1)
          })
        }
        return Effect.succeed(Chunk.unsafeFromArray(out))
      }
      return from_(0)
    }
    return Stream.fromQueue(live).pipe(Stream.mapChunksEffect(onChunk))
  }

  /**
   * The replay with landings, after the hub is joined. Reads in this order: trajectories (what had landed), the
   * session (whether a burst runs or waits), trajectories again and the turns (what to replay: every landing the
   * session read implies is in it). A burst that landed between the two trajectory reads is the one `until` waits
   * for; otherwise its landing comes live.
   */
  const withLandings = (
    orgId: string,
    sessionId: string,
    fromSeq: number,
    live: Queue.Dequeue<SessionEvent>,
    until: boolean
  ) =>
    Effect.gen(function*() {
      const before = new Set(
        Landings.fromStore(sessionId, yield* store.trajectories(orgId, sessionId), Option.none())
          .map((l) => l.runId)
      )
      const current = yield* store.getSession(orgId, sessionId)
      if (Option.isNone(current)) return Stream.empty
      const state = current.value.state
      let waits = false
      if (until) {
        const inbox = yield* store.inbox(sessionId)
        waits = Landings.busy(state, inbox, inbox.length === 0 ? [] : yield* store.turns(orgId, sessionId, 0))
      }
      const landings = Landings.fromStore(sessionId, yield* store.trajectories(orgId, sessionId), Option.some(state))
      const stored = yield* store.turns(orgId, sessionId, fromSeq)
      // A landing right after turn `fromSeq` is replayed: the resume point is a turn, and whether the client saw the
      // landing that followed it is unknown — a repeated exit (same seq) is harmless, a missed one is not.
      const shown = (upTo: number) =>
        Landings.interleave(
          stored.filter((t) => t.seq <= upTo),
          landings.filter((l) => l.seq >= fromSeq && l.seq <= upTo)
        )
      if (until && !waits) return Stream.fromIterable(shown(Number.MAX_SAFE_INTEGER))
      const landedNow = landings.find((l) => !before.has(l.runId))
      if (until && landedNow !== undefined) {
        // The burst that ran at subscription landed meanwhile: replay up to its landing, and end there.
        const upTo = landings.indexOf(landedNow)
        return Stream.fromIterable(
          Landings.interleave(
            stored.filter((t) => t.seq <= landedNow.seq),
            landings.slice(0, upTo + 1).filter((l) => l.seq >= fromSeq)
          )
        )
      }
      const replayed = shown(Number.MAX_SAFE_INTEGER)
      const last = Math.max(fromSeq, stored.length > 0 ? stored[stored.length - 1]!.seq : fromSeq)
      const tail = follow(orgId, sessionId, live, { last, landedUpTo: landings.at(-1)?.seq ?? -1 })
      return Stream.concat(
        Stream.fromIterable(replayed),
        until ? tail.pipe(Stream.takeUntil((e) => e._tag === "report")) : tail
      )
    })

  const subscribe = (
    orgId: string,
    sessionId: string,
    fromSeq: number,
    options: SubscribeOptions = {}
  ): Stream.Stream<SessionEvent, PersistenceFailed> =>
    Stream.unwrapScoped(Effect.gen(function*() {
      if (Option.isNone(yield* store.getSession(orgId, sessionId))) return Stream.empty
      const hub = yield* join(sessionId)
      // Subscribe before reading the store: that ordering is the whole no-gap guarantee.
      const live = yield* PubSub.subscribe(hub.pubsub)
      const until = options.until === "landed"
      if (options.landings === true || until) return yield* withLandings(orgId, sessionId, fromSeq, live, until)
      const stored = yield* store.turns(orgId, sessionId, fromSeq)
      const last = Math.max(fromSeq, stored.length > 0 ? stored[stored.length - 1]!.seq : fromSeq)
      return Stream.concat(
        Stream.fromIterable(stored.map(turnEvent)),
        // Without landings nothing was replayed but turns: every live exit and report passes.
        follow(orgId, sessionId, live, { last, landedUpTo: Number.NEGATIVE_INFINITY })
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
