// With corral/sql's peers installed but not PGlite: a Postgres-only program must not need it, and opening the
// embedded database must fail with PersistenceFailed naming @electric-sql/pglite and the README's line for it
// (`corral/sql with { dataDir }`). With CORRAL_TEST_DATABASE_URL set, that Postgres is migrated here (a schema of
// its own), without PGlite. Exits 1 when either does not hold.
import { migrate } from "corral/sql"
import { Cause, Effect, Exit, Option } from "effect"
import { readmeInstalls } from "./readme-installs.mjs"

const line = readmeInstalls().get("corral/sql with { dataDir }")
const exit = await Effect.runPromiseExit(migrate({ dataDir: "./embedded-data" }))
const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
if (line === undefined || error?._tag !== "PersistenceFailed" || !error.message.includes(line)) {
  console.error(`pack-check: the embedded database without PGlite should fail naming the line ${line}; got:`)
  console.error(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "success")
  process.exit(1)
}
console.log(`corral/sql { dataDir } without PGlite: PersistenceFailed: ${error.message}`)
const url = process.env.CORRAL_TEST_DATABASE_URL
if (url) {
  const applied = await Effect.runPromise(migrate({ url, schema: "corral_pack_check_pg_only" }))
  console.log(`corral/sql on Postgres without PGlite: migrated (${applied.length} applied)`)
} else {
  console.log("corral/sql on Postgres without PGlite: skipped (no CORRAL_TEST_DATABASE_URL)")
}
