/**
 * `corral mcp inspect URL | --command CMD | --server NAME` — connects to one MCP server exactly as Corral would (the
 * same registry, transport, timeouts, prefix, `exclude` and `effects`), and prints what the server offers (tools,
 * resources, resource templates, prompts) next to what Corral would offer an agent: the names after prefixing, each
 * tool's effect and why (a tool not marked read-only waits for a person's approval), the core `read_resource` tool
 * when the server has resources, and every tool that is refused, with the reason. `--call TOOL` then calls one tool
 * as an agent would and prints its result: a quick check of a server, and the hook the MCP conformance suite's client
 * scenarios drive (scripts/conformance/client-run.mjs).
 *
 * Arguments are read from the raw command line (not `Args`) because `--header` and `--env` may repeat.
 */
import { Effect, Either, Option, Schedule } from "effect"
import { Principal } from "../domain/Principal.js"
import * as Elicitations from "../tools/Elicitations.js"
import type * as McpConfig from "../tools/McpConfig.js"
import * as McpRegistry from "../tools/McpRegistry.js"
import * as Args from "./Args.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Inspection from "./internal/mcpInspection.js"
import * as Output from "./Output.js"

/** The `--help` text. */
export const help = [
  "Usage: corral mcp inspect URL [--header \"Name: value\"]... [options]",
  "       corral mcp inspect --command \"CMD [ARGS...]\" [--env NAME=VALUE]... [options]",
  "       corral mcp inspect --server NAME [--config FILE] [options]",
  "",
  "Connects to one MCP server as Corral would and prints its tools, resources, resource templates and prompts,",
  "then what Corral would offer an agent: tool names after the prefix, each tool's effect and why (a tool the",
  "server does not mark read-only waits for a person's approval), `read_resource` when the server has resources,",
  "and every refused tool with the reason. Nothing is stored; no model is called.",
  "",
  "Options:",
  "  URL                   a Streamable HTTP server",
  "  --header \"N: V\"       a header sent with every request (repeatable)",
  "  --command CMD         a stdio server: CMD is split on spaces (quote an argument with \"...\")",
  "  --env NAME=VALUE      an environment variable of the stdio server (repeatable)",
  "  --server NAME         a server of the configuration's `mcpServers` (with its prefix, exclude, effects)",
  "  --prefix P            inspect as if the server had `prefix: P`",
  "  --call TOOL           then call TOOL (its name as offered) as an agent would and print the result",
  "  --args JSON           the arguments of --call (default {})",
  "  --elicit ANSWER       how to answer the server's questions during --call: decline (default), cancel, or",
  "                        accept (with the defaults of the values asked for)",
  "  --oauth GRANT         authenticate with OAuth 2.1: client_credentials or authorization_code (the",
  "                        authorization URL is followed by Corral itself: for servers that authorize without a",
  "                        person; tokens are kept in memory only). With --server, the server's `auth` is used",
  "  --client-id ID        a client id registered in advance (default: dynamic client registration)",
  "  --client-secret-env NAME  the environment variable holding the client secret",
  "  --private-key-env NAME    the environment variable holding a PEM private key (private_key_jwt, with --client-id)",
  "  --signing-algorithm ALG   that key's algorithm: RS256 (default), RS384, RS512, PS256…PS512, ES256…ES512",
  "  --client-metadata-url URL  Corral's client metadata document (an https URL used as client id)",
  "  --scopes \"A B\"        scopes to ask for when the server does not say",
  "  --timeout MS          bound on connecting and on each listing (default 30000)",
  "  --json                print one JSON document instead of text",
  Command.commonHelp,
  "",
  "Exit status: 0 when the server answered (and the call, if any, succeeded), 1 otherwise."
].join("\n")

const spec: Args.Spec = {
  ...Command.common,
  command: "string",
  server: "string",
  prefix: "string",
  call: "string",
  args: "string",
  elicit: "string",
  timeout: "string",
  oauth: "string",
  "client-id": "string",
  "client-secret-env": "string",
  "private-key-env": "string",
  "signing-algorithm": "string",
  "client-metadata-url": "string",
  scopes: "string",
  json: "boolean"
}

