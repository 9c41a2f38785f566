/**
 * main — the `corral` process: runs the command line (`Cli.program`) and turns its outcome into the exit code. Run
 * by `bin/corral.js` (and `npm start` = `corral serve`).
 *
 * Signals: SIGTERM/SIGINT interrupt the command (`serve` then drains and exits 0; `run` cancels its burst, prints
 * the report and exits 2). A second signal, or a drain that overruns its bound, forces the exit.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Logger } from "effect"
import * as Backstop from "./Backstop.js"
import * as Cli from "./Cli.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"

const argv = process.argv.slice(2)

// The drain bounds itself (server.shutdownTimeoutMs); this is the backstop should anything still hang.
process.once("SIGTERM", Backstop.arm)
process.once("SIGINT", Backstop.arm)

NodeRuntime.runMain(Cli.program(argv).pipe(Effect.provide(Logger.pretty)), {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    const code = Exit.isSuccess(exit)
      ? typeof exit.value === "number" ? exit.value : 0
      : Cause.isInterruptedOnly(exit.cause)
      ? Cli.interruptedCode()
      : 1
    if (Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)) {
      Effect.runSync(Output.error(`corral: ${Failure.describeCause(exit.cause)}`))
    }
    onExit(code)
    // Exit even when a library left a handle open: the command is done.
    process.exit(code)
  }
})
