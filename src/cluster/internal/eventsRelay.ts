/**
 * eventsRelay — the parts of `ClusterEvents.relay` (whose header says what the relay guarantees and why), as
 * functions of one shared record (`Relay`): what is followed here and what reached it (`saw`), catching followed
 * sessions up from the store (`catchUp`), what a notification from the channel does here (`republish`), the LISTEN
 * kept alive (`listen`), the high-water check (`highWater`), this node's heartbeat (`heartbeat`), and sending what
 * this node published (`send`).
 */
import type { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Duration, Effect, Option, Stream } from "effect"
import type { Context, Scope } from "effect"
import type { SessionEvent } from "../../domain/SessionEvent.js"
import * as Landings from "../../events/Landings.js"
import type { SessionEvents } from "../../events/SessionEvents.js"
import type { SessionStore } from "../../store/SessionStore.js"
import { channel, decode, encode, maxPayloadBytes } from "./eventsWire.js"

/** Events waiting to be sent to the other nodes, at most. */
export const outboxCapacity = 10_000

/** Notifications sent in one statement, at most: one round trip carries what queued meanwhile. */
export const batchSize = 256

/** Followed sessions caught up from the store at once, at most, after notifications were lost. */
const catchUpConcurrency = 8

/** How often a node sends itself a heartbeat on the channel. */
const heartbeatEvery = Duration.seconds(2)

/** A LISTEN that heard nothing, not even its own node's heartbeat, for this long is taken for dead and opened again. */
const silenceLimit = Duration.seconds(15)

/**
 * How often a node compares, for every session followed on it, the last turn its followers got with the last one
 * stored. A turn stored just before its node died (its notification still queued) is followed by nothing from that
 * node, so no gap in its numbering ever shows the loss; this check does, within two periods (a session found behind
 * is caught up only when still behind at the next check, so a notification merely in flight is not read twice).
 */
export const highWaterEvery = Duration.seconds(1)

/** Between attempts to LISTEN again: 0.5 s doubling, at most 10 s. */
const backoff = (attempt: number) => Duration.millis(Math.min(500 * 2 ** (attempt - 1), 10_000))

/**
 * A session followed on this node: its org, how many follow it, the last turn and landing that reached this node's
 * hubs, and what the last high-water check found missing (`behind`: the stored last turn then, 0 when none was).
 */
export interface Followed {
  readonly orgId: string
  count: number
  seq: number
  landed: number
  behind: number
}

/** An event this node published, numbered in the order published (a gap is what the receivers see of a loss). */
export interface Outgoing {
  readonly n: number
  readonly event: typeof SessionEvent.Type
}

/** What the relay's parts share. */
export interface Relay {
  readonly local: Context.Tag.Service<SessionEvents>
  readonly pg: PgClient.PgClient
  readonly store: Context.Tag.Service<SessionStore>
  /** This process on the channel (its own notifications come back to it and are skipped). */
  readonly node: string
  /** Where a catch-up is forked (the relay's scope). */
  readonly scope: Scope.Scope
  /** Sessions followed on this node (a referenced turn is read for these; a catch-up starts where they are). */
  readonly followed: Map<string, Followed>
  /** The last `n` heard from each other node. */
  readonly lastHeard: Map<string, number>
  /** When this node last heard anything on its LISTEN (it is alive). */
  heard: number
  /** Attempts to LISTEN again since it last held. */
  attempts: number
  /** One catch-up of every followed session at a time; a loss meanwhile runs another after it (`again`). */
  catchingUp: boolean
  again: boolean
}

/** Records that `event` reached this node's hubs, for a session followed here. */
export const saw = (r: Relay, event: typeof SessionEvent.Type): void => {
  const entry = r.followed.get(event.sessionId)
  if (entry === undefined) return
  if (event._tag === "turn") entry.seq = Math.max(entry.seq, event.seq)
  else if (event._tag === "exit") entry.landed = Math.max(entry.landed, event.seq)
}

/**
 * What a lost notification kept from this node's followers, read from the store: the turns after the last one that
 * reached them, and the last landing if it did not (only once the session is no longer running, so it is the landing
 * a follower waits for). Duplicates are harmless (`LiveEvents` drops a turn it has; an exit comes twice at worst), a
 * miss is not: a follower on this node would wait for the landing forever.
 */
const catchUpSession = (r: Relay, sessionId: string, entry: Followed) =>
  Effect.gen(function*() {
    for (const turn of yield* r.store.turns(entry.orgId, sessionId, entry.seq)) {
      const event = { _tag: "turn" as const, sessionId, seq: turn.seq, turn }
      saw(r, event)
      yield* r.local.publish(event)
    }
    const session = yield* r.store.getSession(entry.orgId, sessionId)
    if (Option.isNone(session) || session.value.state.status === "running") return
    const landing = Landings.fromStore(
      sessionId,
      yield* r.store.trajectories(entry.orgId, sessionId),
      Option.some(session.value.state)
    ).at(-1)
    if (landing === undefined || landing.seq <= entry.landed) return
    for (const event of landing.events) {
      saw(r, event)
      yield* r.local.publish(event)
    }
  }).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning(`cluster events: session ${sessionId}: not caught up from the store: ${error.message}`)
    )
  )