/** Pulls every `--NAME value` / `--NAME=value` of a repeatable option out of `argv`. */
const repeated = (argv: ReadonlyArray<string>, name: string) => {
  const values: Array<string> = []
  const rest: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (arg === `--${name}`) {
      const value = argv[i + 1]
      if (value === undefined) return Either.left(`option --${name} needs a value`)
      values.push(value)
      i++
    } else if (arg.startsWith(`--${name}=`)) values.push(arg.slice(name.length + 3))
    else rest.push(arg)
  }
  return Either.right({ values, rest })
}

/** `CMD ARGS` split on spaces, with "..." or '...' grouping an argument. */
export const splitCommand = (line: string): ReadonlyArray<string> =>
  [...line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!)

/** The server to inspect, from the command line (or the configuration), or why it cannot be chosen. */
const target = (
  parsed: Args.Parsed,
  headers: ReadonlyArray<string>,
  envs: ReadonlyArray<string>
): Effect.Effect<{ readonly name: string; readonly servers: McpConfig.McpServers }, string> =>
  Effect.gen(function*() {
    const url = parsed.positionals[0]
    const command = parsed.strings.get("command")
    const server = parsed.strings.get("server")
    const given = [url, command, server].filter((x) => x !== undefined).length
    if (given !== 1) return yield* Effect.fail("give exactly one of URL, --command CMD or --server NAME")
    const prefix = parsed.strings.get("prefix")
    const withPrefix = <S extends McpConfig.McpServer>(s: S): S => prefix === undefined ? s : { ...s, prefix }
    if (server !== undefined) {
      const settings = yield* Command.settings(parsed).pipe(Effect.mapError(Failure.describe))
      const configured = settings.mcpServers[server]
      if (configured === undefined) {
        const names = Object.keys(settings.mcpServers)
        return yield* Effect.fail(`no MCP server "${server}" in mcpServers (configured: ${names.join(", ") || "none"})`)
      }
      return { name: server, servers: { ...settings.mcpServers, [server]: withPrefix(configured) } }
    }
    const header: Record<string, string> = {}
    for (const h of headers) {
      const colon = h.indexOf(":")
      if (colon <= 0) return yield* Effect.fail(`--header "${h}": expected "Name: value"`)
      header[h.slice(0, colon).trim()] = h.slice(colon + 1).trim()
    }
    const env: Record<string, string> = {}
    for (const e of envs) {
      const eq = e.indexOf("=")
      if (eq <= 0) return yield* Effect.fail(`--env "${e}": expected NAME=VALUE`)
      env[e.slice(0, eq)] = e.slice(eq + 1)
    }
    const auth = yield* oauthOf(parsed)
    const raw = url !== undefined
      ? { url, ...(headers.length === 0 ? {} : { headers: header }), ...(auth === undefined ? {} : { auth }) }
      : (() => {
        const [cmd, ...args] = splitCommand(command!)
        return { command: cmd ?? "", args, ...(envs.length === 0 ? {} : { env: { ...process.env, ...env } }) }
      })()
    const name = url !== undefined ? "remote" : "local"
    const decoded = yield* Inspection.decodeOne(name, withPrefix(raw as McpConfig.McpServer))
    return { name, servers: { [name]: decoded } }
  })

