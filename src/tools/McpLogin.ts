/**
 * McpLogin — a person's OAuth sign-in (grant `authorization_code`) to one configured MCP server, done once at a
 * terminal (`corral mcp login NAME`) so that `corral serve`, which has nobody to redirect, can connect afterwards: the
 * tokens (and any dynamic client registration) go to `McpCredentials` under the key the registry reads, and the
 * registry then presents and refreshes them as the SDK does.
 *
 * The steps are the SDK's (`OAuthClientProvider` in `internal/mcpOAuth.ts`, interaction `capture`): a first connect
 * is refused with 401, the SDK discovers the authorization server, registers Corral if it must, makes the PKCE
 * verifier and the state, and hands over the authorization URL; a person opens it; the authorization server sends
 * the browser back to a loopback listener on 127.0.0.1 (`internal/mcpLoopback.ts`), whose `state` is checked; the SDK
 * exchanges the code (with the verifier) for tokens; a second connect must then list the server's tools.
 *
 * Nothing is stored until that second connect succeeded: a sign-in that fails, is refused or times out leaves what
 * was stored before untouched. Every wait is bounded: each connect and the exchange by the connect timeout, the
 * person by `waitMs` (then `LoginTimedOut`).
 */
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js"
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { Deferred, Duration, Effect, Schema } from "effect"
import type { Scope } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import * as Loopback from "./internal/mcpLoopback.js"
import * as McpOAuth from "./internal/mcpOAuth.js"
import * as McpConfig from "./McpConfig.js"
import { keyFor, McpCredentials } from "./McpCredentials.js"

/** The server cannot be signed in to by a person: unknown, stdio, without OAuth, or another grant. */
export class LoginNotApplicable extends Schema.TaggedError<LoginNotApplicable>()("LoginNotApplicable", {
  server: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `MCP server "${this.server}": ${this.reason}`
  }
}

/** Nobody completed the sign-in within the bound. */
export class LoginTimedOut extends Schema.TaggedError<LoginTimedOut>()("LoginTimedOut", {
  server: Schema.String,
  waitMs: Schema.Number
}) {
  override get message(): string {
    return `nobody completed the sign-in to MCP server "${this.server}" within ${this.waitMs} ms (--wait): nothing ` +
      `was stored; run corral mcp login ${this.server} again`
  }
}

/** The authorization response was refused (another state, an error from the authorization server, no code). */
export class LoginRedirectRefused extends Schema.TaggedError<LoginRedirectRefused>()("LoginRedirectRefused", {
  server: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `sign-in to MCP server "${this.server}": ${this.reason}`
  }
}

/** A step of the sign-in failed: listening, connecting, exchanging the code, or the check with the new tokens. */
export class LoginFailed extends Schema.TaggedError<LoginFailed>()("LoginFailed", {
  server: Schema.String,
  step: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `sign-in to MCP server "${this.server}" failed while ${this.step}: ${this.reason}`
  }
}

/** Why a sign-in did not store anything. */
export type LoginError = LoginNotApplicable | LoginTimedOut | LoginRedirectRefused | LoginFailed | PersistenceFailed

/** A server a person can sign in to: Streamable HTTP with `auth.grant` `authorization_code`. */
export type Signable = McpConfig.HttpServer & { readonly auth: McpConfig.OAuth }

/**
 * `server` (named `name` in `mcpServers`) if a person can sign in to it; else why not, naming the field to change.
 */
export const signable = (
  name: string,
  server: McpConfig.McpServer | undefined,
  configured: ReadonlyArray<string>
): Effect.Effect<Signable, LoginNotApplicable> => {
  const refuse = (reason: string) => Effect.fail(new LoginNotApplicable({ server: name, reason }))
  if (server === undefined) {
    return refuse(`not in mcpServers (configured: ${configured.length === 0 ? "none" : configured.join(", ")})`)
  }
  if (McpConfig.isStdio(server)) return refuse("a stdio server (command) has no OAuth sign-in; only url servers do")
  if (server.auth === undefined) {
    return refuse(
      `mcpServers.${name}.auth is not set: add { "type": "oauth", "grant": "authorization_code" } for a server ` +
        "behind OAuth"
    )
  }
  if (server.auth.grant !== "authorization_code") {
    return refuse(
      `mcpServers.${name}.auth.grant is ${server.auth.grant}: Corral gets those tokens itself at each connect, no ` +
        "person signs in (login is for grant authorization_code)"
    )
  }
  return Effect.succeed(server as Signable)
}

/** The default path of the loopback redirect (that of `McpConfig.DEFAULT_REDIRECT_URL`). */
const CALLBACK_PATH = "/oauth/callback"

