/**
 * The watchdog: every node checks the other runners, so a dead one's shards move within seconds.
 *
 * @effect/cluster checks runners' health from one runner only (a cluster singleton). When the runner that dies is the
 * one running that check, nobody marks it unhealthy: its shards stay assigned to it until its heartbeat is older than
 * a shard lock's life (`cluster.lockExpirationMs`, 35 s by default). In the soak, the kills of that runner took 28–31 s
 * to hand over and the others 4–6 s. So each node also checks, every `every`, each other runner listed healthy in
 * `cluster_runners`: a TCP connection to its runner address refused three times, 0.5 s apart, means nothing listens
 * there — the process is gone (a stalled process keeps its listening socket, and the kernel accepts for it) — and the
 * runner is marked unhealthy, as the library's own check does: every node then reassigns its shards at its next
 * refresh (within 3 s), and their advisory locks went with its database connection. A connection that times out (a
 * lost machine, a partition) proves nothing, so it is left to the library's check and the lock's expiry.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { connect } from "node:net"

/** Refusals, 0.5 s apart, that make a runner dead. */
const attempts = 3

/** How long one connection attempt may take; longer proves nothing (see the module header). */
const connectTimeoutMs = 1_000

/** What one connection attempt to `address` (`host:port`) found. */
const probe = (address: string): Effect.Effect<"refused" | "listening" | "unknown"> =>
  Effect.async<"refused" | "listening" | "unknown">((resume) => {
    const colon = address.lastIndexOf(":")
    const port = Number(address.slice(colon + 1))
    if (colon <= 0 || !Number.isInteger(port)) return resume(Effect.succeed("unknown"))
    const socket = connect({ host: address.slice(0, colon), port })
    const done = (found: "refused" | "listening" | "unknown") => {
      clearTimeout(timer)
      socket.destroy()
      resume(Effect.succeed(found))
    }
    const timer = setTimeout(() => done("unknown"), connectTimeoutMs)
    socket.once("connect", () => done("listening"))
    socket.once("error", (error: NodeJS.ErrnoException) => done(error.code === "ECONNREFUSED" ? "refused" : "unknown"))
    return Effect.sync(() => done("unknown"))
  })

/** Whether every one of `attempts` connections to `address`, 0.5 s apart, was refused. */
const dead = (address: string): Effect.Effect<boolean> =>
  Effect.gen(function*() {
    for (let i = 0; i < attempts; i++) {
      if (i > 0) yield* Effect.sleep("500 millis")
      if ((yield* probe(address)) !== "refused") return false
    }
    return true
  })

/** One check: the runners found dead and marked unhealthy. Fails only when the table cannot be read or written. */
export const check = (self: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ address: string }>`SELECT address FROM cluster_runners
      WHERE healthy AND address <> ${self}`
    const found = yield* Effect.filter(rows.map((row) => row.address), dead, { concurrency: "unbounded" })
    for (const address of found) {
      yield* sql`UPDATE cluster_runners SET healthy = false WHERE address = ${address} AND healthy`
      yield* Effect.logWarning(`cluster: runner ${address} refuses connections: marked unhealthy, its shards move`)
        .pipe(Effect.annotateLogs({ runner: address }))
    }
    return found
  })

/**
 * Checks the other runners every `every` (see the module header) for as long as the layer lives. `self` is this
 * runner's address (`host:port`), never checked. A check that fails (the cluster's tables not made yet, the database
 * away) is logged at debug level and the next one runs.
 */
export const layer = (options: { readonly self: string; readonly every: Duration.DurationInput }) =>
  Layer.scopedDiscard(
    Effect.forkScoped(
      Effect.sleep(options.every).pipe(
        Effect.zipRight(
          check(options.self).pipe(
            Effect.catchAllCause((cause) => Effect.logDebug("cluster watchdog: check not run", cause))
          )
        ),
        Effect.forever
      )
    )
  )

/** How often `layer` checks by default. */
export const defaultEvery = Duration.seconds(2)
