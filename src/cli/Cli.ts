/**
 * Cli — the `corral` command line: the dispatcher that runs one command and resolves to its exit code (the command
 * table and the top-level help live in the Effect-free `Help.ts`). `main.ts` runs it as the process.
 */
import { Effect, Either } from "effect"
import * as Args from "./Args.js"
import type * as Command from "./Command.js"
import * as Help from "./Help.js"
import * as Output from "./Output.js"

export type { Entry } from "./Help.js"

/** Every command, in the order the help lists them. */
export const commands = Help.commands

/** The top-level `--help`. */
export const help = Help.help

/** The command the process runs (for its exit code when a signal interrupts it). */
let current: Command.Command | undefined

/** The exit code of the running command when a signal interrupts it (130 before any command is loaded). */
export const interruptedCode = (): number => current?.interruptedCode ?? 130

/** Runs `argv` (without node and the script) and resolves to the exit code. Never fails. */
export const program = (argv: ReadonlyArray<string>): Effect.Effect<number> => {
  const top = Help.topLevel(argv)
  if (top !== undefined) {
    return Effect.as(top.stream === "stdout" ? Output.line(top.text) : Output.error(top.text), top.code)
  }
  // Two-word commands first (`mcp inspect`): they parse their own words.
  const sub = Help.subcommandOf(argv)
  if (sub !== undefined) return Effect.flatMap(Effect.promise(sub.load), (m) => m.main(argv.slice(2)))
  const [name, ...rest] = argv
  const entry = commands.find((c) => c.name === name)
  if (entry === undefined) return Effect.succeed(1)
  return Effect.flatMap(Effect.promise(entry.load), (command) => {
    current = command
    const parsed = Args.parse(rest, command.options)
    if (Either.isLeft(parsed)) {
      return Effect.as(Output.error(`corral ${command.name}: ${parsed.left}\n\n${command.help}`), 1)
    }
    if (parsed.right.booleans.has("help")) return Effect.as(Output.line(command.help), 0)
    return command.run(parsed.right)
  })
}
