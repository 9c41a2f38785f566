/**
 * Session events across the nodes of a cluster: a client following a session over SSE may be connected to any
 * node, while the burst publishing its events runs on the session's owner.
 *
 * Every node keeps its own `LiveEvents` hubs (replay from the shared store, then live). Publishing on a node also
 * sends the event on the Postgres channel `corral_events` (`NOTIFY`); every node `LISTEN`s and republishes what
 * other nodes sent into its own hubs — where nobody follows the session that costs a map lookup. A turn too large
 * for a notification (Postgres caps a payload at 8000 bytes) travels as its sequence number only and the receiving
 * node reads it from the store, which the owner wrote before publishing. Nothing is lost when a notification is:
 * the next turn that arrives makes `LiveEvents` read the gap from the store, and a subscriber that reconnects
 * replays from its last sequence number. What is not stored (tool progress, deltas) is best effort across nodes,
 * as it is within one.
 *
 * `publish` stays synchronous (the loop publishes streamed deltas from a synchronous callback): the notification is
 * queued and one fiber sends the queue in order. The queue holds at most 10,000 events; beyond that (Postgres stopped
 * answering) events are dropped for other nodes only, which the store-backed replay covers for turns.
 *
 * The LISTEN connection can end (a restarted or failed-over database, `pg_terminate_backend`, a cut network) and it
 * ends silently: the client swallows its error and notifications simply stop. So each node sends itself a heartbeat
 * on the channel every 2 s, and a LISTEN that has heard none for 8 s (four in a row missed: a slow pool is not a dead
 * connection) is dropped and opened again, after 0.5 s doubling to at most 10 s between attempts (a database that
 * is down is not hammered, one that is back is heard again within seconds). Each attempt is logged with its number
 * and reason. What was published while no LISTEN held is not replayed from the channel; the store covers the turns
 * (see above).
 */
import type { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Duration, Effect, Option, Queue, Schema, Stream } from "effect"
import type { Context } from "effect"
import { SessionEvent } from "../domain/SessionEvent.js"
import type { SessionEvents } from "../events/SessionEvents.js"
import type { SessionStore } from "../store/SessionStore.js"

/** The Postgres channel events travel on. */
export const channel = "corral_events"

/** Postgres refuses a payload of 8000 bytes or more; this leaves room for the envelope. */
const maxPayloadBytes = 7_000

/** Events waiting to be sent to the other nodes, at most. */
const outboxCapacity = 10_000

/** How often a node sends itself a heartbeat on the channel. */
const heartbeatEvery = Duration.seconds(2)

/** A LISTEN that heard no heartbeat of its own node for this long is taken for dead and opened again. */
const silenceLimit = Duration.seconds(8)

/** Between attempts to LISTEN again: 0.5 s doubling, at most 10 s. */
const backoff = (attempt: number) => Duration.millis(Math.min(500 * 2 ** (attempt - 1), 10_000))

