/**
 * McpConfig — the `mcpServers` section of the configuration file (DESIGN §9).
 *
 * Each entry names one MCP server: a stdio command Corral spawns and supervises, or a Streamable HTTP URL it connects
 * to. Operators write this by hand, so `decode` picks the variant from the keys present (`command` or `url`) and
 * reports every problem with its full path (`mcpServers.github.args[1]: expected a string`) instead of the
 * "expected A | B" an undiscriminated union would print. Unknown keys are errors: a misspelt `efects` silently
 * ignored would leave a write tool advertised as whatever the server claims.
 */
import { Array as Arr, Config, Effect, Either, ParseResult, Redacted, Schema } from "effect"
import { FieldIssue, fieldIssues } from "../domain/Errors.js"
import { HttpUrl } from "../domain/HttpUrl.js"

/** A tool's declared effect, as an operator overrides it. */
export const EffectOverride = Schema.Literal("read", "write")

const Name = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, {
    message: () => "a server name: letters, digits, '_', '.', '-', starting with a letter or digit"
  })
)
/** Exact optional: absent is allowed, an explicit `undefined` is not (and errors do not mention it). */
const optional = <S extends Schema.Schema.Any>(schema: S) => Schema.optionalWith(schema, { exact: true })

const Strings = Schema.Record({ key: Schema.String, value: Schema.String })

/**
 * A tool-name prefix: what the names of a server's tools start with, so two servers (or the same server twice) can
 * export the same names. Letters, digits, `_` and `-` only: providers accept nothing else in a tool name.
 */
export const Prefix = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$/, {
    message: () => "a tool-name prefix: 1-32 letters, digits, '_' or '-', starting with a letter or digit"
  })
)

/** Fields both transports share. */
const common = {
  /**
   * Advertise this server's tools as `<prefix>_<tool>` (a prefix ending in `_` or `-` is used as written:
   * `gh-` gives `gh-search`). `effects`, `exclude` and `tools` still name the server's own tools.
   */
  prefix: optional(Prefix),
  /**
   * Whether the server may ask Corral's model for a completion (`sampling/createMessage`). Off by default: a server
   * that samples spends the session's model calls, so an operator opts in per server. Off, it is refused with a
   * JSON-RPC error saying so.
   */
  sampling: optional(Schema.Boolean),
  /** The roots (`file://` URIs) the server is told it may work in (`roots/list`); none by default. */
  roots: optional(
    Schema.Array(Schema.Struct({
      uri: Schema.String.pipe(
        Schema.pattern(/^file:\/\/\S+$/, { message: () => "a file:// URI" })
      ),
      name: optional(Schema.String)
    }))
  ),
  /** Per-tool effect overrides: `read` or `write`, winning over the server's `readOnlyHint`. */
  effects: optional(Schema.Record({ key: Schema.String, value: EffectOverride })),
  /** Per-call timeout in ms; `Limits.toolTimeoutMs` still caps it. */
  timeoutMs: optional(Schema.Int.pipe(Schema.positive({ message: () => "a positive integer (ms)" }))),
  /** Tools of this server that are never advertised nor callable (also resolves a name collision). */
  exclude: optional(Schema.Array(Schema.String)),
  /**
   * Tools this server is expected to offer. Until it has listed its tools once (it is down at start), these names —
   * and those of `effects` — are its known tools: agents naming them can be published, and runs note them missing.
   */
  tools: optional(Schema.Array(Schema.String))
}

/** A server Corral spawns as a child process and talks to over stdin/stdout. */
export const StdioServer = Schema.Struct({
  command: Schema.NonEmptyTrimmedString,
  args: optional(Schema.Array(Schema.String)),
  env: optional(Strings),
  cwd: optional(Schema.String),
  ...common
})
export type StdioServer = typeof StdioServer.Type

/**
 * A header value read from an environment variable (like a provider's `apiKeyEnv`), so a bearer token need not sit
 * in the config file: `{ "env": "GITHUB_TOKEN", "prefix": "Bearer " }` sends `Bearer <value of GITHUB_TOKEN>`.
 */
export const HeaderFromEnv = Schema.Struct({
  env: Schema.NonEmptyTrimmedString,
  prefix: optional(Schema.String)
})
export type HeaderFromEnv = typeof HeaderFromEnv.Type

/** The OAuth 2.1 grants Corral can use to get an access token from a server's authorization server. */
export const OAuthGrant = Schema.Literal("client_credentials", "authorization_code")
export type OAuthGrant = typeof OAuthGrant.Type

