/**
 * main — the `corral` process: runs the command line (`Cli.program`) and turns its outcome into the exit code. Run
 * by `bin/corral.js` (and `npm start` = `corral serve`).
 *
 * `corral --help`, a bare `corral` and an unknown command are answered from `Help` before anything else is loaded
 * (no Effect runtime, no server, no store): the one place besides `Output` that writes to the terminal directly,
 * because `Output` needs Effect. Everything else is imported on demand, by module (not through package barrels).
 *
 * Signals: SIGTERM/SIGINT interrupt the command (`serve` then drains and exits 0; `run` cancels its burst, prints
 * the report and exits 2). A second signal, or a drain that overruns its bound, forces the exit.
 */
import * as Help from "./Help.js"

const argv = process.argv.slice(2)
const top = Help.topLevel(argv)

if (top !== undefined) {
  process[top.stream].write(`${top.text}\n`)
  process.exitCode = top.code
} else {
  const [{ runMain }, Cause, Effect, Exit, Logger, Backstop, Cli, Failure, Output] = await Promise.all([
    import("@effect/platform-node/NodeRuntime"),
    import("effect/Cause"),
    import("effect/Effect"),
    import("effect/Exit"),
    import("effect/Logger"),
    import("./Backstop.js"),
    import("./Cli.js"),
    import("./Failure.js"),
    import("./Output.js")
  ])

  // The drain bounds itself (server.shutdownTimeoutMs); this is the backstop should anything still hang.
  process.once("SIGTERM", Backstop.arm)
  process.once("SIGINT", Backstop.arm)

  runMain(Cli.program(argv).pipe(Effect.provide(Logger.pretty)), {
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
}
