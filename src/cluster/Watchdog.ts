/**
 * The watchdog: every node checks the other runners, so a dead one's shards move within seconds — a dead process's
 * and a lost machine's alike.
 *
 * @effect/cluster checks runners' health from one runner only (a cluster singleton). When the runner that dies is the
 * one running that check, nobody marks it unhealthy: its shards stay assigned to it until its heartbeat is older than
 * a shard lock's life (`cluster.lockExpirationMs`, 35 s by default). In the soak, the kills of that runner took 28–31 s
 * to hand over and the others 4–6 s. So each node also checks, every `every`, the other runners in `cluster_runners`:
 *
 * - **A dead process.** A TCP connection to its runner address refused three times, 0.5 s apart, means nothing
 *   listens there — the process is gone (a stalled process keeps its listening socket, and the kernel accepts for
 *   it) — and the runner is marked unhealthy, as the library's own check does: every node then reassigns its shards
 *   at its next refresh (within 1 s), and their advisory locks went with its database connection.
 * - **A lost machine** (power, network: no process left to close its connections, or one that cannot reach
 *   Postgres). Its connections stay open on the server, holding its shard locks, until Postgres's TCP gives up on
 *   them — minutes to hours — so marking it unhealthy is not enough: its shards would be assigned to the others, who
 *   could not lock them. Every node writes its heartbeat every `every` (cluster/Fence, with its view of its locks); a
 *   runner whose heartbeat is older than `lostAfterMs` (Postgres's clock) is marked unhealthy and every backend of
 *   this database whose `application_name` is that runner's (`Fence.applicationName`) is ended with
 *   `pg_terminate_backend` (those opened before it fell silent: a node started again on the same address is left alone),
 *   in one statement, repeated at each check while any remains. Its locks go with them, and
 *   whatever it sent that had not reached Postgres never will. Its own fence stopped its writes `freshMs` into the
 *   silence, before this can happen (cluster/Fence).
 *
 * The library's health check marks a runner healthy again when its pings are answered; a runner cut off from
 * Postgres alone still answers them, so `health` also asks for a fresh heartbeat (otherwise the two checks would
 * take its shards away and give them back every period).
 */
import { RunnerHealth } from "@effect/cluster"
import type { RunnerAddress } from "@effect/cluster"
import { SqlClient } from "@effect/sql"
import { Duration, Effect, Layer } from "effect"
import { connect } from "node:net"
import { applicationPrefix } from "./Fence.js"

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

/**
 * The runners whose heartbeat is older than `lostAfterMs`, marked unhealthy, with every backend they hold ended (see
 * the module header), in one statement; each with how many backends it had left. Fails when the statement does.
 * Only connections opened before the runner fell silent are ended: a node started again on the same address (its
 * row still stale until it registers) opens new ones, which must live. `pg_terminate_backend` is in the select list of a subquery that is not flattened (`OFFSET 0`), so it runs only for
 * the rows its filter kept: in a WHERE clause the planner may evaluate it before the other conditions, and it ended
 * every connection of the database when tried so.
 */
export const endLost = (self: string, lostAfterMs: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ address: string; ended: number; marked: boolean }>`WITH lost AS (
        SELECT address, last_heartbeat FROM cluster_runners
        WHERE address <> ${self} AND last_heartbeat < NOW() - make_interval(secs => ${lostAfterMs / 1000})
      ), marked AS (
        UPDATE cluster_runners r SET healthy = false FROM lost WHERE r.address = lost.address AND r.healthy
        RETURNING r.address
      )
      SELECT lost.address, EXISTS (SELECT 1 FROM marked WHERE marked.address = lost.address) AS marked,
        (SELECT count(*) FILTER (WHERE ended) FROM (
          SELECT pg_terminate_backend(a.pid) AS ended FROM pg_stat_activity a
          WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
            AND a.application_name = left(${applicationPrefix} || lost.address, 63)
            AND a.backend_start < lost.last_heartbeat + make_interval(secs => ${lostAfterMs / 1000})
          OFFSET 0
        ) terminated)::int AS ended
      FROM lost`
    for (const row of rows) {
      yield* Effect.logDebug(`cluster watchdog: runner ${row.address} silent`, row)
      if (row.ended === 0 && !row.marked) continue
      yield* Effect.logWarning(
        `cluster: runner ${row.address} has not written its heartbeat for over ${lostAfterMs} ms: ` +
          `${row.marked ? "marked unhealthy, " : ""}${row.ended} of its database connection(s) ended; its shards move`
      ).pipe(Effect.annotateLogs({ runner: row.address }))
    }
    return rows.filter((row) => row.ended > 0 || row.marked).map((row) => row.address)
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
 * Checks the other runners every `every`, and for a lost one twice as often (see the module header), for as long as
 * the layer lives. `self` is this
 * runner's address (`host:port`), never checked. A check that fails (the cluster's tables not made yet, the database
 * away) is logged at debug level and the next one runs.
 */
export const layer = (
  options: { readonly self: string; readonly every: Duration.DurationInput; readonly lostAfterMs: number }
) =>
  Layer.scopedDiscard(
    Effect.gen(function*() {
      const every = Duration.decode(options.every)
      const repeat = <A, E, R>(period: Duration.Duration, effect: Effect.Effect<A, E, R>) =>
        Effect.forkScoped(
          Effect.sleep(period).pipe(
            Effect.zipRight(
              effect.pipe(Effect.catchAllCause((cause) => Effect.logDebug("cluster watchdog: check not run", cause)))
            ),
            Effect.forever
          )
        )
      yield* repeat(every, check(options.self))
      // One statement, and the bound of a lost machine's takeover: twice as often.
      yield* repeat(Duration.unsafeDivide(every, 2), endLost(options.self, options.lostAfterMs))
    })
  )

/**
 * The library's runner health (`ping`: a runner is alive when it answers a ping), and also a heartbeat written less
 * than `lostAfterMs` ago: a runner that answers pings but cannot reach Postgres is not alive for the cluster (see the
 * module header). A heartbeat that cannot be read counts as fresh (the ping decides).
 */
export const health = (ping: RunnerHealth.RunnerHealth["Type"], lostAfterMs: number) =>
  Effect.map(SqlClient.SqlClient, (sql) =>
    RunnerHealth.RunnerHealth.of({
      isAlive: (address: RunnerAddress.RunnerAddress) =>
        Effect.flatMap(ping.isAlive(address), (alive) =>
          !alive ? Effect.succeed(false) : sql<{ fresh: boolean }>`SELECT last_heartbeat >=
              NOW() - make_interval(secs => ${lostAfterMs / 1000}) AS fresh
            FROM cluster_runners WHERE address = ${`${address.host}:${address.port}`}`.pipe(
            Effect.map((rows) =>
              rows[0]?.fresh !== false
            ),
            Effect.timeout("2 seconds"),
            Effect.orElseSucceed(() => true)
          ))
    }))

/** How often `layer` checks by default. */
export const defaultEvery = Duration.seconds(2)
