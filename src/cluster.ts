/**
 * `corral/cluster` — the `Corral` service hosting sessions as @effect/cluster entities on the runners of a cluster.
 *
 * It lives apart from `corral` so that an in-memory or single-process embed never loads @effect/cluster (and its
 * @effect/rpc, @effect/sql… chain): those are optional peers, needed only by a program that imports this entry.
 */
import type { Sharding } from "@effect/cluster"
import { Layer } from "effect"
import * as SessionEntity from "./cluster/SessionEntity.js"
import { Corral, make } from "./Corral.js"
import type { PersistenceFailed } from "./domain/Errors.js"
import type { SessionEvents } from "./events/SessionEvents.js"
import type { Providers } from "./model/ModelProvider.js"
import type * as Supervisor from "./session/Supervisor.js"
import type { SessionStore } from "./store/SessionStore.js"
import type { ToolExecutor } from "./tools/ToolExecutor.js"

/** Options of `layerCluster`: the local supervisor's (hosting is always `"cluster"`), and the sweep's period. */
export type ClusterOptions = SessionEntity.Options

/**
 * The service over the ports, hosting sessions as cluster entities over a `Sharding` the embedder provides (for
 * example `NodeClusterSocket.layer({ storage: "sql" })` with a Postgres `SqlClient`): this process is a runner (it
 * hosts the sessions of the shards it owns) and a client of the others. Every message goes to the session's owner;
 * readers read the shared store. The store must be shared by every runner (Postgres): each owner rebuilds a session
 * from it when the session moves. The `Supervisor` it provides routes through the cluster; its `live`/`running`
 * describe this runner's own actors. Fails only if the local supervisor cannot start.
 */
export const layerCluster = (
  options: ClusterOptions = {}
): Layer.Layer<
  Corral | Supervisor.Supervisor,
  PersistenceFailed,
  SessionStore | SessionEvents | ToolExecutor | Providers | Sharding.Sharding
> => Layer.effect(Corral, make).pipe(Layer.provideMerge(SessionEntity.layer(options)))
