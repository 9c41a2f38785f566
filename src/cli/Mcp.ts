/**
 * `corral mcp` — Corral as an MCP server. `corral mcp` (or `corral mcp serve`) serves over stdin/stdout for hosts
 * that spawn their servers (Claude Desktop, IDEs), on the local Corral: the configured store (embedded PGlite by
 * default, like `corral run`), providers and tools, acting as one principal. stdout carries only the protocol;
 * every log line goes to stderr.
 *
 * The subcommand word is read first, so other subcommands can sit beside `serve`; a word nobody handles is a usage
 * error (exit 1).
 */
import { Effect, Either, FiberRef, HashSet, Logger } from "effect"
import * as Stdio from "../server/mcp/Stdio.js"
import * as Wiring from "../server/Wiring.js"
import type * as Args from "./Args.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"

const usage = "Usage: corral mcp [serve] [--org ORG] [--user USER] [--memory] [--config FILE]"

/**
 * Every log line to stderr, and only there: stdout belongs to the protocol. The loggers are set outright (not
 * replaced one by one), so whatever logger the process installed (`main` installs a pretty one on stdout) is out.
 */
const toStderr = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.locally(self, FiberRef.currentLoggers, HashSet.make(Logger.prettyLogger({ stderr: true })))

const serveStdio = (args: Args.Parsed) =>
  Effect.gen(function*() {
    const settings = yield* Command.settings(args, [
      ["CORRAL_STORE", args.booleans.has("memory") ? "memory" : undefined]
    ])
    const by = yield* Command.principal(args, settings)
    const runtime = Wiring.layer(settings, [by])
    yield* Effect.provide(
      Stdio.serve(by, {
        catalog: settings.limits?.activeTimeMs === undefined ? {} : { activeTimeMs: settings.limits.activeTimeMs },
        protocol: settings.server.mcp.elicitationWaitMs === undefined
          ? {}
          : { approvalWaitMs: settings.server.mcp.elicitationWaitMs }
      }),
      runtime
    )
    return 0
  })

/** The `mcp` command. */
export const mcp: Command.Command = {
  name: "mcp",
  options: { ...Command.common, org: "string", user: "string", memory: "boolean" },
  // A host stops its server by closing stdin or with a signal: both are a normal end.
  interruptedCode: 0,
  help: [
    usage,
    "",
    "Serves Corral as an MCP server on stdin/stdout (for Claude Desktop, IDEs and other MCP hosts that spawn",
    "their servers). Each published agent of the org is a tool run_<agent> (scope + prompt in; the landed report",
    "and exit reason out, progress per turn, cancellable); `approve` decides a pending write by its token; sessions",
    "and agents are resources (corral://sessions/{id}, corral://agents/{agent}). A write an agent wants to make is",
    "put to the person through elicitation when the host supports it. Logs go to stderr, never to stdout.",
    "The same server runs over Streamable HTTP at /mcp of `corral serve`. See docs/mcp.md.",
    "",
    "Subcommands:",
    "  serve           serve over stdio (the default)",
    "  inspect         connect to an MCP server as Corral would (corral mcp inspect --help)",
    "  login SERVER    sign a person in to an OAuth MCP server for corral serve (corral mcp login --help)",
    "  logout SERVER   delete the stored OAuth tokens of an MCP server (corral mcp logout --help)",
    "",
    "Options:",
    "  --org ORG       the org to act as (default: the local org, or the only configured org)",
    "  --user USER     the user to act as (default: cli)",
    "  --memory        do not persist sessions (also CORRAL_STORE=memory)",
    Command.commonHelp
  ].join("\n"),
  run: (args) => {
    const [sub = "serve", ...extra] = args.positionals
    if (sub !== "serve" || extra.length > 0) {
      const word = sub !== "serve" ? sub : extra[0]!
      return Effect.as(Output.error(`corral mcp: unknown subcommand or argument "${word}"\n${usage}`), 1)
    }
    return serveStdio(args).pipe(
      Effect.either,
      Effect.flatMap(Either.match({
        onLeft: (error) => Effect.as(Output.error(`corral mcp: ${Failure.describe(error)}`), 1),
        onRight: Effect.succeed
      })),
      toStderr
    )
  }
}