/** The algorithms Corral signs a `private_key_jwt` client assertion with (RFC 7523; JOSE names). */
export const SigningAlgorithm = Schema.Literal(
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512"
)
export type SigningAlgorithm = typeof SigningAlgorithm.Type

/**
 * OAuth 2.1 for a Streamable HTTP server (MCP authorization, revision 2025-11-25), through the SDK's auth provider:
 * the authorization server is discovered (RFC 9728 protected resource metadata, then RFC 8414 / OpenID metadata),
 * the client registers itself dynamically when the server offers it and no `clientId` is given (or uses
 * `clientMetadataUrl` as its id where the server accepts URL client ids), `authorization_code` uses PKCE (S256),
 * and an expired token is refreshed with the refresh token. The secret is named, never written here: `clientSecretEnv`
 * is the environment variable holding it. Tokens are kept by Corral's store (encrypted), never in this file.
 */
export const OAuth = Schema.Struct({
  type: Schema.Literal("oauth"),
  /**
   * `client_credentials`: Corral authenticates as itself (machine to machine; needs `clientId` and
   * `clientSecretEnv`). `authorization_code`: a person signs in at the authorization server once; Corral keeps (and
   * refreshes) the tokens.
   */
  grant: OAuthGrant,
  /** A client id registered with the authorization server in advance; absent = dynamic client registration. */
  clientId: optional(Schema.NonEmptyTrimmedString),
  /** The environment variable holding the client secret of `clientId` (absent = a public client). */
  clientSecretEnv: optional(Schema.NonEmptyTrimmedString),
  /**
   * The environment variable holding a PEM (PKCS#8) private key registered for `clientId`: Corral then
   * authenticates at the token endpoint with a JWT it signs (`private_key_jwt`, RFC 7523) instead of a secret.
   */
  privateKeyEnv: optional(Schema.NonEmptyTrimmedString),
  /** The algorithm of the `privateKeyEnv` key (default RS256). */
  signingAlgorithm: optional(SigningAlgorithm),
  /** An https URL of Corral's client metadata document, used as the client id where the server supports it. */
  clientMetadataUrl: optional(HttpUrl),
  /** Scopes to ask for when neither the server's 401 nor its metadata say which (they win, per the spec). */
  scopes: optional(Schema.Array(Schema.NonEmptyTrimmedString)),
  /** `authorization_code`: where the authorization server sends the person back (default below). */
  redirectUrl: optional(HttpUrl)
})
export type OAuth = typeof OAuth.Type

/** Where the authorization server sends a person back when `redirectUrl` is not set. */
export const DEFAULT_REDIRECT_URL = "http://127.0.0.1:8976/oauth/callback"

/** A server reached over MCP Streamable HTTP. */
export const HttpServer = Schema.Struct({
  url: HttpUrl,
  /** Sent with every request: a literal value, or `{ env, prefix? }` read from the environment at each connect. */
  headers: optional(Schema.Record({ key: Schema.String, value: Schema.Union(Schema.String, HeaderFromEnv) })),
  /** How Corral authenticates to the server beyond `headers`: OAuth 2.1. */
  auth: optional(OAuth),
  ...common
})
export type HttpServer = typeof HttpServer.Type

/** One MCP server: stdio (`command`) or Streamable HTTP (`url`). */
export const McpServer = Schema.Union(StdioServer, HttpServer)
export type McpServer = typeof McpServer.Type

/** The `mcpServers` section: server name → server. The name becomes the tools' source, `mcp:<name>`. */
export const McpServers = Schema.Record({ key: Name, value: McpServer })
export type McpServers = typeof McpServers.Type

/** The name a tool `tool` of `server` is advertised under: prefixed when the server has a `prefix`. */
export const toolName = (server: McpServer, tool: string): string => {
  const prefix = server.prefix
  if (prefix === undefined) return tool
  return prefix.endsWith("_") || prefix.endsWith("-") ? `${prefix}${tool}` : `${prefix}_${tool}`
}

/** Whether a server is spawned over stdio (else it is reached over Streamable HTTP). */
export const isStdio = (server: McpServer): server is StdioServer => "command" in server

/**
 * The headers of `server` with every `{ env, prefix? }` value read through `Config` (so tests and embedders can
 * swap the `ConfigProvider`); a stdio server has none. Fails with a message naming the header and the variable
 * when the variable is unset or empty — never with the value.
 */