/** What travels on the channel: the whole event, a reference to a stored turn, or a node's heartbeat. */
const Wire = Schema.Union(
  Schema.Struct({ node: Schema.String, event: SessionEvent }),
  Schema.Struct({ node: Schema.String, sessionId: Schema.String, seq: Schema.Int }),
  Schema.Struct({ node: Schema.String, heartbeat: Schema.Int })
)
const encode = Schema.encodeSync(Schema.parseJson(Wire))
const decode = Schema.decodeUnknownOption(Schema.parseJson(Wire))

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
}) =>
  Effect.gen(function*() {
    const { local, node, pg, store } = options
    /** Sessions followed on this node: their org and how many follow them (a referenced turn is read for these). */
    const followed = new Map<string, { readonly orgId: string; count: number }>()
    /** When this node last heard its own heartbeat (the LISTEN is alive), and the attempts since it last held. */
    let heard = yield* Clock.currentTimeMillis
    let attempts = 0
    const republish = (text: string) =>
      Option.match(decode(text), {
        onNone: () => Effect.logDebug(`cluster events: a notification that is not an event was dropped`),
        onSome: (wire) => {
          if ("heartbeat" in wire) {
            if (wire.node !== node) return Effect.void
            return Effect.flatMap(Clock.currentTimeMillis, (now) => {
              heard = now
              if (attempts === 0) return Effect.void
              const after = attempts
              attempts = 0
              return Effect.logInfo(`cluster events: listening on ${channel} again (after ${after} attempt(s))`)
            })
          }
          if (wire.node === node) return Effect.void
          if ("event" in wire) return local.publish(wire.event)
          const follower = followed.get(wire.sessionId)
          if (follower === undefined) return Effect.void
          return store.turns(follower.orgId, wire.sessionId, wire.seq - 1).pipe(
            Effect.flatMap((turns) => {
              const turn = turns.find((t) => t.seq === wire.seq)
              return turn === undefined
                ? Effect.void
                : local.publish({ _tag: "turn", sessionId: wire.sessionId, seq: turn.seq, turn })
            }),
            Effect.catchAll((error) => Effect.logDebug(`cluster events: turn ${wire.seq} not read: ${error.message}`))
          )
        }
      })
    // Fails once the LISTEN has been silent too long; the listen's stream never ends on its own.
    const watchdog = Effect.gen(function*() {
      heard = yield* Clock.currentTimeMillis
      while (true) {
        yield* Effect.sleep(heartbeatEvery)
        const silent = (yield* Clock.currentTimeMillis) - heard
        if (silent > Duration.toMillis(silenceLimit)) {
          return yield* Effect.fail(`no heartbeat heard for ${silent} ms`)
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
    // The heartbeat goes through the pool (not the LISTEN connection); a failed one is simply missed.
    let beats = 0
    yield* Effect.suspend(() => pg`SELECT pg_notify(${channel}, ${encode({ node, heartbeat: ++beats })})`).pipe(
      Effect.catchAll((error) => Effect.logDebug(`cluster events: heartbeat not sent: ${error.message}`)),
      Effect.zipRight(Effect.sleep(heartbeatEvery)),
      Effect.forever,
      Effect.forkScoped
    )
    const outbox = yield* Queue.dropping<typeof SessionEvent.Type>(outboxCapacity)
    const send = (event: typeof SessionEvent.Type) => {
      const whole = encode({ node, event })
      const payload = Buffer.byteLength(whole) < maxPayloadBytes || event._tag !== "turn"
        ? whole
        : encode({ node, sessionId: event.sessionId, seq: event.seq })
      if (Buffer.byteLength(payload) >= maxPayloadBytes) return Effect.void
      // `pg_notify` with bound parameters: `NOTIFY channel, $1` (PgClient.notify) is refused by Postgres, whose NOTIFY
      // takes a literal payload only.
      return pg`SELECT pg_notify(${channel}, ${payload})`.pipe(
        Effect.catchAll((error) =>
          Effect.logWarning(`cluster events: session ${event.sessionId}: not sent to other nodes: ${error.message}`)
        )
      )
    }
    yield* Queue.take(outbox).pipe(Effect.flatMap(send), Effect.forever, Effect.forkScoped)
    const service: Context.Tag.Service<SessionEvents> = {
      subscribe: (orgId, sessionId, fromSeq, subscribeOptions) =>
        Stream.acquireRelease(
          Effect.sync(() => {
            const entry = followed.get(sessionId)
            if (entry === undefined) followed.set(sessionId, { orgId, count: 1 })
            else entry.count++
          }),
          () =>
            Effect.sync(() => {
              const entry = followed.get(sessionId)
              if (entry !== undefined && --entry.count === 0) followed.delete(sessionId)
            })
        ).pipe(Stream.flatMap(() => local.subscribe(orgId, sessionId, fromSeq, subscribeOptions))),
      publish: (event) =>
        Effect.zipRight(local.publish(event), Effect.sync(() => void Queue.unsafeOffer(outbox, event)))
    }
    return service
  })
