/**
 * Fence — a node that may have lost its shards writes nothing for their sessions.
 *
 * The failure it prevents: a node cut off from Postgres (a lost machine, a partition: its sockets stay open, nothing
 * flows) keeps running its sessions in memory. The other nodes take its shards once its heartbeat is stale
 * (cluster/Watchdog: they end its database connections, which frees its shard locks) and run those sessions
 * themselves. When the partition heals, the cut-off node still believes it owns them until @effect/cluster's next
 * lock refresh tells it otherwise, and whatever its actors write meanwhile — a turn of the burst it was running, the
 * landing of that burst as its entity stops — would land in a transcript another node now writes. The store cannot
 * refuse it: a turn's sequence number is the session's counter plus one, whoever asks (store/SqlStore.ts), so a
 * stale writer's turn is numbered, not rejected.
 *
 * So this node's own actors (the local supervisor under the session entity) write through `guard`: a write for a
 * session goes ahead only if this node's last view of Postgres is fresh (read less than `freshMs` ago, measured
 * from when it was asked) and shows the advisory lock of the session's shard held by one of this node's own
 * connections (they carry `applicationName`). A view that is stale, or does not show the lock as this node's (a
 * shard just acquired, or one lost), is read again at once (one statement shared by every writer waiting for it,
 * bounded) and decides. A refused write fails `PersistenceFailed`, naming the session; nothing is written.
 *
 * Why that is enough: a node is taken over only once its heartbeat (written with each view, every `every`) is older
 * than `lostAfterMs` > `freshMs`, so a write this fence let through was issued before anyone could take the node's
 * shards; and taking them ends every connection of the node, so such a write that had not reached Postgres by then
 * never does. What remains (docs/cluster.md, "What moves when a node dies"): a write let through in the last moments before the
 * fence closes, that waits for a *new* connection, lands if that connection opens — the partition healed — after
 * the takeover; opening a connection gives up after 5 s.
 */
import { SqlClient } from "@effect/sql"
import { Context, Deferred, Duration, Effect, Layer, Option } from "effect"
import { PersistenceFailed } from "../domain/Errors.js"
import type { SessionStore } from "../store/SessionStore.js"

type Store = Context.Tag.Service<SessionStore>

/** The `application_name` of every database connection of the node whose runner is at `address` (`host:port`). */
export const applicationName = (address: string): string => `${applicationPrefix}${address}`.slice(0, 63)

/** What `applicationName` puts before the address. */
export const applicationPrefix = "corral-runner "

/**
 * The advisory lock of a shard, as @effect/cluster numbers them (`SqlRunnerStorage`, 0.60): shard `n` of the `i`-th
 * group of `ShardingConfig.availableShardGroups` is `(i + 1) × 1,000,000 + n` — a single 64-bit key, so `classid` 0
 * and `objsubid` 1 in `pg_locks`. `undefined` for a group the config does not list.
 */
export const lockOf = (groups: ReadonlyArray<string>, shard: { readonly group: string; readonly id: number }) => {
  const index = groups.indexOf(shard.group)
  return index < 0 ? undefined : (index + 1) * 1_000_000 + shard.id
}

/** What one read of Postgres showed, and when it was asked (this process's clock). */
interface View {
  readonly askedAt: number
  /** Advisory locks held by this node's connections. */
  readonly mine: ReadonlySet<number>
}

/** The fence of this node (see the module header). */
export class Fence extends Context.Tag("corral/cluster/Fence")<Fence, {
  /**
   * `store` whose session writes (turns, state, trajectories, settled messages, approvals) go ahead only while
   * this node holds the lock of the session's shard; `lockOf(sessionId)` gives that lock.
   */
  readonly guard: (store: Store, lockOf: (sessionId: string) => number | undefined) => Store
  /** Reads the view again now (and writes this node's heartbeat); fails when Postgres does not answer. */
  readonly beat: Effect.Effect<void, unknown>
}>() {}

/** Options of `layer`. */
export interface Options {
  /** This runner's address (`host:port`): its heartbeat row, and its connections' `applicationName`. */
  readonly self: string
  /** How often the view is read and the heartbeat written. */
  readonly every: Duration.DurationInput
  /** How old a view may be for a write to go ahead on it (must be under the others' `lostAfterMs`). */
  readonly freshMs: number
}

/** How long a writer waits for a view read on its behalf before its write is refused. */
const readWait = Duration.seconds(2)

/** How long one read may take before it is given up (the next beat or writer asks again). */
const readLimit = Duration.seconds(10)

/**
 * The fence, and its heartbeat every `every` for as long as the layer lives. A beat that fails is logged at debug
 * level (the view then ages, and writes wait for a fresh one). Needs a `SqlClient` on the cluster's database.
 */
