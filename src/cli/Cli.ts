/**
 * Cli — the `corral` command line: the command table, the top-level help, and the dispatcher that runs one command
 * and resolves to its exit code. `main.ts` runs it as the process.
 */
import { Effect, Either } from "effect"
import * as EnvVars from "../config/EnvVars.js"
import * as Args from "./Args.js"
import type * as Command from "./Command.js"
import * as Output from "./Output.js"

/** A command as the dispatcher knows it: loaded on use, so `corral --help` starts without the server's imports. */
interface Entry {
  readonly name: string
  readonly summary: string
  readonly load: () => Promise<Command.Command>
}

/** Every command, in the order the help lists them. */
export const commands: ReadonlyArray<Entry> = [
  {
    name: "serve",
    summary: "Start the HTTP API, the API docs (/docs) and the live viewer (/ui)",
    load: () => import("./Serve.js").then((m) => m.serve)
  },
  {
    name: "run",
    summary: "Run one session here, streaming its events and printing its report",
    load: () => import("./RunCommand.js").then((m) => m.run)
  },
  {
    name: "migrate",
    summary: "Apply pending database migrations",
    load: () => import("./Migrate.js").then((m) => m.migrate)
  },
  {
    name: "agents",
    summary: "Publish an agent spec: agents publish FILE",
    load: () => import("./Agents.js").then((m) => m.agents)
  },
  {
    name: "replay",
    summary: "Print a stored session's transcript and report",
    load: () => import("./Replay.js").then((m) => m.replay)
  }
]

/** The command the process runs (for its exit code when a signal interrupts it). */
let current: Command.Command | undefined

/** The exit code of the running command when a signal interrupts it (130 before any command is loaded). */
export const interruptedCode = (): number => current?.interruptedCode ?? 130

/** The top-level `--help`. */
export const help = (): string =>
  [
    "corral — bounded LLM agent sessions: an HTTP server, a live viewer and a CLI",
    "",
    "Usage: corral <command> [options]",
    "",
    "Commands:",
    ...commands.map((c) => `  ${c.name.padEnd(10)}${c.summary}`),
    "",
    "Run `corral <command> --help` for a command's options.",
    "",
    "Configuration: one JSON file (CORRAL_CONFIG, default ./corral.json; absent = defaults). Every key can be",
    "overridden by an environment variable (JSON for structured keys); a variable wins over the file:",
    "",
    EnvVars.helpText(),
    "",
    "Docs: docs/server.md · the API at http://127.0.0.1:8787/docs once `corral serve` runs."
  ].join("\n")

/** Runs `argv` (without node and the script) and resolves to the exit code. Never fails. */
export const program = (argv: ReadonlyArray<string>): Effect.Effect<number> => {
  const [name, ...rest] = argv
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    return Effect.as(Output.line(help()), name === undefined ? 1 : 0)
  }
  const entry = commands.find((c) => c.name === name)
  if (entry === undefined) {
    return Effect.as(Output.error(`corral: unknown command "${name}"\n\n${help()}`), 1)
  }
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
