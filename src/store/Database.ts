/**
 * Database — which Postgres Corral talks to. `DATABASE_URL` set: that server, through a pooled @effect/sql-pg
 * client. Unset: the embedded PGlite under `CORRAL_DATA_DIR`. Either way the rest of Corral sees one `SqlClient`
 * of the pg dialect, so every query and migration runs on both.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqlError } from "@effect/sql/SqlError"
import { Config, Duration, Effect, Layer, Option, Redacted } from "effect"
import type { ConfigError } from "effect"
import * as Pg from "pg"
import { PersistenceFailed } from "../domain/Errors.js"
import * as Embedded from "./Embedded.js"
import { describe } from "./internal/failure.js"
import * as Overload from "./internal/overload.js"

/** The database settings, from the environment (or any `ConfigProvider`). */
export const config = Config.all({
  url: Config.option(
    Config.redacted("DATABASE_URL").pipe(
      Config.withDescription("Postgres connection URL; when unset Corral runs an embedded PGlite database")
    )
  ),
  dataDir: Config.string("CORRAL_DATA_DIR").pipe(
    Config.withDefault("./.corral"),
    Config.withDescription("Directory of the embedded database (used only without DATABASE_URL)")
  ),
  maxConnections: Config.integer("CORRAL_DB_MAX_CONNECTIONS").pipe(
    Config.withDefault(10),
    Config.withDescription("Size of the Postgres connection pool (used only with DATABASE_URL)")
  )
})

/** Pool settings for a Postgres server. */
export interface PostgresOptions {
  readonly maxConnections?: number
  /**
   * The persistence timeout (default 10 s, `limits.persistTimeoutMs`): the most a statement may take, and the most
   * waiting for a pooled connection may take while the pool answers nothing (six times that while it answers others:
   * store/internal/overload.ts). See `layerPostgres`.
   */
  readonly timeoutMs?: number
  /**
   * Sets `search_path` on every pooled connection (a startup option, so no connection ever runs with another), and
   * with it where every unqualified table name resolves. Must be a plain lowercase identifier, already validated by
   * the caller (`corral/sql` checks it); the schema itself must exist before anything is created in it.
   */
  readonly searchPath?: string
}

/** The default persistence timeout (`limits.persistTimeoutMs`' seed default). */
export const defaultTimeoutMs = 10_000

/** How long opening a connection may take. */
const connectTimeoutMs = 5_000

/**
 * A node-postgres client that gives up its connection when one of its statements times out (`query_timeout`).
 * node-postgres fails the caller but keeps the connection, the statement still in flight on it: the pool would hand
 * it to the next caller, whose statement queues behind the hung one on a socket that may never answer again (a
 * partition). Marked unusable here, the pool discards it on release instead, and destroying the socket ends it
 * now rather than when TCP notices.
 *
 * It also runs one statement at a time of its own accord. A connection held for a while (a transaction, or the
 * cluster's shard-lock connection, which @effect/cluster's lock refresh, acquisition and release use from several
 * fibers) is sometimes given a statement while another runs; node-postgres queued it internally, and warns that it
 * will stop doing so in pg@9 ("Calling client.query() when the client is already executing a query"). Statements
 * given with a callback — every statement @effect/sql-pg runs — wait here for the one before to answer, in order.
 */
class DiscardOnTimeout extends Pg.Client {
  /** Statements waiting for the one in flight, oldest first; `running` while one is in flight. */
  private waiting: Array<Array<unknown>> = []
  private running = false

  // The pool bounds waiting for a pooled connection (PatientPool); opening one keeps its own, shorter bound (an
  // unreachable server is an outage, noticed within 5 s, or within the persistence timeout when that is shorter):
  // `openTimeoutMillis`, a pool option of ours the pool hands on.
  constructor(config: Pg.PoolConfig) {
    const open = typeof config["openTimeoutMillis"] === "number" ? config["openTimeoutMillis"] : connectTimeoutMs
    super({ ...config, connectionTimeoutMillis: Math.min(connectTimeoutMs, open) })
  }

  override query(...args: Array<unknown>): unknown {
    const last = args.length - 1
    const callback = args[last]
    if (typeof callback !== "function") return super.query(...args)
    args[last] = (error: unknown, result: unknown) => {
      if (error instanceof Error && error.message === "Query read timeout") {
        // node-postgres's own flag, the one its pool reads on release (pg-pool `_release`).
        Reflect.set(this, "_queryable", false)
        this.connection.stream.destroy()
      }
      // The next statement goes before this one's caller resumes, so the order given is the order run.
      const next = this.waiting.shift()
      if (next === undefined) this.running = false
      else super.query(...next)
      callback(error, result)
    }
    if (this.running) {
      this.waiting.push(args)
      return undefined
    }
    this.running = true
    return super.query(...args)
  }
}

type ConnectCallback = (error: Error | undefined, client?: unknown, release?: (error?: unknown) => void) => void

/**
 * A pool whose wait for a connection tells overload from outage (store/internal/overload.ts). node-postgres bounds
 * the wait with one timer (`connectionTimeoutMillis`) and keeps a waiter whose caller gave up in its queue until it is
 * served or that timer fires; served, it opens a connection if the pool has room. Here a waiter that has waited the
 * persistence timeout fails then if no connection came back answered meanwhile (the database answered nothing: an
 * outage), and otherwise waits on, half a timeout at a time, up to the overload ceiling. A waiter that fails leaves
 * the queue at once: after a partition heals, the callers that gave up during it do not each cost the pool a
 * connection attempt (through a network that was down, each as long as the connect timeout) ahead of the new ones.
 *
 * Relies on node-postgres's queue (pg-pool 3.x `_pendingQueue`, items holding the caller's callback when the pool has
 * no `connectionTimeoutMillis` of its own), as its own timeout does.
 */