/**
 * Where the loopback listener binds (always on 127.0.0.1): `port` when given (with the configured `redirectUrl`'s path
 * when it is a loopback URL), else a configured loopback `redirectUrl` — then also sent as the redirect URI exactly as
 * written (`redirectUrl`), since a pre-registered client must send the one it registered — else a free port. A
 * configured `redirectUrl` that is not loopback cannot be listened on: refused.
 */
export const listenerOf = (
  name: string,
  auth: McpConfig.OAuth,
  port: number | undefined
): Effect.Effect<
  { readonly port: number; readonly path: string; readonly redirectUrl?: string },
  LoginNotApplicable
> => {
  if (auth.redirectUrl === undefined) return Effect.succeed({ port: port ?? 0, path: CALLBACK_PATH })
  const url = new URL(auth.redirectUrl)
  if (url.protocol !== "http:" || (url.hostname !== "127.0.0.1" && url.hostname !== "localhost")) {
    return Effect.fail(
      new LoginNotApplicable({
        server: name,
        reason: `mcpServers.${name}.auth.redirectUrl is ${auth.redirectUrl}, not a loopback address: corral mcp ` +
          "login receives the redirect on http://127.0.0.1:PORT/PATH (remove redirectUrl, or set it to such a URL " +
          "registered with the authorization server)"
      })
    )
  }
  const configured = url.port === "" ? 80 : Number(url.port)
  // Sent exactly as configured (`localhost` included) while it is the port listened on: a pre-registered client's
  // redirect URI must match the one it registered character for character.
  return Effect.succeed(
    port === undefined || port === configured
      ? { port: configured, path: url.pathname, redirectUrl: auth.redirectUrl }
      : { port, path: url.pathname }
  )
}

/** Tuning of `login`. */
export interface Options {
  /** The loopback port (0 = a free one); default: that of a loopback `auth.redirectUrl`, else a free one. */
  readonly port?: number
  /** How long the person has to complete the sign-in after the authorization URL is shown. */
  readonly waitMs: number
  /** Bound on each network step: a connect, the code exchange. */
  readonly connectTimeoutMs: number
  /** Shows the authorization URL to the person (printed, and opened in a browser where there is one). */
  readonly onAuthorizationUrl: (url: string, redirectUrl: string) => Effect.Effect<void>
}

/** A completed sign-in. */
export interface SignedIn {
  readonly server: string
  /** The redirect URI used (and registered, when Corral registered itself). */
  readonly redirectUrl: string
  /** The tools the server listed with the new tokens. */
  readonly tools: ReadonlyArray<string>
  /** The scope the tokens were granted, if the authorization server said. */
  readonly scope: string | undefined
  /** Whether the tokens came with a refresh token (without one, serve cannot renew them). */
  readonly refreshable: boolean
}

const CLIENT_INFO = { name: "corral", version: "0.1.0" }

type Connected =
  | { readonly _tag: "Connected"; readonly tools: ReadonlyArray<string> }
  | { readonly _tag: "Unauthorized"; readonly transport: StreamableHTTPClientTransport }

/** One connect with `session` as the auth provider: initialize and list the tools, or the 401 the SDK reported. */
const connect = (
  name: string,
  server: Signable,
  headers: Readonly<Record<string, string>>,
  session: McpOAuth.Session,
  step: string,
  timeoutMs: number
): Effect.Effect<Connected, LoginFailed> =>
  Effect.tryPromise({
    try: async (signal): Promise<Connected> => {
      const transport = new StreamableHTTPClientTransport(new URL(server.url), {
        ...(Object.keys(headers).length === 0 ? {} : { requestInit: { headers: { ...headers } } }),
        authProvider: session
      })
      const client = new Client(CLIENT_INFO, { capabilities: {} })
      try {
        await client.connect(transport, { signal, timeout: timeoutMs })
        const listed = client.getServerCapabilities()?.tools === undefined
          ? []
          : (await client.listTools(undefined, { signal, timeout: timeoutMs })).tools
        return { _tag: "Connected", tools: listed.map((t) => t.name) }
      } catch (error) {
        if (error instanceof UnauthorizedError) return { _tag: "Unauthorized", transport }
        throw error
      } finally {
        await client.close().catch(() => undefined)
      }
    },
    catch: (error) =>
      new LoginFailed({ server: name, step, reason: error instanceof Error ? error.message : String(error) })
  }).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(timeoutMs),
      onTimeout: () => new LoginFailed({ server: name, step, reason: `no answer within ${timeoutMs} ms` })
    })
  )