/** Catches every followed session up from the store, forked in the relay's scope, one catch-up at a time. */
export const catchUp = (r: Relay, why: string): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (r.catchingUp) {
      r.again = true
      return Effect.void
    }
    r.catchingUp = true
    return Effect.gen(function*() {
      do {
        r.again = false
        yield* Effect.logInfo(`cluster events: ${why}; ${r.followed.size} followed session(s) caught up from the store`)
        yield* Effect.forEach([...r.followed], ([sessionId, entry]) => catchUpSession(r, sessionId, entry), {
          concurrency: catchUpConcurrency,
          discard: true
        })
      } while (r.again)
    }).pipe(
      Effect.ensuring(Effect.sync(() => (r.catchingUp = false))),
      Effect.forkIn(r.scope),
      Effect.asVoid
    )
  })

/** A turn sent by reference: read from the store, for a session followed here (the org is the follower's). */
const readTurn = (r: Relay, sessionId: string, seq: number) => {
  const follower = r.followed.get(sessionId)
  if (follower === undefined) return Effect.void
  return r.store.turns(follower.orgId, sessionId, seq - 1).pipe(
    Effect.flatMap((turns) => {
      const turn = turns.find((t) => t.seq === seq)
      if (turn === undefined) return Effect.void
      const event = { _tag: "turn" as const, sessionId, seq: turn.seq, turn }
      saw(r, event)
      return r.local.publish(event)
    }),
    Effect.catchAll((error) => Effect.logDebug(`cluster events: turn ${seq} not read: ${error.message}`))
  )
}

/** What one notification does here: this node's heartbeat after a reconnect, another node's event or turn. */
const republishWire = (r: Relay, text: string) =>
  Option.match(decode(text), {
    onNone: () => Effect.logDebug(`cluster events: a notification that is not an event was dropped`),
    onSome: (wire) => {
      if ("heartbeat" in wire) {
        if (wire.node !== r.node || r.attempts === 0) return Effect.void
        const after = r.attempts
        r.attempts = 0
        return Effect.zipRight(
          Effect.logInfo(`cluster events: listening on ${channel} again (after ${after} attempt(s))`),
          catchUp(r, "the LISTEN connection was opened again")
        )
      }
      if (wire.node === r.node) return Effect.void
      if ("stored" in wire) {
        const event = {
          _tag: "turn" as const,
          sessionId: wire.stored.sessionId,
          seq: wire.stored.seq,
          turn: wire.stored
        }
        saw(r, event)
        return r.local.publish(event)
      }
      if ("storedRef" in wire) return readTurn(r, wire.storedRef.sessionId, wire.storedRef.seq)
      const before = r.lastHeard.get(wire.node)
      r.lastHeard.set(wire.node, wire.n)
      const lost = before !== undefined && wire.n > before + 1
        ? catchUp(r, `${wire.n - before - 1} notification(s) of node ${wire.node} did not arrive`)
        : Effect.void
      if ("event" in wire) {
        saw(r, wire.event)
        return Effect.zipRight(r.local.publish(wire.event), lost)
      }
      return Effect.zipRight(readTurn(r, wire.sessionId, wire.seq), lost)
    }
  })

/**
 * A notification heard: any of them proves the LISTEN alive (under load the events themselves do, whatever the
 * heartbeat's wait for a pooled connection); this node's own heartbeat proves it when nothing else is said.
 */
const republish = (r: Relay, text: string) =>
  Effect.zipRight(
    Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => (r.heard = now))),
    republishWire(r, text)
  )

/** Fails once the LISTEN has been silent too long; the listen's stream never ends on its own. */
const silence = (r: Relay) =>
  Effect.gen(function*() {
    r.heard = yield* Clock.currentTimeMillis
    let tick = r.heard
    while (true) {
      yield* Effect.sleep(heartbeatEvery)
      const now = yield* Clock.currentTimeMillis
      // A timer that fires far too late means this process was stalled (a saturated event loop runs timers before
      // the notifications that arrived meanwhile): that silence is not the connection's, so it is not judged.
      if (now - tick > 2 * Duration.toMillis(heartbeatEvery)) r.heard = now
      tick = now
      const silent = now - r.heard
      if (silent > Duration.toMillis(silenceLimit)) {
        return yield* Effect.fail(`nothing heard for ${silent} ms, not even this node's heartbeat`)
      }
    }
  })