export const headersOf = (server: McpServer): Effect.Effect<Readonly<Record<string, string>>, string> => {
  if (isStdio(server) || server.headers === undefined) return Effect.succeed({})
  return Effect.map(
    Effect.forEach(Object.entries(server.headers), ([name, value]) =>
      typeof value === "string"
        ? Effect.succeed([name, value] as const)
        : Config.redacted(value.env).pipe(
          Effect.filterOrFail((secret) => Redacted.value(secret).length > 0, () => "empty"),
          Effect.mapBoth({
            onFailure: () => `header "${name}": environment variable ${value.env} is not set`,
            onSuccess: (secret) => [name, `${value.prefix ?? ""}${Redacted.value(secret)}`] as const
          })
        )),
    Object.fromEntries
  )
}

/** How Corral proves who it is at a server's token endpoint: a client secret, or a key that signs a JWT. */
export type OAuthCredential =
  | { readonly kind: "secret"; readonly secret: string }
  | { readonly kind: "private_key"; readonly pem: string; readonly algorithm: SigningAlgorithm }

/**
 * The client credential of `server`'s OAuth config, read through `Config` at each connect from `clientSecretEnv` or
 * `privateKeyEnv` (`undefined` when it names neither). Fails with a message naming the variable when it is unset or
 * empty — never with the value.
 */
export const oauthCredentialOf = (server: McpServer): Effect.Effect<OAuthCredential | undefined, string> => {
  const auth = isStdio(server) ? undefined : server.auth
  const read = (field: "clientSecretEnv" | "privateKeyEnv", env: string) =>
    Config.redacted(env).pipe(
      Effect.filterOrFail((value) => Redacted.value(value).length > 0, () => "empty"),
      Effect.mapBoth({
        onFailure: () => `auth.${field}: environment variable ${env} is not set`,
        onSuccess: Redacted.value
      })
    )
  if (auth?.privateKeyEnv !== undefined) {
    const algorithm = auth.signingAlgorithm ?? "RS256"
    return Effect.map(read("privateKeyEnv", auth.privateKeyEnv), (pem) => ({ kind: "private_key", pem, algorithm }))
  }
  if (auth?.clientSecretEnv !== undefined) {
    return Effect.map(read("clientSecretEnv", auth.clientSecretEnv), (secret) => ({ kind: "secret", secret }))
  }
  return Effect.succeed(undefined)
}