/**
 * Signs a person in to `server` (named `name`) and stores the tokens in `McpCredentials` for `corral serve`. Fails
 * with `LoginTimedOut` when nobody completes the sign-in within `waitMs`, `LoginRedirectRefused` on an authorization
 * response with another state (or an error, or no code), `LoginFailed` naming the step that failed (the listener's
 * port taken, the server unreachable, the code refused, the new tokens refused), `PersistenceFailed` when the store
 * cannot take them. Nothing is stored unless the sign-in completed.
 */
export const login = (
  name: string,
  server: Signable,
  options: Options
): Effect.Effect<SignedIn, LoginError, McpCredentials | Scope.Scope> =>
  Effect.gen(function*() {
    const credentials = yield* McpCredentials
    const where = yield* listenerOf(name, server.auth, options.port)
    const [headers, credential] = yield* Effect.zip(
      McpConfig.headersOf(server),
      McpConfig.oauthCredentialOf(server)
    ).pipe(Effect.mapError((reason) => new LoginFailed({ server: name, step: "reading the configuration", reason })))
    // The session exists once the port is known (the redirect URI names it); the listener asks it about the state.
    const current: { session?: McpOAuth.Session } = {}
    const loopback = yield* Loopback.listen(
      where.port,
      where.path,
      (state) => current.session?.stateMatches(state) === true
    )
      .pipe(Effect.mapError((reason) => new LoginFailed({ server: name, step: "listening for the redirect", reason })))
    // A fresh start (no stored registration, tokens or discovery): the registration must carry this redirect URI.
    // What the SDK saves stays here until the sign-in is complete, so a failed one leaves the store as it was.
    let saved: McpOAuth.Saved = {}
    const vault: McpOAuth.Vault = {
      load: () => Promise.resolve({}),
      save: (next) => {
        saved = next
        return Promise.resolve()
      }
    }
    const redirectUrl = where.redirectUrl ?? loopback.redirectUrl
    const signIn = new McpOAuth.Session(name, { ...server.auth, redirectUrl }, vault, "capture")
    signIn.setCredential(credential)
    current.session = signIn
    const timeout = options.connectTimeoutMs

    const first = yield* connect(name, server, headers, signIn, "connecting (to get the authorization URL)", timeout)
    if (first._tag === "Connected") {
      return yield* new LoginNotApplicable({
        server: name,
        reason: "it let Corral in without any authorization: there is nothing to sign in to (nothing stored)"
      })
    }
    const authorizationUrl = signIn.takeAuthorizationUrl()
    if (authorizationUrl === undefined) {
      return yield* new LoginFailed({
        server: name,
        step: "connecting (to get the authorization URL)",
        reason: "the server refused Corral (401) but the SDK produced no authorization URL"
      })
    }
    yield* options.onAuthorizationUrl(authorizationUrl.href, redirectUrl)
    const code = yield* Deferred.await(loopback.response).pipe(
      Effect.mapError((reason) => new LoginRedirectRefused({ server: name, reason })),
      Effect.timeoutFail({
        duration: Duration.millis(options.waitMs),
        onTimeout: () => new LoginTimedOut({ server: name, waitMs: options.waitMs })
      })
    )
    yield* Effect.tryPromise({
      try: () => first.transport.finishAuth(code),
      catch: (error) =>
        new LoginFailed({
          server: name,
          step: "exchanging the code for tokens",
          reason: error instanceof Error ? error.message : String(error)
        })
    }).pipe(
      Effect.timeoutFail({
        duration: Duration.millis(timeout),
        onTimeout: () =>
          new LoginFailed({
            server: name,
            step: "exchanging the code for tokens",
            reason: `no answer within ${timeout} ms`
          })
      })
    )
    const second = yield* connect(name, server, headers, signIn, "checking the new tokens with the server", timeout)
    if (second._tag === "Unauthorized") {
      return yield* new LoginFailed({
        server: name,
        step: "checking the new tokens with the server",
        reason: "the server still answers 401 with the tokens just issued (nothing stored)"
      })
    }
    yield* credentials.save(keyFor(name, server.url), JSON.stringify(saved))
    return {
      server: name,
      redirectUrl,
      tools: second.tools,
      scope: saved.tokens?.scope,
      refreshable: saved.tokens?.refresh_token !== undefined
    }
  })

/**
 * Forgets what is stored for `server` (its tokens and registration): `corral serve` then marks it down until the
 * next sign-in. Whether anything was stored. The authorization server is not told (the tokens are not revoked there).
 */
export const logout = (
  name: string,
  server: McpConfig.HttpServer
): Effect.Effect<boolean, PersistenceFailed, McpCredentials> =>
  Effect.flatMap(McpCredentials, (credentials) => credentials.remove(keyFor(name, server.url)))
