/**
 * clusterWiring — the cluster half of server/Wiring (`cluster.enabled`): the refusals at start, this node as a runner
 * of the cluster, and the `application_name` every connection of a node carries. Split from Wiring.ts to keep that
 * file a readable list of layer builders; Wiring re-exports the errors, so callers import them from there.
 */
import { RunnerAddress } from "@effect/cluster"
import { Duration, Layer, Option, Redacted, Schema } from "effect"
import * as Fence from "../../cluster/Fence.js"
import * as Runner from "../../cluster/Runner.js"
import type { Settings } from "../../config/Config.js"
import * as Database from "../../store/Database.js"
import { persistTimeoutMs } from "./storeWiring.js"

/** Cluster mode was asked for on a store other nodes cannot share (refused at start, before anything listens). */
export class ClusterNeedsPostgres extends Schema.TaggedError<ClusterNeedsPostgres>()("ClusterNeedsPostgres", {
  store: Schema.Literal("memory", "embedded")
}) {
  override get message(): string {
    return this.store === "memory"
      ? "cluster mode needs a Postgres database shared by every node: set DATABASE_URL (the memory store " +
        "(--memory, CORRAL_STORE=memory) cannot be shared)"
      : "cluster mode needs a Postgres database shared by every node: set DATABASE_URL (the embedded PGlite " +
        "database belongs to one process, and its advisory locks do not exclude, so two nodes would run the same sessions)"
  }
}

/** The cluster runner could not start (its port is taken, or its storage cannot be reached). */
export class ClusterStartFailed extends Schema.TaggedError<ClusterStartFailed>()("ClusterStartFailed", {
  address: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `the cluster runner at ${this.address} could not start: ${this.reason}`
  }
}

/**
 * The cluster's own Postgres pool: the runner holds one connection for its shard locks and events one for LISTEN,
 * so the pool has room beyond them for message storage (≥ 2 is the cluster's minimum).
 */
const clusterPoolSize = 6

/**
 * This node as a runner of the cluster: socket transport between runners at `cluster.host:cluster.port`, message
 * and runner storage in Postgres. Shard locks are Postgres advisory locks, refreshed at 2/7 of
 * `cluster.lockExpirationMs` (the library's 10 s of 35 s); a node that dies loses them with its database connection,
 * and is noticed by the others' health checks (`cluster.healthCheckMs`), after which its shards move.
 */
export const sharding = (settings: Settings, url: Redacted.Redacted) => {
  const { healthCheckMs, host, lockExpirationMs, port } = settings.cluster
  const sql = Database.layerPostgres(url, { maxConnections: clusterPoolSize, timeoutMs: persistTimeoutMs(settings) })
  // Every node also checks the other runners itself, a dead process and a lost machine (cluster/Watchdog), and
  // writes through its fence (cluster/Fence): cluster/Runner.
  const runner = Runner.layer({
    self: `${host}:${port}`,
    every: Duration.millis(healthCheckMs),
    shardingConfig: {
      runnerAddress: Option.some(RunnerAddress.make(host, port)),
      shardLockExpiration: Duration.millis(lockExpirationMs),
      shardLockRefreshInterval: Duration.millis(Math.max(250, Math.floor((lockExpirationMs * 2) / 7))),
      // Decoupled from the lock: a dead runner refuses its pings at once, and its shards' advisory locks went with
      // its database connection, so it is noticed within a check (plus the ping's 5 retries 0.5 s apart). A live
      // runner marked unhealthy by mistake (a ping unanswered through all retries, each bounded at 10 s) keeps its
      // locks until it lets its shards go: the mistake costs a hand-over, never two owners.
      runnerHealthCheckInterval: Duration.millis(healthCheckMs),
      // A runner marked unhealthy (by either check) has its shards reassigned at each node's next refresh: every
      // second (one small read of the runners' table) rather than the library's 3 s, for takeover within 10 s.
      refreshAssignmentsInterval: Duration.seconds(1)
    }
  }).pipe(
    Layer.mapError((error) =>
      new ClusterStartFailed({
        address: `${host}:${port}`,
        reason: error._tag === "SocketServerError" ? `cannot listen (${String(error.reason)})` : String(error)
      })
    )
  )
  return { sql, runner: Layer.provide(runner, sql) }
}

/**
 * `url` with this node's `application_name` (cluster/Fence): every connection of a cluster node carries its runner
 * address, so that the other nodes can end them when it is lost (cluster/Watchdog); it replaces one `url` names.
 */
export const named = (url: Redacted.Redacted, settings: Settings): Redacted.Redacted => {
  const parsed = new URL(Redacted.value(url))
  parsed.searchParams.set(
    "application_name",
    Fence.applicationName(`${settings.cluster.host}:${settings.cluster.port}`)
  )
  return Redacted.make(parsed.toString())
}