/** LISTENs on the channel for ever, opening it again (with backoff, logged) each time it ends or falls silent. */
export const listen = (r: Relay): Effect.Effect<never> => {
  const listenOnce = r.pg.listen(channel).pipe(
    Stream.runForEach((text) => republish(r, text)),
    Effect.zipRight(Effect.fail("the LISTEN stream ended")),
    // The verdict never waits on the old connection's UNLISTEN (on a connection that hangs it would never end).
    Effect.disconnect,
    Effect.raceFirst(silence(r))
  )
  return Effect.gen(function*() {
    while (true) {
      const cause = yield* Effect.flip(Effect.sandbox(listenOnce))
      r.attempts++
      const wait = backoff(r.attempts)
      yield* Effect.logWarning(
        `cluster events: the LISTEN connection on ${channel} ended (${Cause.pretty(cause).split("\n")[0]}); ` +
          `listening again in ${Duration.format(wait)} (attempt ${r.attempts})`
      ).pipe(Effect.annotateLogs({ channel, node: r.node, attempt: r.attempts }))
      yield* Effect.sleep(wait)
    }
  })
}

/**
 * The high-water check (see `highWaterEvery`): one statement for every followed session, the stored last turn and
 * status of each. Caught up: a session still behind since the previous check, or one no longer running after a turn
 * reached its followers here with no landing since (the landing is what its followers wait for last).
 */
export const highWater = (r: Relay): Effect.Effect<void> =>
  Effect.gen(function*() {
    if (r.followed.size === 0) return
    const ids = [...r.followed.keys()]
    const rows = yield* r.pg<{ id: string; last_seq: number; status: string }>`SELECT c.session_id AS id,
        c.last_seq, s.status FROM session_counters c JOIN sessions s ON s.id = c.session_id
      WHERE c.session_id = ANY(${ids}::text[])`
    const lagging: Array<readonly [string, Followed, boolean]> = []
    for (const row of rows) {
      const entry = r.followed.get(row.id)
      if (entry === undefined) continue
      const turnsOwed = row.last_seq > entry.seq
      const landingOwed = row.status !== "running" && entry.seq > 0 && entry.landed < entry.seq
      const was = entry.behind
      entry.behind = turnsOwed || landingOwed ? Math.max(1, row.last_seq) : 0
      if (was > 0 && entry.behind > 0) lagging.push([row.id, entry, row.status !== "running"])
    }
    if (lagging.length === 0) return
    yield* Effect.logInfo(
      `cluster events: ${lagging.length} followed session(s) behind the store for over ${
        Duration.format(highWaterEvery)
      }; caught up from the store`
    ).pipe(Effect.annotateLogs({ sessions: lagging.map(([id]) => id).join(",") }))
    yield* Effect.forEach(lagging, ([sessionId, entry, stopped]) =>
      Effect.zipRight(
        catchUpSession(r, sessionId, entry),
        // A session that stopped without a landing to show (recovered after its node died) owes none: not again.
        Effect.sync(() => {
          if (stopped) entry.landed = Math.max(entry.landed, entry.seq)
        })
      ), { concurrency: catchUpConcurrency, discard: true })
  }).pipe(
    Effect.catchAll((error) => Effect.logDebug(`cluster events: high-water check not run: ${error.message}`))
  )

/** This node's heartbeat on the channel, for ever; it goes through the pool (not the LISTEN connection). */
export const heartbeat = (r: Relay): Effect.Effect<never> => {
  let beats = 0
  return Effect.suspend(() => r.pg`SELECT pg_notify(${channel}, ${encode({ node: r.node, heartbeat: ++beats })})`).pipe(
    Effect.catchAll((error) => Effect.logDebug(`cluster events: heartbeat not sent: ${error.message}`)),
    Effect.zipRight(Effect.sleep(heartbeatEvery)),
    Effect.forever
  )
}

/** An event's notification: whole, or a turn by reference when too large; nothing when even that does not fit. */
const payloadOf = (r: Relay, { event, n }: Outgoing) => {
  const whole = encode({ node: r.node, n, event })
  const payload = Buffer.byteLength(whole) < maxPayloadBytes || event._tag !== "turn"
    ? whole
    : encode({ node: r.node, n, sessionId: event.sessionId, seq: event.seq })
  return Buffer.byteLength(payload) < maxPayloadBytes ? [payload] : []
}

/**
 * Sends what queued meanwhile in one statement, in order (a failure is logged; the events are lost to the other
 * nodes only, a gap they see). `pg_notify` with bound parameters: `NOTIFY channel, $1` (PgClient.notify) is refused by
 * Postgres, whose NOTIFY takes a literal payload only.
 */
export const send = (r: Relay, batch: ReadonlyArray<Outgoing>): Effect.Effect<void> => {
  const payloads = batch.flatMap((outgoing) => payloadOf(r, outgoing))
  if (payloads.length === 0) return Effect.void
  return r.pg`SELECT count(pg_notify(${channel}, p)) FROM unnest(${payloads}::text[]) AS p`.pipe(
    Effect.asVoid,
    Effect.catchAll((error) =>
      Effect.logWarning(`cluster events: ${payloads.length} event(s) not sent to other nodes: ${error.message}`)
    )
  )
}
