/**
 * Readiness — what `/readyz` asks before a load balancer sends traffic: is the database reachable, and is its
 * schema the one this code expects. A process whose database is down must fail the probe (and be taken out of
 * rotation) rather than accept sessions it cannot persist.
 */
import { SqlClient } from "@effect/sql"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import * as BoundedWait from "../internal/boundedWait.js"
import * as Migrations from "../store/Migrations.js"

/** The probe: the checks that passed, or the one that failed and why. */
export class Readiness extends Context.Tag("corral/server/Readiness")<Readiness, {
  /** Succeeds with a check → outcome record; fails with the same record, the failed check saying why. Never dies. */
  readonly check: Effect.Effect<Record<string, string>, Record<string, string>>
}>() {}

/** The memory store is always ready. */
export const layerMemory: Layer.Layer<Readiness> = Layer.succeed(Readiness, {
  check: Effect.succeed({ store: "memory" })
})

// `count(*)` is a bigint: node-postgres hands it over as a string.
const Count = Schema.Array(Schema.Struct({ n: Schema.Union(Schema.Number, Schema.NumberFromString) }))

/** How long the SQL probe may take, all of it: a load balancer's probe has its own timeout, usually a few seconds. */
const probeTimeoutMs = 2_000

/**
 * The SQL probe: `SELECT 1`, then every migration in `Migrations.all` recorded in the bookkeeping table, all within
 * 2 s whatever the database does. The probe's statements are left behind at the deadline, not waited for:
 * interrupting a statement on a silent connection runs the driver's cancel, a second statement that can itself wait
 * 5 s (which is how a 2 s check took 7 s). Never fails to build.
 */
export const layerSql: Layer.Layer<Readiness, never, SqlClient.SqlClient> = Layer.effect(
  Readiness,
  Effect.map(SqlClient.SqlClient, (sql) => {
    const expected = Object.keys(Migrations.all).length
    const probe: Effect.Effect<Record<string, string>, Record<string, string>> = Effect.gen(function*() {
      yield* sql`SELECT 1`.pipe(Effect.mapError(() => ({ database: "unreachable: query failed" })))
      const rows = yield* sql`SELECT count(*) AS n FROM ${sql(Migrations.table)}`.pipe(
        Effect.flatMap(Schema.decodeUnknown(Count)),
        Effect.mapError(() => ({ database: "reachable", migrations: "not applied (run `corral migrate`)" }))
      )
      const applied = rows[0]?.n ?? 0
      if (applied < expected) {
        return yield* Effect.fail({ database: "reachable", migrations: `${applied}/${expected} applied` })
      }
      return { database: "reachable", migrations: `${applied}/${expected} applied` }
    })
    const check = Effect.catchAllDefect(probe, () => Effect.fail({ database: "probe failed" })).pipe(
      BoundedWait.disconnected({
        duration: Duration.millis(probeTimeoutMs),
        onTimeout: () => ({ database: `unreachable: timed out after ${probeTimeoutMs / 1000} s` })
      })
    )
    return { check }
  })
)

/**
 * `readiness` with the tool servers' states added to its checks (`mcp:<name>` → `up`, `starting`, `down since …`).
 * A tool server that is down withdraws its tools, not the process: it never fails the probe.
 */
export const withToolServers = (
  readiness: Context.Tag.Service<Readiness>,
  servers: Effect.Effect<Record<string, string>>
): Context.Tag.Service<Readiness> => ({
  check: Effect.matchEffect(readiness.check, {
    onFailure: (checks) => Effect.flatMap(servers, (more) => Effect.fail({ ...checks, ...more })),
    onSuccess: (checks) => Effect.map(servers, (more) => ({ ...checks, ...more }))
  })
})
