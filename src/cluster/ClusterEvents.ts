/**
 * Session events across the nodes of a cluster: a client following a session over SSE may be connected to any
 * node, while the burst publishing its events runs on the session's owner.
 *
 * Every node keeps its own `LiveEvents` hubs (replay from the shared store, then live). Publishing on a node also
 * sends the event on the Postgres channel `corral_events` (`NOTIFY`); every node `LISTEN`s and republishes what
 * other nodes sent into its own hubs — where nobody follows the session that costs a map lookup. A turn too large
 * for a notification (Postgres caps a payload at 8000 bytes) travels as its sequence number only and the receiving
 * node reads it from the store, which the owner wrote before publishing. What is not stored (tool progress, deltas)
 * is best effort across nodes, as it is within one.
 *
 * A notification can still be lost (a full outbox, a failed send, a LISTEN that was down), and what a follower waits
 * for last — the burst's `exit` and `report` — is not a turn, so no later turn brings it back: without more, the
 * follower would wait for the landing forever (the two-node benchmark at 1,000 sessions at once did). So each node
 * numbers its events as it publishes them; a receiver that sees a gap in a node's numbering, or that has just opened
 * its LISTEN again, catches every session followed on it up from the store: the turns after the last that reached
 * its hubs, and the session's last landing if the session no longer runs and the landing had not arrived. A
 * subscriber that reconnects replays from its last sequence number anyway.
 *
 * `publish` stays synchronous (the loop publishes streamed deltas from a synchronous callback): the notification is
 * queued and one fiber sends what queued meanwhile in one statement (up to 256, in order), so under load one round
 * trip carries many events. The queue holds at most 10,000 events; beyond that (Postgres stopped answering) events
 * are dropped for other nodes only — a gap their receivers see.
 *
 * The LISTEN connection can end (a restarted or failed-over database, `pg_terminate_backend`, a cut network) and it
 * ends silently: the client swallows its error and notifications simply stop. So each node sends itself a heartbeat
 * on the channel every 2 s, and a LISTEN that has heard nothing for 15 s — no event, not even its own heartbeat — is
 * dropped and opened again, after 0.5 s doubling to at most 10 s between attempts (a database that is down is not
 * hammered, one that is back is heard again within seconds). Each attempt is logged with its number and reason.
 * Why 15 s: a slow pool is not a dead connection — under load the heartbeat and the events wait for a pooled
 * connection behind the cluster's message storage, and the benchmark saw 8 s of silence on a saturated single node;
 * a process that was itself stalled is not judged at all.
 */
import type { PgClient } from "@effect/sql-pg"
import { Cause, Chunk, Clock, Duration, Effect, Option, Queue, Schema, Stream } from "effect"
import type { Context } from "effect"
import { Turn } from "../domain/Message.js"
import { SessionEvent } from "../domain/SessionEvent.js"
import * as Landings from "../events/Landings.js"
import type { SessionEvents } from "../events/SessionEvents.js"
import { withSubscribe } from "../events/SessionEvents.js"
import type { SessionStore } from "../store/SessionStore.js"

/** The Postgres channel events travel on. */
export const channel = "corral_events"

/** Postgres refuses a payload of 8000 bytes or more; this leaves room for the envelope. */
const maxPayloadBytes = 7_000

/** Events waiting to be sent to the other nodes, at most. */
const outboxCapacity = 10_000

/** Notifications sent in one statement, at most: one round trip carries what queued meanwhile. */
const batchSize = 256

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
const highWaterEvery = Duration.seconds(1)

/** Between attempts to LISTEN again: 0.5 s doubling, at most 10 s. */
const backoff = (attempt: number) => Duration.millis(Math.min(500 * 2 ** (attempt - 1), 10_000))

/**
 * What travels on the channel: the whole event, a reference to a stored turn, or a node's heartbeat. `n` numbers a
 * node's events in the order published, so a receiver sees when some never reached it.
 */
const Wire = Schema.Union(
  Schema.Struct({ node: Schema.String, n: Schema.Int, event: SessionEvent }),
  Schema.Struct({ node: Schema.String, n: Schema.Int, sessionId: Schema.String, seq: Schema.Int }),
  Schema.Struct({ node: Schema.String, heartbeat: Schema.Int }),
  // A turn notified by the store in the transaction that stored it (`stored`), whole or by reference.
  Schema.Struct({ node: Schema.String, stored: Turn }),
  Schema.Struct({ node: Schema.String, storedRef: Schema.Struct({ sessionId: Schema.String, seq: Schema.Int }) })
)
const encode = Schema.encodeSync(Schema.parseJson(Wire))
const decode = Schema.decodeUnknownOption(Schema.parseJson(Wire))