/** The `auth` of an inspected URL, from `--oauth` and its companions (validated with the server's config). */
const oauthOf = (parsed: Args.Parsed): Effect.Effect<Record<string, unknown> | undefined, string> => {
  const grant = parsed.strings.get("oauth")
  const companions = [
    "client-id",
    "client-secret-env",
    "private-key-env",
    "signing-algorithm",
    "client-metadata-url",
    "scopes"
  ].filter((o) => parsed.strings.has(o))
  if (grant === undefined) {
    return companions.length === 0
      ? Effect.succeed(undefined)
      : Effect.fail(`--${companions[0]} needs --oauth client_credentials|authorization_code`)
  }
  const get = (name: string) => parsed.strings.get(name)
  const scopes = get("scopes")?.split(/\s+/).filter((s) => s.length > 0)
  return Effect.succeed({
    type: "oauth",
    grant,
    ...(get("client-id") === undefined ? {} : { clientId: get("client-id") }),
    ...(get("client-secret-env") === undefined ? {} : { clientSecretEnv: get("client-secret-env") }),
    ...(get("private-key-env") === undefined ? {} : { privateKeyEnv: get("private-key-env") }),
    ...(get("signing-algorithm") === undefined ? {} : { signingAlgorithm: get("signing-algorithm") }),
    ...(get("client-metadata-url") === undefined ? {} : { clientMetadataUrl: get("client-metadata-url") }),
    ...(scopes === undefined ? {} : { scopes })
  })
}

const ctxFor = (callId: string) => ({
  sessionId: "inspect",
  principal: new Principal({ orgId: "local", userId: "cli" }),
  scope: "inspect",
  runId: "inspect",
  callId
})

/** Runs `corral mcp inspect` on `argv` (the words after `inspect`); resolves to the exit code. Never fails. */
export const main = (argv: ReadonlyArray<string>): Effect.Effect<number> =>
  Effect.gen(function*() {
    const headers = repeated(argv, "header")
    if (Either.isLeft(headers)) return yield* Effect.fail(headers.left)
    const envs = repeated(headers.right.rest, "env")
    if (Either.isLeft(envs)) return yield* Effect.fail(envs.left)
    const parsed = Args.parse(envs.right.rest, spec)
    if (Either.isLeft(parsed)) return yield* Effect.fail(parsed.left)
    if (parsed.right.booleans.has("help")) return yield* Effect.as(Output.line(help), 0)
    const args = parsed.right
    const timeout = Number(args.strings.get("timeout") ?? "30000")
    if (!Number.isInteger(timeout) || timeout <= 0) {
      return yield* Effect.fail("--timeout: expected a positive whole number of milliseconds")
    }
    const elicit = args.strings.get("elicit") ?? "decline"
    if (elicit !== "accept" && elicit !== "decline" && elicit !== "cancel") {
      return yield* Effect.fail(`--elicit: expected accept, decline or cancel, got "${elicit}"`)
    }
    const { name, servers } = yield* target(args, headers.right.values, envs.right.values)
    return yield* Effect.scoped(Effect.gen(function*() {
      const registry = yield* McpRegistry.make(servers, {
        connectTimeoutMs: timeout,
        restartSchedule: Schedule.stop,
        interaction: "follow"
      })
        .pipe(Effect.mapError((collision) => collision.message))
      const status = (yield* registry.servers!).find((s) => s.name === name)!
      const described = status.state === "up" ? yield* Effect.either(registry.describe(name)) : undefined
      const report = Inspection.build(
        name,
        servers[name]!,
        status,
        described === undefined ? Option.none() : Option.some(described),
        registry.tools
      )
      const toCall = args.strings.get("call")
      const call = toCall === undefined ? undefined : {
        tool: toCall,
        outcome: yield* registry.call(toCall, args.strings.get("args") ?? "{}", ctxFor("call_1"))
      }
      yield* Output.line(
        args.booleans.has("json")
          ? JSON.stringify({ ...report, ...(call === undefined ? {} : { call }) }, null, 2)
          : Inspection.text(report, call)
      )
      return report.server.state === "up" && report.server.error === undefined && call?.outcome.isError !== true
        ? 0
        : 1
    })).pipe(Effect.provide(Elicitations.layerAnswer(elicit)))
  }).pipe(
    Effect.catchAll((message) => Effect.as(Output.error(`corral mcp inspect: ${message}\n\n${help}`), 1))
  )
