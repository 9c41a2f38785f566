/**
 * DataDirLockHolder — a process that opens the embedded database in a data directory and holds it until killed, for
 * DataDirLock.test.ts.
 *
 *   node --import tsx test/store/DataDirLockHolder.ts <dataDir>
 *
 * Prints `READY` once the database is open (so the directory's lock is taken), or `REFUSED <message>` when opening
 * failed; then waits to be killed.
 */
import { Effect, Layer, Logger, LogLevel } from "effect"
import * as Embedded from "../../src/store/Embedded.js"

const program = Effect.gen(function*() {
  yield* Layer.build(Embedded.layerEmbedded({ dataDir: process.argv[2] ?? "" }))
  console.log("READY")
  return yield* Effect.never
}).pipe(
  Effect.scoped,
  Effect.catchAll((error) => Effect.sync(() => console.log(`REFUSED ${error.message}`))),
  // stdout is the protocol (READY / REFUSED): the database's own log lines (a new directory's) stay out of it.
  Logger.withMinimumLogLevel(LogLevel.None)
)

void Effect.runPromise(program)