export const layer = (options: Options): Layer.Layer<Fence, never, SqlClient.SqlClient> =>
  Layer.scoped(
    Fence,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const scope = yield* Effect.scope
      const app = applicationName(options.self)
      let view: View = { askedAt: 0, mine: new Set() }
      /** A read under way, and when it was asked: a writer that needs a read asked after its own check joins it. */
      let reading: { readonly askedAt: number; readonly done: Deferred.Deferred<View, unknown> } | undefined

      const read = Effect.gen(function*() {
        const askedAt = Date.now()
        const rows = yield* sql<{ lock: number }>`WITH beat AS (
            UPDATE cluster_runners SET last_heartbeat = NOW() WHERE address = ${options.self} RETURNING 1
          )
          SELECT l.objid::int AS lock FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objsubid = 1
            AND a.application_name = ${app}
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`
        const next: View = { askedAt, mine: new Set(rows.map((row) => Number(row.lock))) }
        if (next.askedAt > view.askedAt) view = next
        return next
      })

      /** A view asked no earlier than `after`: the one under way if it was, or a new read (on a fiber of its own, so
       * that a waiter that gives up does not stop it for the others). */
      const fresh = (after: number): Effect.Effect<View, unknown> =>
        Effect.suspend(() => {
          if (reading !== undefined && reading.askedAt >= after) return Deferred.await(reading.done)
          return Effect.gen(function*() {
            const done = yield* Deferred.make<View, unknown>()
            const entry = { askedAt: Date.now(), done }
            reading = entry
            yield* read.pipe(
              Effect.timeout(readLimit),
              Effect.exit,
              Effect.flatMap((exit) => Deferred.done(done, exit)),
              Effect.ensuring(Effect.sync(() => {
                if (reading === entry) reading = undefined
              })),
              Effect.forkIn(scope)
            )
            return yield* Deferred.await(done)
          })
        })

      const beat = Effect.asVoid(fresh(Date.now()))

      yield* Effect.forkScoped(
        beat.pipe(
          Effect.catchAllCause((cause) => Effect.logDebug("cluster fence: heartbeat not written", cause)),
          Effect.zipRight(Effect.sleep(options.every)),
          Effect.forever
        )
      )

      const refused = (operation: string, sessionId: string, why: string) =>
        new PersistenceFailed({
          operation,
          message: `session ${sessionId}: not written by this node: ${why} (its shard may have moved to another node)`
        })

      /** Succeeds when this node may write for `sessionId` now. */
      const allowed = (operation: string, sessionId: string, lock: number | undefined) =>
        Effect.suspend((): Effect.Effect<void, PersistenceFailed> => {
          if (lock === undefined) return Effect.void
          const now = Date.now()
          if (now - view.askedAt <= options.freshMs && view.mine.has(lock)) return Effect.void
          return fresh(now).pipe(
            Effect.timeoutFail({ duration: readWait, onTimeout: () => "no answer" }),
            Effect.mapError((error) =>
              refused(operation, sessionId, `the database did not confirm its ownership (${String(error)})`)
            ),
            Effect.flatMap((seen) =>
              seen.mine.has(lock)
                ? Effect.void
                : Effect.fail(refused(operation, sessionId, "it does not hold the lock of the session's shard"))
            )
          )
        })

      const guard = (store: Store, lockOfSession: (sessionId: string) => number | undefined) => {
        const check = (operation: string, sessionId: string) => allowed(operation, sessionId, lockOfSession(sessionId))
        return {
          ...store,
          appendTurn: (sessionId, entry, at, timeoutMs) =>
            Effect.zipRight(check("appendTurn", sessionId), store.appendTurn(sessionId, entry, at, timeoutMs)),
          saveState: (id, state, at) => Effect.zipRight(check("saveState", id), store.saveState(id, state, at)),
          settle: (sessionId, messageId) =>
            Effect.zipRight(check("settle", sessionId), store.settle(sessionId, messageId)),
          saveTrajectory: (trajectory) =>
            Effect.zipRight(check("saveTrajectory", trajectory.sessionId), store.saveTrajectory(trajectory)),
          issueApprovals: (sessionId, records) =>
            Effect.zipRight(check("issueApprovals", sessionId), store.issueApprovals(sessionId, records))
        } satisfies Store
      }

      return Fence.of({ guard, beat })
    })
  )

/** `store` guarded by the `Fence` in context, if any (cluster mode); as it is otherwise. */
export const guarded = (
  store: Store,
  lockOfSession: (sessionId: string) => number | undefined
): Effect.Effect<Store> =>
  Effect.map(
    Effect.serviceOption(Fence),
    Option.match({ onNone: () => store, onSome: (fence) => fence.guard(store, lockOfSession) })
  )
