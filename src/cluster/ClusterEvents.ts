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
import { Chunk, Clock, Effect, Queue } from "effect"
import type { Context } from "effect"
import type { Turn } from "../domain/Message.js"
import type { SessionEvents } from "../events/SessionEvents.js"
import { withSubscribe } from "../events/SessionEvents.js"
import type { SessionStore } from "../store/SessionStore.js"
import * as Relay from "./internal/eventsRelay.js"
import { encode, maxPayloadBytes } from "./internal/eventsWire.js"

export { channel } from "./internal/eventsWire.js"

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
    const r: Relay.Relay = {
      local,
      pg,
      store,
      node,
      scope: yield* Effect.scope,
      followed: new Map(),
      lastHeard: new Map(),
      heard: yield* Clock.currentTimeMillis,
      attempts: 0,
      catchingUp: false,
      again: false
    }
    yield* Effect.forkScoped(Relay.listen(r))
    yield* Effect.sleep(Relay.highWaterEvery).pipe(
      Effect.zipRight(Relay.highWater(r)),
      Effect.forever,
      Effect.forkScoped
    )
    yield* Effect.forkScoped(Relay.heartbeat(r))
    // Numbered as published, so an event dropped here (a full outbox, a failed send) is a gap the receivers see.
    let published = 0
    const outbox = yield* Queue.dropping<Relay.Outgoing>(Relay.outboxCapacity)
    yield* Queue.takeBetween(outbox, 1, Relay.batchSize).pipe(
      Effect.flatMap((chunk) => Relay.send(r, Chunk.toReadonlyArray(chunk))),
      Effect.forever,
      Effect.forkScoped
    )
    const open: Context.Tag.Service<SessionEvents>["open"] = (orgId, sessionId, fromSeq, subscribeOptions) =>
      Effect.zipRight(
        Effect.acquireRelease(
          Effect.sync(() => {
            const entry = r.followed.get(sessionId)
            // The replay from `fromSeq` brings the turns stored before now: the high-water check starts there.
            if (entry === undefined) {
              r.followed.set(sessionId, { orgId, count: 1, seq: Math.max(0, fromSeq ?? 0), landed: -1, behind: 0 })
            } else entry.count++
          }),
          () =>
            Effect.sync(() => {
              const entry = r.followed.get(sessionId)
              if (entry !== undefined && --entry.count === 0) r.followed.delete(sessionId)
            })
        ),
        local.open(orgId, sessionId, fromSeq, subscribeOptions)
      )
    return withSubscribe({
      open,
      publish: (event) =>
        Effect.zipRight(
          local.publish(event),
          Effect.sync(() => {
            Relay.saw(r, event)
            // The store notified this turn already, in the transaction that stored it.
            if (options.storeNotifies === true && event._tag === "turn") return
            Queue.unsafeOffer(outbox, { n: ++published, event })
          })
        )
    })
  })
