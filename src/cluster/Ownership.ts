/**
 * Ownership — a session's view says when no live node owns it.
 *
 * The failure it prevents: a node dies mid-burst, and until another node takes its shards (2.5–5.3 s measured with
 * the default locks and checks; up to a lock's life when the dead node cannot be told dead) its sessions read
 * `running` in the store — a client polling the view sees a burst that nothing runs. The store cannot know better:
 * the node that would have written `interrupted` is the one that died. What does know is Postgres: each runner holds
 * its shards as advisory locks on its own connection, and a dead process's locks go with its connection at once. So
 * the view of a session that reads `running` is checked against the lock of its shard: held by nobody, the view
 * carries `owner: "unknown"` (status stays `running`, which is what the store says; the next owner's load turns it
 * `interrupted`). A session of a shard this node holds needs no query.
 *
 * A lost machine (no process left to close its connections) keeps its locks until the other nodes find its heartbeat
 * stale and end its connections (cluster/Watchdog, about 6 s), and reads as owned until then. The check is one small
 * query per view of a `running` session on another node's shard — and one per page of the sessions list, whatever
 * the page holds (`markAll`) — bounded (1 s); when it fails or times out the views are left as the store has them.
 *
 * The lock numbers are @effect/cluster's (`SqlRunnerStorage`, 0.60): shard `n` of the `i`-th group of
 * `ShardingConfig.availableShardGroups` is advisory lock `(i + 1) × 1,000,000 + n` (a single 64-bit key, so
 * `classid` 0, `objsubid` 1 in `pg_locks`). test/cluster/Ownership.test.ts reads a live node's running sessions
 * through the other node and fails if they ever read `unknown` (a numbering that moved would do that).
 */
import { EntityId, Sharding, ShardingConfig } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { Corral } from "../Corral.js"
import type { SessionView } from "../domain/Session.js"
import { lockOf } from "./Fence.js"
import { SessionEntity } from "./SessionEntity.js"

/** How long the lock check may take before the view is answered as the store has it. */
const checkTimeout = "1 second"

/** Marks the view of a `running` session that no live node owns with `owner: "unknown"`. Never fails. */
export class Owners extends Context.Tag("corral/cluster/Ownership/Owners")<Owners, {
  readonly mark: (view: SessionView) => Effect.Effect<SessionView>
  /** `mark` for a page of views, with one query for all of them (the sessions list). */
  readonly markAll: (views: ReadonlyArray<SessionView>) => Effect.Effect<ReadonlyArray<SessionView>>
}>() {}

/**
 * `Owners`, and `Corral` whose `get` marks its view with it; everything else is the wrapped service. Needs the
 * cluster's `Sharding` and a `SqlClient` on the cluster's Postgres database.
 */
export const layer: Layer.Layer<Corral | Owners, never, Corral | Sharding.Sharding | SqlClient.SqlClient> = Layer
  .effectContext(Effect.gen(function*() {
    const corral = yield* Corral
    const sharding = yield* Sharding.Sharding
    const sql = yield* SqlClient.SqlClient
    const groups = Option.match(yield* Effect.serviceOption(ShardingConfig.ShardingConfig), {
      onNone: () => ["default"] as ReadonlyArray<string>,
      onSome: (config) => config.availableShardGroups
    })

    /** The shard lock of a session, or `undefined` when no query is needed (a shard this node holds, or unknown). */
    const lockToCheck = (sessionId: string): number | undefined => {
      const entityId = EntityId.make(sessionId)
      const shard = sharding.getShardId(entityId, SessionEntity.getShardGroup(entityId))
      return sharding.hasShardId(shard) ? undefined : lockOf(groups, shard)
    }

    /**
     * Which of `locks` some process holds, in one query; every one of them when that cannot be told (`what` names
     * the sessions in the warning).
     */
    const heldOf = (locks: ReadonlyArray<number>, what: string): Effect.Effect<ReadonlySet<number>> =>
      locks.length === 0 ? Effect.succeed(new Set()) : sql<{ lock: number }>`SELECT DISTINCT l.objid::int AS lock
        FROM pg_locks l JOIN pg_database d ON d.oid = l.database
        WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objsubid = 1
          AND l.objid::int IN ${sql.in(locks)} AND d.datname = current_database()`.pipe(
        Effect.map((rows): ReadonlySet<number> => new Set(rows.map((row) => Number(row.lock)))),
        Effect.timeout(checkTimeout),
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning(
              `${what}: whether a node owns it could not be told (${String(error)}); its view says what the store says`
            ),
            new Set(locks) as ReadonlySet<number>
          )
        )
      )

    const markAll = (views: ReadonlyArray<SessionView>): Effect.Effect<ReadonlyArray<SessionView>> => {
      const checked = views.flatMap((view) => {
        const lock = view.status === "running" ? lockToCheck(view.id) : undefined
        return lock === undefined ? [] : [{ id: view.id, lock }]
      })
      if (checked.length === 0) return Effect.succeed(views)
      const what = checked.length === 1
        ? `session ${checked[0]!.id}`
        : `sessions ${checked.map((c) => c.id).join(", ")}`
      return Effect.map(heldOf([...new Set(checked.map((c) => c.lock))], what), (held) => {
        const unowned = new Set(checked.filter((c) => !held.has(c.lock)).map((c) => c.id))
        return unowned.size === 0
          ? views
          : views.map((view) => unowned.has(view.id) ? { ...view, owner: "unknown" as const } : view)
      })
    }

    const mark = (view: SessionView): Effect.Effect<SessionView> => Effect.map(markAll([view]), (marked) => marked[0]!)

    return Context.make(Corral, { ...corral, get: (by, sessionId) => Effect.flatMap(corral.get(by, sessionId), mark) })
      .pipe(Context.add(Owners, { mark, markAll }))
  }))

/**
 * `view` as `Owners` marks it when this process is a cluster node (`layer`); as it is otherwise. For readers that
 * build a view from the store themselves rather than through `Corral.get` (the HTTP API's session reads).
 */
export const mark = (view: SessionView): Effect.Effect<SessionView> =>
  Effect.flatMap(
    Effect.serviceOption(Owners),
    Option.match({ onNone: () => Effect.succeed(view), onSome: (owners) => owners.mark(view) })
  )

/** `markAll` of the `Owners` in context (cluster mode): one lock query for the page; the views as they are otherwise. */
export const markAll = (views: ReadonlyArray<SessionView>): Effect.Effect<ReadonlyArray<SessionView>> =>
  Effect.flatMap(
    Effect.serviceOption(Owners),
    Option.match({ onNone: () => Effect.succeed(views), onSome: (owners) => owners.markAll(views) })
  )
