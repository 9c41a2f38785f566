/**
 * The sweep: sessions of this runner's shards that nothing else would ever wake.
 *
 * The cluster wakes a session by delivering a message to it, and it delivers again every persisted message its
 * runner died before answering — so a session whose owner died mid-burst is normally recovered at once by its next
 * owner. Two states escape that: an accepted message whose cluster message was never stored (the node died, or the
 * cluster's storage failed, between storing the session's message — the acknowledgement — and handing it to the
 * cluster), which would wait in the session's inbox until the session's next message; and a session left `running`
 * whose message the cluster holds as answered (its delivery failed on the next owner), which would read `running`
 * forever. On one node the supervisor's start-up recovery covers both; in a cluster no node may run it over the
 * whole store (other nodes' sessions are live), so each runner sweeps its own shards instead.
 *
 * Every `every`, the runner lists the sessions the store says are `running` with no live actor here, and the accepted
 * messages older than `every`, keeps those of the shards it owns, and sends each such session one volatile `Wake`
 * (SessionEntity) through the cluster. The owner delivers the waiting messages in order — the cluster-hosted
 * supervisor runs a message only if it still waits and no burst took it up, so a message that is merely slow, or is
 * delivered by the cluster meanwhile, never runs twice — and loading the session recovers it as the local start-up
 * recovery does (`interrupted`, resumable with a follow-up; the same code, in the supervisor). Why the bound sits at
 * `every`: a message younger than one period may still be on its way through the cluster; the sweep costs two indexed
 * queries per period per node, so the period can be about a shard lock's life (the wiring uses
 * `cluster.lockExpirationMs`), which is how soon a dead node's shards move anyway.
 */
import { Clock, Duration, Effect, Option } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import type * as Supervisor from "../session/Supervisor.js"
import { SessionStore } from "../store/SessionStore.js"

/** Wakes sent at once, at most (each is one message handed to the cluster, not awaited). */
const concurrency = 16

/** What the sweep needs of its runner. */
export interface Options {
  /** This runner's own supervisor (which sessions have a live actor here). */
  readonly local: Supervisor.Service
  /** Sends the session's `Wake` to its owner, not awaiting it. */
  readonly wake: (sessionId: string, orgId: string) => Effect.Effect<void, unknown>
  /** Whether this runner owns the session's shard now. */
  readonly owns: (sessionId: string) => boolean
  /** The period, and the age an accepted message must reach before the sweep delivers it. */
  readonly every: Duration.DurationInput
  /**
   * The shards this runner owns now (their keys) and the shard of a session. With them, shards gained since the last
   * look (every `watchEvery`) are swept at once, whatever their messages' age (see `watch`).
   */
  readonly shards?: {
    readonly owned: () => ReadonlySet<string>
    readonly of: (sessionId: string) => string
  }
}

/**
 * How often a runner looks for shards it gained. A node that stops hands its shards over as it leaves, and a message
 * accepted for one of its sessions meanwhile was refused by it (its supervisor had stopped): the next owner must run
 * it as soon as it holds the shard, not a sweep period later.
 */
export const watchEvery = Duration.seconds(1)

/**
 * One round: the sessions to wake (session id → org), woken. Fails only when the store cannot be read (the next
 * round tries again).
 */
export const round = (options: Options): Effect.Effect<ReadonlyMap<string, string>, PersistenceFailed, SessionStore> =>
  roundOf(options, options.owns, Duration.toMillis(options.every), "nothing else would wake")

/**
 * A round over the sessions `select` keeps (of shards this runner owns), waking those `running` with no live actor
 * here and those with an accepted message at least `graceMs` old.
 */
const roundOf = (
  options: Options,
  select: (sessionId: string) => boolean,
  graceMs: number,
  why: string
): Effect.Effect<ReadonlyMap<string, string>, PersistenceFailed, SessionStore> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const now = yield* Clock.currentTimeMillis
    const targets = new Map<string, string>()
    for (const session of yield* store.listRunning()) {
      const orgId = session.principal.orgId
      if (select(session.id) && Option.isNone(options.local.peek(orgId, session.id))) {
        targets.set(session.id, orgId)
      }
    }
    for (const message of yield* store.inbox()) {
      if (now - message.acceptedAt >= graceMs && select(message.sessionId)) {
        targets.set(message.sessionId, message.orgId)
      }
    }
    if (targets.size === 0) return targets
    yield* Effect.logInfo(`cluster sweep: waking ${targets.size} session(s) ${why}`).pipe(
      Effect.annotateLogs({ sessions: [...targets.keys()].slice(0, 20).join(",") })
    )
    yield* Effect.forEach(targets, ([sessionId, orgId]) =>
      options.wake(sessionId, orgId).pipe(
        Effect.catchAll((error) =>
          Effect.logWarning(`cluster sweep: session ${sessionId}: not woken: ${String(error)}`)
        )
      ), { concurrency, discard: true })
    return targets
  })

/**
 * Every `watchEvery`, the shards this runner gained since the last look; when there are some, their sessions are
 * swept at once (`running` with no live actor here, or with an accepted message of any age: one the cluster still
 * delivers runs once all the same). The first look only notes what is held: what waits in the shards a runner holds
 * as it starts is older than its start, and the periodic sweep takes it. Until interrupted; a round that fails is
 * logged and its shards are looked at again.
 */
export const watch = (options: Options): Effect.Effect<void, never, SessionStore> => {
  const shards = options.shards
  if (shards === undefined) return Effect.void
  let held: ReadonlySet<string> | undefined = undefined
  return Effect.sleep(watchEvery).pipe(
    Effect.zipRight(Effect.suspend(() => {
      const now = shards.owned()
      const before = held
      if (before === undefined) {
        held = now
        return Effect.void
      }
      const gained = new Set([...now].filter((shard) => !before.has(shard)))
      if (gained.size === 0) {
        held = now
        return Effect.void
      }
      return roundOf(
        options,
        (sessionId) => gained.has(shards.of(sessionId)) && options.owns(sessionId),
        0,
        `of ${gained.size} shard(s) this runner just took`
      ).pipe(
        Effect.zipRight(Effect.sync(() => (held = now))),
        Effect.catchAll((error) => Effect.logWarning(`cluster sweep: the store could not be read: ${error.message}`))
      )
    })),
    Effect.forever
  )
}

/** Sweeps every `every` until interrupted (and `watch`es for gained shards); a failed round is logged. */
export const run = (options: Options): Effect.Effect<never, never, SessionStore> =>
  Effect.zipRight(
    Effect.forkScoped(watch(options)),
    Effect.sleep(options.every).pipe(
      Effect.zipRight(
        round(options).pipe(
          Effect.catchAll((error) => Effect.logWarning(`cluster sweep: the store could not be read: ${error.message}`))
        )
      ),
      Effect.forever
    )
  ).pipe(Effect.scoped)