class PatientPool extends Pg.Pool {
  /** Counts connections handed back in working order: statements the database answered. */
  private readonly liveness = new Overload.Liveness()

  constructor(config: Pg.PoolConfig, private readonly timeoutMs: number) {
    super({ ...config, connectionTimeoutMillis: 0 })
    this.on("release", (error, client) => {
      if (error === undefined && Reflect.get(client, "_queryable") !== false) this.liveness.answered()
    })
  }

  override connect(callback?: ConnectCallback): unknown {
    // The promise form (no caller of Corral's uses it) goes through the same bound.
    if (callback === undefined) {
      return new Promise((resolve, reject) => {
        this.connect((error, client) => error === undefined ? resolve(client) : reject(error))
      })
    }
    let settled = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const served: ConnectCallback = (error, client, release) => {
      if (settled) {
        if (error === undefined) release?.()
        return
      }
      settled = true
      if (timer !== undefined) clearTimeout(timer)
      callback(error, client, release)
    }
    const wait = (waited: number, seen: number, ms: number) => {
      timer = setTimeout(() => {
        if (settled) return
        const more = this.liveness.more(waited, this.timeoutMs, seen)
        if (more > 0) return wait(waited + more, this.liveness.answers, more)
        settled = true
        const queue = Reflect.get(this, "_pendingQueue") as Array<{ readonly callback: unknown }>
        const at = queue.findIndex((item) => item.callback === served)
        if (at >= 0) queue.splice(at, 1)
        callback(
          new Error(
            waited > this.timeoutMs
              ? `timeout exceeded when trying to connect (waited ${waited} ms; overloaded: the pool went on answering others)`
              : "timeout exceeded when trying to connect"
          )
        )
      }, ms)
      timer.unref()
    }
    wait(this.timeoutMs, this.liveness.answers, this.timeoutMs)
    return super.connect(served)
  }
}

const failed = (cause: unknown, message: string) => new SqlError({ cause, message })

/**
 * A pooled `PgClient` (also provided as `SqlClient`) on the server at `url`. A dead server fails the layer at once
 * (it runs `SELECT 1` when built) with `PersistenceFailed`. Every wait is bounded, so an outage or a partition fails
 * statements instead of hanging them: opening a connection gives up after 5 s, waiting for a pooled one after the
 * persistence timeout when nothing was answered meanwhile, or up to six while the pool answers others (a spike of
 * work is overload, not an outage: `PatientPool`), and a statement after the persistence timeout, on the client (the socket may
 * be silent) and on the server (`statement_timeout`: it stops working for a caller that left). A connection whose
 * statement timed out is discarded, never reused; broken connections are replaced by the pool on next use.
 */
export const layerPostgres = (
  url: Redacted.Redacted,
  options: PostgresOptions = {}
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PersistenceFailed> => {
  const timeoutMs = Math.max(1, Math.floor(options.timeoutMs ?? defaultTimeoutMs))
  return PgClient.layerFromPool({
    acquire: Effect.acquireRelease(
      Effect.suspend(() => {
        // Waiting for a connection is waiting behind this process's own statements: overload, not an outage, while
        // the pool keeps answering (PatientPool).
        const pool = new PatientPool({
          connectionString: Redacted.value(url),
          max: options.maxConnections ?? 10,
          openTimeoutMillis: timeoutMs,
          idleTimeoutMillis: 30_000,
          query_timeout: timeoutMs,
          statement_timeout: timeoutMs,
          // Notices a peer that vanished while the connection idles (a real partition; on loopback the kernel
          // answers the probes, so tests rely on the timeouts above).
          keepAlive: true,
          keepAliveInitialDelayMillis: 10_000,
          application_name: "corral",
          ...(options.searchPath === undefined ? {} : { options: `-c search_path=${options.searchPath}` }),
          Client: DiscardOnTimeout
        }, timeoutMs)
        pool.on("error", () => {})
        return Effect.tryPromise({
          try: () => pool.query("SELECT 1"),
          catch: (cause) => failed(cause, "could not connect")
        })
          .pipe(
            Effect.timeoutFail({
              duration: Duration.millis(connectTimeoutMs),
              onTimeout: () => failed(new Error(`no answer within ${connectTimeoutMs} ms`), "could not connect")
            }),
            Effect.tapError(() => Effect.promise(() => pool.end()).pipe(Effect.timeoutOption(1_000))),
            Effect.as(pool)
          )
      }),
      // A connection still held by a hung statement would keep `end` waiting: bounded, like the statements.
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1_000))
    ),
    applicationName: "corral"
  }).pipe(Layer.mapError((error) => new PersistenceFailed({ operation: "connect", message: describe(error) })))
}

/**
 * The database from configuration: Postgres when `DATABASE_URL` is set, else the embedded PGlite in
 * `CORRAL_DATA_DIR` (default `./.corral`). Fails with `ConfigError` for malformed settings and `PersistenceFailed`
 * when the database cannot be reached or opened.
 */
export const layer: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, PersistenceFailed | ConfigError.ConfigError> =
  Layer.unwrapEffect(
    Effect.map(config, ({ dataDir, maxConnections, url }) =>
      Option.match(url, {
        onNone: () => Embedded.layerEmbedded({ dataDir }),
        onSome: (url) => layerPostgres(url, { maxConnections })
      }))
  )
