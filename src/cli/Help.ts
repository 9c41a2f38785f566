/**
 * Help — the `corral` command table and the top-level help, with no Effect import (types only): `corral --help` (and a bare or
 * unknown command) prints from here and exits before any runtime, server or store module is loaded, so asking for
 * help never pays Corral's start-up and never opens a database.
 */
import type { Effect } from "effect"
import * as EnvVars from "../internal/envVars.js"
import type * as Command from "./Command.js"

/** A command as the dispatcher knows it: loaded on use, so `corral --help` starts without the server's imports. */
export interface Entry {
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
    name: "mcp",
    summary: "Serve Corral's agents as MCP tools over stdio (for Claude Desktop, IDEs): mcp [serve]",
    load: () => import("./Mcp.js").then((m) => m.mcp)
  },
  {
    name: "replay",
    summary: "Print a stored session's transcript and report",
    load: () => import("./Replay.js").then((m) => m.replay)
  }
]

/** A command of two words (`corral mcp inspect`), dispatched before the command table; it reads its own argv. */
export interface Subcommand {
  readonly words: readonly [string, string]
  readonly summary: string
  readonly load: () => Promise<{ readonly main: (argv: ReadonlyArray<string>) => Effect.Effect<number> }>
}

/** Every two-word command, in the order the help lists them. */
export const subcommands: ReadonlyArray<Subcommand> = [
  {
    words: ["mcp", "inspect"],
    summary: "Connect to an MCP server as Corral would; print what it offers and what an agent gets",
    load: () => import("./McpInspect.js")
  },
  {
    words: ["mcp", "login"],
    summary: "Sign a person in to an OAuth MCP server (authorization_code) and store the tokens for serve",
    load: () => import("./McpLogin.js").then((m) => m.login)
  },
  {
    words: ["mcp", "logout"],
    summary: "Delete the stored OAuth tokens of an MCP server",
    load: () => import("./McpLogin.js").then((m) => m.logout)
  }
]

/** The two-word command `argv` starts with, if any. */
export const subcommandOf = (argv: ReadonlyArray<string>): Subcommand | undefined =>
  subcommands.find((s) => s.words[0] === argv[0] && s.words[1] === argv[1])

/** The top-level `--help`. */
export const help = (): string =>
  [
    "corral — bounded LLM agent sessions: an HTTP server, a live viewer and a CLI",
    "",
    "Usage: corral <command> [options]",
    "",
    "Commands:",
    ...commands.map((c) => `  ${c.name.padEnd(10)}${c.summary}`),
    ...subcommands.map((c) => `  ${c.words.join(" ").padEnd(12)}  ${c.summary}`),
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

/**
 * What `argv` asks of the top level without running a command: the help (exit 0; exit 1 when no command was given)
 * or an unknown command (its message, exit 1). `undefined` when `argv` names a command.
 */
export const topLevel = (
  argv: ReadonlyArray<string>
): { readonly stream: "stdout" | "stderr"; readonly text: string; readonly code: number } | undefined => {
  const [name] = argv
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    return { stream: "stdout", text: help(), code: name === undefined ? 1 : 0 }
  }
  if (!commands.some((c) => c.name === name) && subcommandOf(argv) === undefined) {
    return { stream: "stderr", text: `corral: unknown command "${name}"\n\n${help()}`, code: 1 }
  }
  return undefined
}
