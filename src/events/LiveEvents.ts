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
 *
 * A hub is a set of listeners, each an array of events and the resumption of the fiber waiting on it, not a
 * `PubSub` read through Stream stages: a subscriber pulls whatever was published since its last pull in one step
 * (events published in one turn of the event loop come as one batch), which is what made following a session cheap
 * next to running it (docs/benchmarks.md).
 */
import { Effect, Layer, Option } from "effect"
import type { Context, Scope } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { Turn } from "../domain/Message.js"
import type { SessionEvent } from "../domain/SessionEvent.js"
import { SessionStore } from "../store/SessionStore.js"
import * as Landings from "./Landings.js"
import { SessionEvents, withSubscribe } from "./SessionEvents.js"
import type { SubscribeOptions, Subscription } from "./SessionEvents.js"

/** The service, plus how many sessions currently have a live hub (for tests and metrics). */
export interface LiveEvents extends Context.Tag.Service<SessionEvents> {
  /** Sessions with at least one subscriber. Never fails. */
  readonly liveSessions: Effect.Effect<number>
}

/** One subscriber's mailbox: what was published since its last pull, and its waiting fiber's resumption. */
interface Listener {
  events: Array<SessionEvent>
  wake: (() => void) | undefined
}

type Hub = Set<Listener>

const turnEvent = (turn: Turn): SessionEvent => ({ _tag: "turn", sessionId: turn.sessionId, seq: turn.seq, turn })

const ended: ReadonlyArray<SessionEvent> = []

/** Everything the listener holds, now or (when it holds nothing) as soon as something is published. */
const take = (listener: Listener): Effect.Effect<ReadonlyArray<SessionEvent>> => {
  const drain = () => {
    const events = listener.events
    listener.events = []
    return events
  }
  if (listener.events.length > 0) return Effect.succeed(drain())
  return Effect.async<ReadonlyArray<SessionEvent>>((resume) => {
    // Resumed with a drain, not with the event that woke it: all published before the fiber runs come together.
    listener.wake = () => resume(Effect.sync(drain))
    return Effect.sync(() => {
      listener.wake = undefined
    })
  })
}

type Store = Context.Tag.Service<SessionStore>

/** Joins (or opens) the session's hub for the life of `scope`; the last one out drops it. */
const join = (hubs: Map<string, Hub>, sessionId: string): Effect.Effect<Listener, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => {
      let hub = hubs.get(sessionId)
      if (hub === undefined) {
        hub = new Set()
        hubs.set(sessionId, hub)
      }
      const listener: Listener = { events: [], wake: undefined }
      hub.add(listener)
      return listener
    }),
    (listener) =>
      Effect.sync(() => {
        const hub = hubs.get(sessionId)
        if (hub === undefined) return
        hub.delete(listener)
        if (hub.size === 0) hubs.delete(sessionId)
      })
  )

/**
 * Live events after the replay: turns in order (gaps filled from the store), landings not already replayed; with
 * `until`, up to the first `report`.
 */
