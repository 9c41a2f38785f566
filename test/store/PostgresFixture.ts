/**
 * Postgres for the store tests: the server named by `CORRAL_TEST_DATABASE_URL` (`.ci/postgres.sh` prints one), and a
 * fresh database per suite, created with a random name and dropped (forcibly) when the suite's layer is released.
 */
import { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { Config, Context, Deferred, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import * as Database from "../../src/store/Database.js"

/** The admin URL of the test server, read through `Config` once at collection time; `undefined` skips the suites. */
export const testDatabaseUrl: string | undefined = Option.getOrUndefined(
  Effect.runSync(Config.option(Config.string("CORRAL_TEST_DATABASE_URL")))
)

/** Why the Postgres suites did not run, for the skipped describe's name. */
export const skipReason = "skipped: CORRAL_TEST_DATABASE_URL is not set (export it from `bash .ci/postgres.sh`)"

/**
 * A pooled client on a brand-new database of the test server; the database is dropped on release. `route` rewrites
 * the database's URL for the client (e.g. through a `TcpProxy`); the admin connection always goes direct.
 */
export const freshDatabase = (
  adminUrl: string,
  options: Database.PostgresOptions = {},
  route: (url: string) => string = (url) => url
): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, unknown> =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const adminContext = yield* Layer.build(Database.layerPostgres(Redacted.make(adminUrl), { maxConnections: 1 }))
    const admin = Context.get(adminContext, SqlClient.SqlClient)
    const name = `corral_test_${randomUUID().replaceAll("-", "").slice(0, 16)}`
    yield* admin`CREATE DATABASE ${admin(name)}`
    // Registered before the database's own pool is built, so it runs after that pool is closed.
    yield* Effect.addFinalizer(() => admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`.pipe(Effect.ignore))
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    return Database.layerPostgres(Redacted.make(route(url.toString())), options)
  }))

/**
 * Holds the session's counter row in a transaction on its own connection, so the session's appends wait inside the
 * database on the row lock until `release` (which commits it). `pid`: the holder's backend.
 */
export const holdCounterRow = (sql: SqlClient.SqlClient, sessionId: string) =>
  Effect.gen(function*() {
    const locked = yield* Deferred.make<number>()
    const done = yield* Deferred.make<void>()
    const holder = yield* Effect.fork(
      sql.withTransaction(Effect.gen(function*() {
        const [me] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid FROM session_counters
          WHERE session_id = ${sessionId} FOR UPDATE`
        yield* Deferred.succeed(locked, me?.pid ?? 0)
        yield* Deferred.await(done)
      }))
    )
    const pid = yield* Deferred.await(locked)
    return { pid, release: Effect.zipRight(Deferred.succeed(done, undefined), Fiber.join(holder)) }
  })

/**
 * Polls until a statement of this database waits on a lock. No schedule between polls (each is a round trip), so it
 * works under a TestClock too.
 */
export const awaitLockWaiter = (sql: SqlClient.SqlClient) =>
  sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
    WHERE datname = current_database() AND wait_event_type = 'Lock'`.pipe(
    Effect.repeat({ until: (rows) => (rows[0]?.n ?? 0) >= 1, times: 100_000 }),
    Effect.asVoid
  )