/**
 * What the store of node `node` notifies of the turns it stores, in the transaction that stores them
 * (`SqlStore.Options.notify`): each turn whole, or by reference when too large for a notification. With it, a turn
 * committed is a turn notified, whatever becomes of the node afterwards; `relay` then sends no turn of its own.
 */
export const stored = (node: string) => (turns: ReadonlyArray<Turn>): ReadonlyArray<string> =>
  turns.map((turn) => {
    const whole = encode({ node, stored: turn })
    return Buffer.byteLength(whole) < maxPayloadBytes
      ? whole
      : encode({ node, storedRef: { sessionId: turn.sessionId, seq: turn.seq } })
  })

/**
 * A session followed on this node: its org, how many follow it, the last turn and landing that reached this node's
 * hubs, and what the last high-water check found missing (`behind`: the stored last turn then, 0 when none was).
 */
interface Followed {
  readonly orgId: string
  count: number
  seq: number
  landed: number
  behind: number
}

/**
 * Wraps `local` so that `publish` also reaches the other nodes, and republishes here what they publish (forked in
 * the current scope, until it closes). `node` names this process on the channel (its own notifications come back
 * to it and are skipped). A referenced turn is read only for a session someone follows here (the org is the
 * follower's). A notification that cannot be sent is logged and dropped (the store holds every turn; see the module
 * header).
 */
