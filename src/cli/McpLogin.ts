/**
 * `corral mcp login SERVER` / `corral mcp logout SERVER` — a person's OAuth sign-in to a configured MCP server (grant
 * `authorization_code`) for `corral serve`, which has nobody to redirect and otherwise marks such a server down.
 *
 * Login listens on a loopback redirect (127.0.0.1), prints the authorization URL (and opens a browser only where one
 * is obviously there: `$BROWSER`, macOS, or a Linux desktop session), waits a bounded time for the browser to come
 * back, and stores the tokens sealed in the store's `mcp_credentials` — where `corral serve` on the same configuration
 * reads them (`tools/McpLogin.ts` has the steps). It refuses to start without `CORRAL_SECRET_KEY` or on the memory
 * store: the tokens would die with the command. Logout deletes what is stored for the server.
 */
import { Config, Effect, Either, Option } from "effect"
import { spawn } from "node:child_process"
import * as Wiring from "../server/Wiring.js"
import { keyFor } from "../tools/McpCredentials.js"
import * as McpLogin from "../tools/McpLogin.js"
import * as Args from "./Args.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"

/** How long a person has to sign in, by default. */
export const DEFAULT_WAIT_MS = 5 * 60_000
const DEFAULT_TIMEOUT_MS = 30_000
/** The exit code when nobody completed the sign-in in time. */
export const TIMED_OUT = 2

/** The `--help` text of `corral mcp login`. */
export const loginHelp = [
  "Usage: corral mcp login SERVER [--port N] [--wait MS] [--timeout MS] [--no-browser] [--config FILE]",
  "",
  "Signs a person in to SERVER, an MCP server of the configuration's mcpServers with",
  "\"auth\": { \"type\": \"oauth\", \"grant\": \"authorization_code\" }, so that corral serve can use it: Corral",
  "listens on http://127.0.0.1:PORT/oauth/callback (the redirect URI it registers or sends), prints the",
  "authorization URL to open in a browser (and opens one itself when one is obviously available), waits for",
  "the authorization server to send the browser back, checks its state, exchanges the code (PKCE), checks the",
  "new tokens by listing the server's tools, and stores the tokens (and any client registration) sealed with",
  "CORRAL_SECRET_KEY in the store's mcp_credentials. corral serve on the same configuration and key then",
  "connects with them and refreshes them. Nothing is stored unless every step succeeded.",
  "",
  "Needs CORRAL_SECRET_KEY (16+ characters, the same for corral serve) and a persistent store (embedded PGlite",
  "in CORRAL_DATA_DIR, or DATABASE_URL); the embedded store can be opened by one process at a time, so stop",
  "corral serve on it first.",
  "",
  "Options:",
  "  SERVER          the server's name in mcpServers",
  "  --port N        the loopback port to listen on (default: the port of a loopback auth.redirectUrl, else",
  "                  a free one)",
  `  --wait MS       how long to wait for the sign-in once the URL is printed (default ${DEFAULT_WAIT_MS})`,
  `  --timeout MS    bound on each network step: a connect, the code exchange (default ${DEFAULT_TIMEOUT_MS})`,
  "  --no-browser    only print the URL, never open a browser",
  Command.commonHelp,
  "",
  `Exit status: 0 signed in and stored; 1 an error (nothing stored); ${TIMED_OUT} nobody signed in within --wait.`
].join("\n")

/** The `--help` text of `corral mcp logout`. */
export const logoutHelp = [
  "Usage: corral mcp logout SERVER [--config FILE]",
  "",
  "Deletes what corral mcp login (or a running corral serve) stored for SERVER in the store's mcp_credentials:",
  "its tokens and client registration. corral serve then marks the server down until the next login. The",
  "tokens are not revoked at the authorization server. Needs no CORRAL_SECRET_KEY.",
  "",
  "Options:",
  "  SERVER          the server's name in mcpServers",
  Command.commonHelp,
  "",
  "Exit status: 0 when nothing is stored for SERVER afterwards (removed, or there was nothing); 1 an error."
].join("\n")

const loginSpec: Args.Spec = {
  ...Command.common,
  port: "string",
  wait: "string",
  timeout: "string",
  "no-browser": "boolean"
}

/** `--NAME` as an integer in [min, max], its default when absent, or a message naming the option. */
const integer = (
  args: Args.Parsed,
  name: string,
  min: number,
  max: number,
  fallback: number | undefined
): Either.Either<number | undefined, string> => {
  const raw = args.strings.get(name)
  if (raw === undefined) return Either.right(fallback)
  const n = Number(raw)
  return /^\d+$/.test(raw) && n >= min && n <= max
    ? Either.right(n)
    : Either.left(`--${name} "${raw}": expected an integer from ${min} to ${max}`)
}

/** The one SERVER argument, or a message. */
const serverArg = (args: Args.Parsed): Either.Either<string, string> =>
  args.positionals.length === 1
    ? Either.right(args.positionals[0]!)
    : Either.left(args.positionals.length === 0 ? "name the server: SERVER" : "give exactly one SERVER")

/**
 * A browser command when one is obviously there: `$BROWSER`, `open` on macOS, `xdg-open` in a Linux desktop session
 * (`DISPLAY` or `WAYLAND_DISPLAY` set). Never required: the URL is printed either way.
 */
const browserCommand = Effect.gen(function*() {
  const browser = yield* Config.option(Config.nonEmptyString("BROWSER"))
  if (Option.isSome(browser)) return Option.some(browser.value)
  if (process.platform === "darwin") return Option.some("open")
  const display = yield* Config.option(Config.nonEmptyString("DISPLAY"))
  const wayland = yield* Config.option(Config.nonEmptyString("WAYLAND_DISPLAY"))
  return process.platform === "linux" && (Option.isSome(display) || Option.isSome(wayland))
    ? Option.some("xdg-open")
    : Option.none()
}).pipe(Effect.orElseSucceed(() => Option.none<string>()))