const follow = (
  store: Store,
  orgId: string,
  sessionId: string,
  listener: Listener,
  replay: ReadonlyArray<SessionEvent>,
  from: { last: number; landedUpTo: number } | undefined,
  until: boolean
): Subscription => {
  let last = from?.last ?? 0
  let done = from === undefined
  const landedUpTo = from?.landedUpTo ?? Number.POSITIVE_INFINITY
  let pending: ReadonlyArray<SessionEvent> | undefined = replay.length > 0 ? replay : undefined
  // Synchronous unless a gap needs the store.
  const select = (
    events: ReadonlyArray<SessionEvent>
  ): Effect.Effect<ReadonlyArray<SessionEvent>, PersistenceFailed> => {
    const out: Array<SessionEvent> = []
    const keep = (event: SessionEvent): boolean => {
      out.push(event)
      if (until && event._tag === "report") done = true
      return done
    }
    const from_ = (start: number): Effect.Effect<ReadonlyArray<SessionEvent>, PersistenceFailed> => {
      for (let i = start; i < events.length; i++) {
        const event = events[i]!
        if (event._tag === "exit" || event._tag === "report") {
          // Published after the subscription began but already replayed from the store.
          if (event.seq > landedUpTo && keep(event)) break
          continue
        }
        if (event._tag !== "turn") {
          keep(event)
          continue
        }
        if (event.seq <= last) continue
        if (event.seq === last + 1) {
          last = event.seq
          keep(event)
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
      return Effect.succeed(out)
    }
    return from_(0)
  }
  // A pull that selected nothing (every event already replayed) waits for the next publish.
  const live: Effect.Effect<ReadonlyArray<SessionEvent>, PersistenceFailed> = Effect.flatMap(
    Effect.suspend(() => take(listener)),
    (events) => Effect.flatMap(select(events), (out) => out.length > 0 || done ? Effect.succeed(out) : live)
  )
  return {
    next: Effect.suspend(() => {
      if (pending !== undefined) {
        const out = pending
        pending = undefined
        return Effect.succeed(out)
      }
      return done ? Effect.succeed(ended) : live
    })
  }
}

/**
 * The replay with landings, after the hub is joined. Reads in this order: trajectories (what had landed), the
 * session (whether a burst runs or waits), trajectories again and the turns (what to replay: every landing the
 * session read implies is in it). A burst that landed between the two trajectory reads is the one `until` waits
 * for; otherwise its landing comes live.
 */
const withLandings = (
  store: Store,
  orgId: string,
  sessionId: string,
  fromSeq: number,
  listener: Listener,
  until: boolean
): Effect.Effect<Subscription, PersistenceFailed> =>
  Effect.gen(function*() {
    const before = new Set(
      Landings.fromStore(sessionId, yield* store.trajectories(orgId, sessionId), Option.none())
        .map((l) => l.runId)
    )
    const current = yield* store.getSession(orgId, sessionId)
    if (Option.isNone(current)) return follow(store, orgId, sessionId, listener, [], undefined, until)
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
    if (until && !waits) {
      return follow(store, orgId, sessionId, listener, shown(Number.MAX_SAFE_INTEGER), undefined, until)
    }
    const landedNow = landings.find((l) => !before.has(l.runId))
    if (until && landedNow !== undefined) {
      // The burst that ran at subscription landed meanwhile: replay up to its landing, and end there.
      const upTo = landings.indexOf(landedNow)
      const replay = Landings.interleave(
        stored.filter((t) => t.seq <= landedNow.seq),
        landings.slice(0, upTo + 1).filter((l) => l.seq >= fromSeq)
      )
      return follow(store, orgId, sessionId, listener, replay, undefined, until)
    }
    const last = Math.max(fromSeq, stored.length > 0 ? stored[stored.length - 1]!.seq : fromSeq)
    return follow(store, orgId, sessionId, listener, shown(Number.MAX_SAFE_INTEGER), {
      last,
      landedUpTo: landings.at(-1)?.seq ?? -1
    }, until)
  })

/**
 * Builds the service over the `SessionStore`. `publish` never fails; `open` fails only with the store's
 * `PersistenceFailed` (initial replay or a gap fill) and, for a session `orgId` cannot see, ends at once, empty.
 */
export const make: Effect.Effect<LiveEvents, never, SessionStore> = Effect.map(SessionStore, (store) => {
  const hubs = new Map<string, Hub>()

  const open = (
    orgId: string,
    sessionId: string,
    fromSeq: number,
    options: SubscribeOptions = {}
  ): Effect.Effect<Subscription, PersistenceFailed, Scope.Scope> =>
    Effect.gen(function*() {
      if (Option.isNone(yield* store.getSession(orgId, sessionId))) return { next: Effect.succeed(ended) }
      // Join before reading the store: that ordering is the whole no-gap guarantee.
      const listener = yield* join(hubs, sessionId)
      const until = options.until === "landed"
      if (options.landings === true || until) {
        return yield* withLandings(store, orgId, sessionId, fromSeq, listener, until)
      }
      const stored = yield* store.turns(orgId, sessionId, fromSeq)
      const last = Math.max(fromSeq, stored.length > 0 ? stored[stored.length - 1]!.seq : fromSeq)
      // Without landings nothing was replayed but turns: every live exit and report passes.
      return follow(store, orgId, sessionId, listener, stored.map(turnEvent), {
        last,
        landedUpTo: Number.NEGATIVE_INFINITY
      }, false)
    })

  const service = {
    // One synchronous step: a listener that leaves meanwhile is simply not in the set any more.
    publish: (event: SessionEvent) =>
      Effect.sync(() => {
        const hub = hubs.get(event.sessionId)
        if (hub === undefined) return
        for (const listener of hub) {
          listener.events.push(event)
          const wake = listener.wake
          if (wake !== undefined) {
            listener.wake = undefined
            wake()
          }
        }
      }),
    open,
    liveSessions: Effect.sync(() => hubs.size)
  }
  return withSubscribe(service)
})

/** `SessionEvents` over the `SessionStore` in context. */
export const layer: Layer.Layer<SessionEvents, never, SessionStore> = Layer.effect(SessionEvents, make)