export const relay = (options: {
  readonly local: Context.Tag.Service<SessionEvents>
  readonly pg: PgClient.PgClient
  readonly store: Context.Tag.Service<SessionStore>
  readonly node: string
  /** The store notifies every turn it stores (`stored`): this node's turns are not sent again from here. */
  readonly storeNotifies?: boolean
}) =>
  Effect.gen(function*() {
    const { local, node, pg, store } = options
    const scope = yield* Effect.scope
    /**
     * Sessions followed on this node: their org, how many follow them (a referenced turn is read for these), and the
     * last turn and landing that reached this node's hubs (where a catch-up from the store starts).
     */
    const followed = new Map<string, Followed>()
    const saw = (event: typeof SessionEvent.Type) => {
      const entry = followed.get(event.sessionId)
      if (entry === undefined) return
      if (event._tag === "turn") entry.seq = Math.max(entry.seq, event.seq)
      else if (event._tag === "exit") entry.landed = Math.max(entry.landed, event.seq)
    }
    /** The last `n` heard from each other node. */
    const lastHeard = new Map<string, number>()
    /** When this node last heard its own heartbeat (the LISTEN is alive), and the attempts since it last held. */
    let heard = yield* Clock.currentTimeMillis
    let attempts = 0
    /**
     * What a lost notification kept from this node's followers, read from the store: the turns after the last one
     * that reached them, and the last landing if it did not (only once the session is no longer running, so it is
     * the landing a follower waits for). Duplicates are harmless (`LiveEvents` drops a turn it has; an exit comes
     * twice at worst), a miss is not: a follower on this node would wait for the landing forever.
     */
    const catchUpSession = (sessionId: string, entry: Followed) =>
      Effect.gen(function*() {
        for (const turn of yield* store.turns(entry.orgId, sessionId, entry.seq)) {
          const event = { _tag: "turn" as const, sessionId, seq: turn.seq, turn }
          saw(event)
          yield* local.publish(event)
        }
        const session = yield* store.getSession(entry.orgId, sessionId)
        if (Option.isNone(session) || session.value.state.status === "running") return
        const landing = Landings.fromStore(
          sessionId,
          yield* store.trajectories(entry.orgId, sessionId),
          Option.some(session.value.state)
        )
          .at(-1)
        if (landing === undefined || landing.seq <= entry.landed) return
        for (const event of landing.events) {
          saw(event)
          yield* local.publish(event)
        }
      }).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning(`cluster events: session ${sessionId}: not caught up from the store: ${error.message}`)
        )
      )
    /** One catch-up of every followed session at a time; a loss meanwhile runs another after it. */
    let catchingUp = false
    let again = false
    const catchUp = (why: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (catchingUp) {
          again = true
          return Effect.void
        }
        catchingUp = true
        return Effect.gen(function*() {
          do {
            again = false
            yield* Effect.logInfo(
              `cluster events: ${why}; ${followed.size} followed session(s) caught up from the store`
            )
            yield* Effect.forEach([...followed], ([sessionId, entry]) => catchUpSession(sessionId, entry), {
              concurrency: catchUpConcurrency,
              discard: true
            })
          } while (again)
        }).pipe(
          Effect.ensuring(Effect.sync(() => (catchingUp = false))),
          Effect.forkIn(scope),
          Effect.asVoid
        )
      })
    /** A turn sent by reference: read from the store, for a session followed here (the org is the follower's). */
    const readTurn = (sessionId: string, seq: number) => {
      const follower = followed.get(sessionId)
      if (follower === undefined) return Effect.void
      return store.turns(follower.orgId, sessionId, seq - 1).pipe(
        Effect.flatMap((turns) => {
          const turn = turns.find((t) => t.seq === seq)
          if (turn === undefined) return Effect.void
          const event = { _tag: "turn" as const, sessionId, seq: turn.seq, turn }
          saw(event)
          return local.publish(event)
        }),
        Effect.catchAll((error) => Effect.logDebug(`cluster events: turn ${seq} not read: ${error.message}`))
      )
    }
    const republish = (text: string) =>
      // Any notification proves the LISTEN alive (under load the events themselves do, whatever the heartbeat's
      // wait for a pooled connection); this node's own heartbeat proves it when nothing else is said.
      Effect.zipRight(
        Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.sync(() => (heard = now))),
        republishWire(text)
      )
    const republishWire = (text: string) =>
      Option.match(decode(text), {
        onNone: () => Effect.logDebug(`cluster events: a notification that is not an event was dropped`),
        onSome: (wire) => {
          if ("heartbeat" in wire) {
            if (wire.node !== node || attempts === 0) return Effect.void
            const after = attempts
            attempts = 0
            return Effect.zipRight(
              Effect.logInfo(`cluster events: listening on ${channel} again (after ${after} attempt(s))`),
              catchUp("the LISTEN connection was opened again")
            )
          }
          if (wire.node === node) return Effect.void
          if ("stored" in wire) {
            const event = {
              _tag: "turn" as const,
              sessionId: wire.stored.sessionId,
              seq: wire.stored.seq,
              turn: wire.stored
            }
            saw(event)
            return local.publish(event)
          }
          if ("storedRef" in wire) return readTurn(wire.storedRef.sessionId, wire.storedRef.seq)
          const before = lastHeard.get(wire.node)
          lastHeard.set(wire.node, wire.n)
          const lost = before !== undefined && wire.n > before + 1
            ? catchUp(`${wire.n - before - 1} notification(s) of node ${wire.node} did not arrive`)
            : Effect.void
          if ("event" in wire) {
            saw(wire.event)
            return Effect.zipRight(local.publish(wire.event), lost)
          }
          return Effect.zipRight(readTurn(wire.sessionId, wire.seq), lost)
        }
      })
    // Fails once the LISTEN has been silent too long; the listen's stream never ends on its own.
    const watchdog = Effect.gen(function*() {
      heard = yield* Clock.currentTimeMillis
      let tick = heard
      while (true) {
        yield* Effect.sleep(heartbeatEvery)
        const now = yield* Clock.currentTimeMillis
        // A timer that fires far too late means this process was stalled (a saturated event loop runs timers before
        // the notifications that arrived meanwhile): that silence is not the connection's, so it is not judged.
        if (now - tick > 2 * Duration.toMillis(heartbeatEvery)) heard = now
        tick = now
        const silent = now - heard
        if (silent > Duration.toMillis(silenceLimit)) {
          return yield* Effect.fail(`nothing heard for ${silent} ms, not even this node's heartbeat`)
        }
      }
    })
    const listenOnce = pg.listen(channel).pipe(
      Stream.runForEach(republish),
      Effect.zipRight(Effect.fail("the LISTEN stream ended")),
      // The verdict never waits on the old connection's UNLISTEN (on a connection that hangs it would never end).
      Effect.disconnect,
      Effect.raceFirst(watchdog)
    )
    yield* Effect.gen(function*() {
      while (true) {
        const cause = yield* Effect.flip(Effect.sandbox(listenOnce))
        attempts++
        const wait = backoff(attempts)
        yield* Effect.logWarning(
          `cluster events: the LISTEN connection on ${channel} ended (${Cause.pretty(cause).split("\n")[0]}); ` +
            `listening again in ${Duration.format(wait)} (attempt ${attempts})`
        ).pipe(Effect.annotateLogs({ channel, node, attempt: attempts }))
        yield* Effect.sleep(wait)
      }
    }).pipe(Effect.forkScoped)
    /**
     * The high-water check (see `highWaterEvery`): one statement for every followed session, the stored last turn and
     * status of each. Caught up: a session still behind since the previous check, or one no longer running after a
     * turn reached its followers here with no landing since (the landing is what its followers wait for last).
     */
    const highWater = Effect.gen(function*() {
      if (followed.size === 0) return
      const ids = [...followed.keys()]
      const rows = yield* pg<{ id: string; last_seq: number; status: string }>`SELECT c.session_id AS id,
          c.last_seq, s.status FROM session_counters c JOIN sessions s ON s.id = c.session_id
        WHERE c.session_id = ANY(${ids}::text[])`
      const lagging: Array<readonly [string, Followed, boolean]> = []
      for (const row of rows) {
        const entry = followed.get(row.id)
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
          catchUpSession(sessionId, entry),
          // A session that stopped without a landing to show (recovered after its node died) owes none: not again.
          Effect.sync(() => {
            if (stopped) entry.landed = Math.max(entry.landed, entry.seq)
          })
        ), { concurrency: catchUpConcurrency, discard: true })
    }).pipe(
      Effect.catchAll((error) => Effect.logDebug(`cluster events: high-water check not run: ${error.message}`))
    )
    yield* Effect.sleep(highWaterEvery).pipe(
      Effect.zipRight(highWater),
      Effect.forever,
      Effect.forkScoped
    )
    // The heartbeat goes through the pool (not the LISTEN connection); a failed one is simply missed.
    let beats = 0
    yield* Effect.suspend(() => pg`SELECT pg_notify(${channel}, ${encode({ node, heartbeat: ++beats })})`).pipe(
      Effect.catchAll((error) => Effect.logDebug(`cluster events: heartbeat not sent: ${error.message}`)),
      Effect.zipRight(Effect.sleep(heartbeatEvery)),
      Effect.forever,
      Effect.forkScoped
    )
    // Numbered as published, so an event dropped here (a full outbox, a failed send) is a gap the receivers see.
    let published = 0
    const outbox = yield* Queue.dropping<{ readonly n: number; readonly event: typeof SessionEvent.Type }>(
      outboxCapacity
    )
    const payloadOf = ({ event, n }: { readonly n: number; readonly event: typeof SessionEvent.Type }) => {
      const whole = encode({ node, n, event })
      const payload = Buffer.byteLength(whole) < maxPayloadBytes || event._tag !== "turn"
        ? whole
        : encode({ node, n, sessionId: event.sessionId, seq: event.seq })
      return Buffer.byteLength(payload) < maxPayloadBytes ? [payload] : []
    }
    // What queued meanwhile goes in one statement, in order. `pg_notify` with bound parameters: `NOTIFY channel, $1`
    // (PgClient.notify) is refused by Postgres, whose NOTIFY takes a literal payload only.
    const send = (batch: ReadonlyArray<{ readonly n: number; readonly event: typeof SessionEvent.Type }>) => {
      const payloads = batch.flatMap(payloadOf)
      if (payloads.length === 0) return Effect.void
      return pg`SELECT count(pg_notify(${channel}, p)) FROM unnest(${payloads}::text[]) AS p`.pipe(
        Effect.catchAll((error) =>
          Effect.logWarning(`cluster events: ${payloads.length} event(s) not sent to other nodes: ${error.message}`)
        )
      )
    }
    yield* Queue.takeBetween(outbox, 1, batchSize).pipe(
      Effect.flatMap((chunk) => send(Chunk.toReadonlyArray(chunk))),
      Effect.forever,
      Effect.forkScoped
    )
    const open: Context.Tag.Service<SessionEvents>["open"] = (orgId, sessionId, fromSeq, subscribeOptions) =>
      Effect.zipRight(
        Effect.acquireRelease(
          Effect.sync(() => {
            const entry = followed.get(sessionId)
            // The replay from `fromSeq` brings the turns stored before now: the high-water check starts there.
            if (entry === undefined) {
              followed.set(sessionId, { orgId, count: 1, seq: Math.max(0, fromSeq ?? 0), landed: -1, behind: 0 })
            } else entry.count++
          }),
          () =>
            Effect.sync(() => {
              const entry = followed.get(sessionId)
              if (entry !== undefined && --entry.count === 0) followed.delete(sessionId)
            })
        ),
        local.open(orgId, sessionId, fromSeq, subscribeOptions)
      )
    const service = withSubscribe({
      open,
      publish: (event) =>
        Effect.zipRight(
          local.publish(event),
          Effect.sync(() => {
            saw(event)
            // The store notified this turn already, in the transaction that stored it.
            if (options.storeNotifies === true && event._tag === "turn") return
            Queue.unsafeOffer(outbox, { n: ++published, event })
          })
        )
    })
    return service
  })