/** Starts `command URL` detached; any failure to start it is ignored (the URL is already printed). */
const openBrowser = (command: string, url: string) =>
  Effect.sync(() => {
    try {
      const child = spawn(command, [url], { detached: true, stdio: "ignore" })
      child.on("error", () => undefined)
      child.unref()
    } catch {
      // No browser after all: the printed URL is the way.
    }
  })

const minutes = (ms: number): string =>
  ms % 60_000 === 0 ? `${ms / 60_000} min` : ms >= 1000 ? `${Math.round(ms / 100) / 10} s` : `${ms} ms`

const loginRun = (args: Args.Parsed) =>
  Effect.gen(function*() {
    const name = yield* serverArg(args)
    const port = yield* integer(args, "port", 0, 65_535, undefined)
    const waitMs = (yield* integer(args, "wait", 1, 24 * 3_600_000, DEFAULT_WAIT_MS))!
    const timeoutMs = (yield* integer(args, "timeout", 1, 3_600_000, DEFAULT_TIMEOUT_MS))!
    const settings = yield* Command.settings(args)
    const server = yield* McpLogin.signable(name, settings.mcpServers[name], Object.keys(settings.mcpServers))
    const browser = args.booleans.has("no-browser") ? Option.none<string>() : yield* browserCommand
    const signedIn = yield* Effect.scoped(McpLogin.login(name, server, {
      ...(port === undefined ? {} : { port }),
      waitMs,
      connectTimeoutMs: timeoutMs,
      onAuthorizationUrl: (url, redirectUrl) =>
        Effect.zipRight(
          Output.line(
            [
              `Sign in to MCP server "${name}": open this URL in a browser (waiting up to ${minutes(waitMs)}; Corral ` +
              `receives the answer at ${redirectUrl}):`,
              "",
              `  ${url}`,
              "",
              ...(Option.isSome(browser) ? [`(opening it with ${browser.value})`] : [])
            ].join("\n")
          ),
          Option.isSome(browser) ? openBrowser(browser.value, url) : Effect.void
        )
    })).pipe(Effect.provide(Wiring.durableCredentials(settings)))
    const tools = signedIn.tools.length === 0
      ? "no tools"
      : `${signedIn.tools.length} tool(s): ${signedIn.tools.join(", ")}`
    yield* Output.line(
      `signed in to MCP server "${name}": the server lists ${tools}. The tokens are stored sealed in the store's ` +
        `mcp_credentials; corral serve (same configuration and CORRAL_SECRET_KEY) connects with them` +
        (signedIn.refreshable
          ? " and refreshes them."
          : ". The authorization server gave no refresh token: once the access token expires, sign in again.") +
        ` Sign out with corral mcp logout ${name}.`
    )
    return 0
  })

const logoutRun = (args: Args.Parsed) =>
  Effect.gen(function*() {
    const name = yield* serverArg(args)
    const settings = yield* Command.settings(args)
    const configured = settings.mcpServers[name]
    if (configured === undefined || !("url" in configured)) {
      // Refused through the same checks as login, for the same wording (unknown server, stdio server).
      return yield* McpLogin.signable(name, configured, Object.keys(settings.mcpServers)).pipe(Effect.as(1))
    }
    const removed = yield* Wiring.forgetCredentials(settings, keyFor(name, configured.url))
    yield* Output.line(
      removed
        ? `signed out of MCP server "${name}": its stored tokens and client registration are deleted (not revoked at ` +
          "the authorization server); corral serve marks it down until the next corral mcp login"
        : `nothing was stored for MCP server "${name}" (${configured.url}): nothing to delete`
    )
    return 0
  })

/** The message of the sign-in's own errors, which say everything without their tag; `undefined` for any other. */
const ownWording = (error: unknown): string | undefined =>
  error instanceof McpLogin.LoginNotApplicable || error instanceof McpLogin.LoginTimedOut ||
    error instanceof McpLogin.LoginRedirectRefused || error instanceof McpLogin.LoginFailed ||
    error instanceof Wiring.CredentialsNotDurable
    ? error.message
    : undefined

/** Runs `body` on `argv` parsed against `spec`: `--help`, usage errors and failures printed, resolves to the code. */
const main = (
  word: string,
  help: string,
  spec: Args.Spec,
  body: (args: Args.Parsed) => Effect.Effect<number, unknown>
) =>
(argv: ReadonlyArray<string>): Effect.Effect<number> => {
  const parsed = Args.parse(argv, spec)
  if (Either.isLeft(parsed)) return Effect.as(Output.error(`corral mcp ${word}: ${parsed.left}\n\n${help}`), 1)
  if (parsed.right.booleans.has("help")) return Effect.as(Output.line(help), 0)
  return body(parsed.right).pipe(
    Effect.catchAll((error) =>
      typeof error === "string"
        ? Effect.as(Output.error(`corral mcp ${word}: ${error}\n\n${help}`), 1)
        : Effect.as(
          Output.error(`corral mcp ${word}: ${ownWording(error) ?? Failure.describe(error)}`),
          error instanceof McpLogin.LoginTimedOut ? TIMED_OUT : 1
        )
    )
  )
}

/** `corral mcp login`. */
export const login = { main: main("login", loginHelp, loginSpec, loginRun) }

/** `corral mcp logout`. */
export const logout = { main: main("logout", logoutHelp, Command.common, logoutRun) }
