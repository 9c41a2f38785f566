/**
 * This node as a runner of the cluster: @effect/platform-node's socket runner with SQL storage
 * (`NodeClusterSocket.layer({ storage: "sql" })`, put together here the same way), except for the runner health check,
 * which also asks for a fresh heartbeat (cluster/Watchdog `health`), and with the node's fence and watchdog
 * (cluster/Fence, cluster/Watchdog) beside it. Without the fresh-heartbeat condition the library's check would mark a
 * runner cut off from Postgres healthy again (it still answers pings) every time the watchdog took its shards.
 */
import {
  RunnerHealth,
  Runners,
  ShardingConfig,
  SocketRunner,
  SqlMessageStorage,
  SqlRunnerStorage
} from "@effect/cluster"
import type { Sharding } from "@effect/cluster"
import { layerClientProtocol, layerSocketServer } from "@effect/platform-node/NodeClusterSocket"
import type * as SocketServer from "@effect/platform/SocketServer"
import { RpcSerialization } from "@effect/rpc"
import type { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import type { ConfigError } from "effect/ConfigError"
import * as Fence from "./Fence.js"
import * as Watchdog from "./Watchdog.js"

/** Options of `layer`. */
export interface Options {
  /** The library's sharding settings (runner address, locks, health check interval…). */
  readonly shardingConfig: Partial<ShardingConfig.ShardingConfig["Type"]>
  /** This runner's address (`host:port`). */
  readonly self: string
  /** How often the fence beats and the watchdog checks (`cluster.healthCheckMs`). */
  readonly every: Duration.DurationInput
}

/**
 * How long a runner's heartbeat may be silent before the others take its shards: three beats. Its own fence stops
 * its writes after two (`freshMs`), one beat before.
 */
export const lostAfter = (every: Duration.DurationInput) => 3 * Duration.toMillis(every)

/** See the module header. Needs a `SqlClient` on the cluster's database. */
export const layer = (
  options: Options
): Layer.Layer<
  Sharding.Sharding | Runners.Runners | Fence.Fence,
  SocketServer.SocketServerError | ConfigError,
  SqlClient.SqlClient
> => {
  const every = Duration.toMillis(options.every)
  const lostAfterMs = lostAfter(every)
  const health = Layer.scoped(
    RunnerHealth.RunnerHealth,
    Effect.flatMap(RunnerHealth.makePing, (ping) => Watchdog.health(ping, lostAfterMs))
  ).pipe(Layer.provide(Runners.layerRpc), Layer.provide(layerClientProtocol))
  const runner = SocketRunner.layer.pipe(
    Layer.provide([layerSocketServer, layerClientProtocol]),
    Layer.provide(health),
    Layer.provideMerge(Layer.orDie(SqlMessageStorage.layer)),
    Layer.provide(Layer.orDie(SqlRunnerStorage.layer)),
    Layer.provide(ShardingConfig.layerFromEnv(options.shardingConfig)),
    // As NodeClusterSocket.layer has it, so that nodes of either build understand each other.
    Layer.provide(RpcSerialization.layerMsgPackWith({ maxBufferSize: undefined }))
  )
  const fence = Fence.layer({ self: options.self, every: options.every, freshMs: 2 * every })
  const watchdog = Watchdog.layer({ self: options.self, every: options.every, lostAfterMs })
  return Layer.mergeAll(runner, fence, watchdog)
}
