/**
 * `corral migrate` — applies the pending schema migrations of the configured database (the server also migrates at
 * start; this is for deployments that migrate in a separate step). Idempotent.
 */
import { Effect, Either, Option } from "effect"
import * as Wiring from "../server/Wiring.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"

/** The `migrate` command: exit code 0 when the schema is current afterwards, 1 on errors. */
export const migrate: Command.Command = {
  name: "migrate",
  options: Command.common,
  help: [
    "Usage: corral migrate [--config FILE]",
    "",
    "Applies every pending migration to the configured database (DATABASE_URL, else the embedded PGlite in",
    "CORRAL_DATA_DIR), in one transaction. Running it again applies nothing. The memory store needs none.",
    "",
    "Options:",
    Command.commonHelp
  ].join("\n"),
  run: (args) =>
    Effect.gen(function*() {
      const settings = yield* Command.settings(args)
      const applied = yield* Wiring.migrate(settings)
      if (Option.isNone(applied)) return yield* Effect.as(Output.line("the memory store needs no migrations"), 0)
      if (applied.value.length === 0) return yield* Effect.as(Output.line("the schema is current: nothing to apply"), 0)
      yield* Output.lines(applied.value.map(([id, name]) => `applied ${String(id).padStart(4, "0")}_${name}`))
      return 0
    }).pipe(
      Effect.either,
      Effect.flatMap(Either.match({
        onLeft: (error) => Effect.as(Output.error(`corral migrate: ${Failure.describe(error)}`), 1),
        onRight: Effect.succeed
      }))
    )
}