/** The `mcpServers` section is invalid; every problem is listed with its path. */
export class McpConfigInvalid extends Schema.TaggedError<McpConfigInvalid>()("McpConfigInvalid", {
  issues: Schema.Array(FieldIssue)
}) {
  override get message(): string {
    return `invalid MCP server configuration:\n${this.issues.map((i) => `- ${i.path}: ${i.message}`).join("\n")}`
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const pathOf = (prefix: string, path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((acc, key) => (typeof key === "number" ? `${acc}[${key}]` : `${acc}.${String(key)}`), prefix)

// One line per field: a union's alternatives merged ("Expected one of "read", "write", actual …"), the optional-key
// "Expected undefined" echo dropped (fieldIssues).
const decodeVariant = <A, I>(schema: Schema.Schema<A, I>, input: unknown, at: string) =>
  Either.mapLeft(
    Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(input),
    (error) => fieldIssues(error, { render: (path) => pathOf(at, path), unexpected: "unknown key" })
  )

/**
 * Decodes the `mcpServers` section (`undefined` = no servers). Fails with `McpConfigInvalid` listing every problem:
 * a bad server name, an entry with both or neither of `command` and `url`, a wrong or unknown field — each with its
 * path under `prefix` (default `mcpServers`).
 */
export const decode = (input: unknown, prefix = "mcpServers"): Either.Either<McpServers, McpConfigInvalid> => {
  if (input === undefined) return Either.right({})
  if (!isRecord(input)) {
    return Either.left(
      new McpConfigInvalid({ issues: [new FieldIssue({ path: prefix, message: "expected an object" })] })
    )
  }
  const issues: Array<FieldIssue> = []
  const servers: Record<string, McpServer> = {}
  for (const [name, entry] of Object.entries(input)) {
    const at = `${prefix}.${name}`
    const named = Schema.decodeUnknownEither(Name)(name)
    if (Either.isLeft(named)) {
      issues.push(new FieldIssue({ path: at, message: ParseResult.TreeFormatter.formatErrorSync(named.left) }))
      continue
    }
    if (!isRecord(entry)) {
      issues.push(new FieldIssue({ path: at, message: "expected an object with `command` (stdio) or `url` (HTTP)" }))
      continue
    }
    const hasCommand = "command" in entry
    const hasUrl = "url" in entry
    if (hasCommand === hasUrl) {
      issues.push(
        new FieldIssue({
          path: at,
          message: hasCommand
            ? "give either `command` (stdio) or `url` (Streamable HTTP), not both"
            : "missing `command` (a stdio server) or `url` (a Streamable HTTP server)"
        })
      )
      continue
    }
    const decoded: Either.Either<McpServer, ReadonlyArray<FieldIssue>> = hasCommand
      ? decodeVariant(StdioServer, entry, at)
      : decodeVariant(HttpServer, entry, at)
    Either.match(decoded, {
      onLeft: (found) => issues.push(...found),
      onRight: (server) => {
        servers[name] = server
      }
    })
  }
  issues.push(...authIssues(servers, prefix), ...prefixIssues(servers, prefix))
  return Arr.isNonEmptyArray(issues) ? Either.left(new McpConfigInvalid({ issues })) : Either.right(servers)
}

/**
 * `client_credentials` authenticates Corral itself: it needs a registered client id and its credential (a secret
 * or a signing key). A signing key belongs to a registered client, never to a dynamically registered one, and a
 * client proves itself one way: a secret or a key, not both.
 */
const authIssues = (servers: Readonly<Record<string, McpServer>>, at: string): Array<FieldIssue> =>
  Object.entries(servers).flatMap(([name, server]) => {
    const auth = isStdio(server) ? undefined : server.auth
    if (auth === undefined) return []
    const issue = (field: string, message: string) => new FieldIssue({ path: `${at}.${name}.auth.${field}`, message })
    const issues: Array<FieldIssue> = []
    const machine = auth.grant === "client_credentials"
    if (auth.clientId === undefined && (machine || auth.privateKeyEnv !== undefined)) {
      issues.push(
        issue(
          "clientId",
          machine ? "the client_credentials grant needs `clientId`" : "`privateKeyEnv` needs `clientId`"
        )
      )
    }
    if (auth.privateKeyEnv !== undefined && auth.clientSecretEnv !== undefined) {
      issues.push(issue("privateKeyEnv", "give `clientSecretEnv` or `privateKeyEnv`, not both"))
    }
    if (auth.signingAlgorithm !== undefined && auth.privateKeyEnv === undefined) {
      issues.push(issue("signingAlgorithm", "`signingAlgorithm` is the algorithm of `privateKeyEnv`'s key: set it too"))
    }
    if (machine && auth.clientSecretEnv === undefined && auth.privateKeyEnv === undefined) {
      issues.push(
        issue(
          "clientSecretEnv",
          "the client_credentials grant needs `clientSecretEnv` (the environment variable holding the secret) or " +
            "`privateKeyEnv` (holding a private key for private_key_jwt)"
        )
      )
    }
    return issues
  })

/** What makes two entries the same server: its command line (and directory), or its URL. */
const identityOf = (server: McpServer): string =>
  isStdio(server)
    ? JSON.stringify(["stdio", server.command, server.args ?? [], server.cwd ?? ""])
    : JSON.stringify(["http", server.url])

/**
 * Cross-entry checks of `prefix`: two entries may not share a prefix (their names would be indistinguishable), and
 * the same server configured twice needs a distinct prefix on at least one of them (else every name collides).
 */
const prefixIssues = (servers: Readonly<Record<string, McpServer>>, at: string): Array<FieldIssue> => {
  const issues: Array<FieldIssue> = []
  const byPrefix = new Map<string, string>()
  const byIdentity = new Map<string, string>()
  for (const [name, server] of Object.entries(servers)) {
    if (server.prefix !== undefined) {
      const owner = byPrefix.get(server.prefix)
      if (owner === undefined) byPrefix.set(server.prefix, name)
      else {
        issues.push(
          new FieldIssue({
            path: `${at}.${name}.prefix`,
            message: `prefix "${server.prefix}" is already the prefix of server "${owner}"; give each server its own`
          })
        )
        continue
      }
    }
    const identity = `${identityOf(server)}|${server.prefix ?? ""}`
    const twin = byIdentity.get(identity)
    if (twin === undefined) byIdentity.set(identity, name)
    else {
      issues.push(
        new FieldIssue({
          path: `${at}.${name}.prefix`,
          message: `server "${name}" is the same server as "${twin}" (${
            isStdio(server) ? "same command" : "same URL"
          }) and would export the same tool names: give one of them a distinct \`prefix\``
        })
      )
    }
  }
  return issues
}
