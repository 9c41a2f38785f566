/**
 * The OAuth client of one MCP server: the SDK's `OAuthClientProvider`, fed from the server's `auth` config and the
 * `McpCredentials` port. The SDK does the protocol (RFC 9728 / RFC 8414 discovery, dynamic registration, PKCE,
 * refresh, step-up on `insufficient_scope`); this module only keeps its state and answers its one question that needs
 * the outside world: "send the person to this authorization URL".
 *
 * Who answers depends on the host (`Interaction`):
 * - `follow` (`corral mcp inspect`, the conformance suite's client): the authorization URL is fetched without
 *   following redirects, and the redirect back to `redirectUrl` carries the code. That works against an
 *   authorization server that authorizes without a person (a test server, a pre-approved client); one that shows a
 *   sign-in page instead fails with that said.
 * - `none` (`corral serve`): nobody can sign in, so the connection fails with a message naming what to do (sign in
 *   once with `corral mcp login`), and the server is marked down (its tools withdrawn, the others unaffected) like any
 *   server that cannot start. Tokens already stored (by `corral mcp login`) are used and refreshed without a person.
 * - `capture` (`corral mcp login`, `McpLogin`): the authorization URL is kept (`takeAuthorizationUrl`) for a person
 *   to open in a browser; the code comes back to a loopback listener, which checks it with `stateMatches`.
 *
 * Every network wait of the follow is bounded (`FOLLOW_TIMEOUT_MS`); the SDK's own requests are bounded by the
 * connect timeout around them. The PKCE verifier and the code never leave memory; the state parameter is checked.
 */
import { createPrivateKeyJwtAuth } from "@modelcontextprotocol/sdk/client/auth-extensions.js"
import type {
  AddClientAuthentication,
  OAuthClientProvider,
  OAuthDiscoveryState
} from "@modelcontextprotocol/sdk/client/auth.js"
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens
} from "@modelcontextprotocol/sdk/shared/auth.js"
import { randomBytes } from "node:crypto"
import * as McpConfig from "../McpConfig.js"

/**
 * How a server's authorization URL is visited: followed by Corral itself, handed to a person (`capture`), or not at
 * all (no person at hand).
 */
export type Interaction = "follow" | "capture" | "none"

/** What is kept between connections (in `McpCredentials`, as JSON). */
export interface Saved {
  readonly clientInformation?: OAuthClientInformationMixed
  readonly tokens?: OAuthTokens
  readonly discoveryState?: OAuthDiscoveryState
}

/** Where `Saved` is read from and written to (the registry adapts `McpCredentials` to promises). */
export interface Vault {
  readonly load: () => Promise<Saved>
  readonly save: (saved: Saved) => Promise<void>
}

/** Bound on fetching the authorization URL when following it. */
export const FOLLOW_TIMEOUT_MS = 10_000

/** The authorization needs a person, and this host has none to ask (`corral serve`). */
export class NeedsPerson extends Error {
  override readonly name = "NeedsPerson"
}

/**
 * One server's OAuth client. Its credential is read from `clientSecretEnv` or `privateKeyEnv` before each connect
 * (`setCredential`): a secret goes in the client information (the SDK picks basic or post authentication from the
 * server's metadata), a key signs a `private_key_jwt` assertion for every token request.
 */
export class Session implements OAuthClientProvider {
  private saved: Promise<Saved> | undefined
  private verifier: string | undefined
  private pendingCode: string | undefined
  private expectedState: string | undefined
  private authorizationUrl: URL | undefined
  private secret: string | undefined
  /** Set while the credential is a signing key: the SDK then authenticates token requests with it alone. */
  addClientAuthentication?: AddClientAuthentication

  constructor(
    readonly server: string,
    readonly config: McpConfig.OAuth,
    private readonly vault: Vault,
    private readonly interaction: Interaction
  ) {
    if (config.clientMetadataUrl !== undefined) this.clientMetadataUrl = config.clientMetadataUrl
  }

  /** The client credential for this connect (from `clientSecretEnv` or `privateKeyEnv`), or none. */
  setCredential(credential: McpConfig.OAuthCredential | undefined): void {
    this.secret = credential?.kind === "secret" ? credential.secret : undefined
    if (credential?.kind !== "private_key" || this.config.clientId === undefined) {
      delete this.addClientAuthentication
      return
    }
    // RFC 7523 §3: the client is both issuer and subject; the audience is the authorization server's issuer.
    this.addClientAuthentication = createPrivateKeyJwtAuth({
      issuer: this.config.clientId,
      subject: this.config.clientId,
      privateKey: credential.pem,
      alg: credential.algorithm
    })
  }

  /** The code the last followed redirect brought back, once (the caller then finishes the authorization with it). */
  takeCode(): string | undefined {
    const code = this.pendingCode
    this.pendingCode = undefined
    return code
  }

  /** The authorization URL the last `capture` kept, once (for the person to open). */
  takeAuthorizationUrl(): URL | undefined {
    const url = this.authorizationUrl
    this.authorizationUrl = undefined
    return url
  }

  /** Whether `state` is the one the authorization URL carried (false before any authorization started). */
  stateMatches(state: string | null): boolean {
    return this.expectedState !== undefined && state === this.expectedState
  }

  private load(): Promise<Saved> {
    this.saved ??= this.vault.load().catch(() => ({}))
    return this.saved
  }

  private async update(patch: (saved: Saved) => Saved): Promise<void> {
    const next = patch(await this.load())
    this.saved = Promise.resolve(next)
    await this.vault.save(next)
  }

  get redirectUrl(): string | undefined {
    return this.config.grant === "client_credentials"
      ? undefined
      : this.config.redirectUrl ?? McpConfig.DEFAULT_REDIRECT_URL
  }

  /** SEP-991: where the server supports URL client ids, this URL is Corral's client id (no registration). */
  readonly clientMetadataUrl?: string

  get clientMetadata(): OAuthClientMetadata {
    return clientMetadataOf(this.config, this.redirectUrl)
  }

  state(): string {
    this.expectedState = randomBytes(16).toString("base64url")
    return this.expectedState
  }

  async clientInformation(): Promise<OAuthClientInformationMixed | undefined> {
    return clientInformationOf(this.config, this.secret, await this.load())
  }

  async saveClientInformation(clientInformation: OAuthClientInformationMixed): Promise<void> {
    // A pre-registered secret is never stored: it stays in its environment variable.
    const { client_secret: _secret, ...kept } = clientInformation as OAuthClientInformationMixed & {
      readonly client_secret?: string
    }
    await this.update((saved) => ({
      ...saved,
      clientInformation: this.config.clientId === undefined ? clientInformation : kept
    }))
  }

  async tokens(): Promise<OAuthTokens | undefined> {
    const saved = await this.load()
    if (saved.tokens !== undefined || this.interaction !== "none") return saved.tokens
    // No tokens and nobody to sign in (serve): another process (`corral mcp login`, same store) may have stored
    // some since they were read, so read again — a server down for want of a sign-in comes up at its next retry.
    this.saved = undefined
    return (await this.load()).tokens
  }

  async saveTokens(tokens: OAuthTokens): Promise<void> {
    await this.update((saved) => ({ ...saved, tokens }))
  }

  async discoveryState(): Promise<OAuthDiscoveryState | undefined> {
    return (await this.load()).discoveryState
  }

  async saveDiscoveryState(state: OAuthDiscoveryState): Promise<void> {
    await this.update((saved) => ({ ...saved, discoveryState: state }))
  }

  saveCodeVerifier(codeVerifier: string): void {
    this.verifier = codeVerifier
  }

  codeVerifier(): string {
    if (this.verifier === undefined) throw new Error("no PKCE code verifier: the authorization was not started here")
    return this.verifier
  }

  async invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery"): Promise<void> {
    if (scope === "verifier" || scope === "all") this.verifier = undefined
    if (scope === "verifier") return
    await this.update((saved) => invalidated(saved, scope))
  }

  prepareTokenRequest(scope?: string): URLSearchParams | undefined {
    return tokenRequestOf(this.config, scope)
  }

  async redirectToAuthorization(authorizationUrl: URL): Promise<void> {
    if (this.interaction === "none") throw new NeedsPerson(needsPersonText(this.server, authorizationUrl))
    if (this.interaction === "capture") {
      this.authorizationUrl = authorizationUrl
      return
    }
    this.pendingCode = await follow(authorizationUrl, this.redirectUrl!, this.expectedState)
  }
}

/** The client's metadata: its grant, redirect URL, authentication method and scopes, from the config. */
const clientMetadataOf = (config: McpConfig.OAuth, redirectUrl: string | undefined): OAuthClientMetadata => {
  const scope = config.scopes?.join(" ")
  const confidential = config.clientId !== undefined && config.clientSecretEnv !== undefined
  const signed = config.clientId !== undefined && config.privateKeyEnv !== undefined
  return {
    client_name: "Corral",
    redirect_uris: redirectUrl === undefined ? [] : [redirectUrl],
    grant_types: config.grant === "client_credentials"
      ? ["client_credentials"]
      : ["authorization_code", "refresh_token"],
    response_types: config.grant === "client_credentials" ? [] : ["code"],
    token_endpoint_auth_method: signed ? "private_key_jwt" : confidential ? "client_secret_basic" : "none",
    ...(scope === undefined || scope === "" ? {} : { scope })
  }
}

/** The client's information: a pre-registered client's from the config, else what registration saved. */
const clientInformationOf = (
  config: McpConfig.OAuth,
  secret: string | undefined,
  saved: Saved
): OAuthClientInformationMixed | undefined => {
  if (config.clientId === undefined) return saved.clientInformation
  // A pre-registered client: the config is the truth (a saved copy only adds the issuer it was bound to).
  const issuer = saved.clientInformation?.client_id === config.clientId ? saved.clientInformation.issuer : undefined
  return {
    client_id: config.clientId,
    ...(secret === undefined ? {} : { client_secret: secret }),
    ...(issuer === undefined || issuer === null ? {} : { issuer })
  }
}

/** The parameters of a `client_credentials` token request (`undefined` for another grant). */
const tokenRequestOf = (config: McpConfig.OAuth, scope: string | undefined): URLSearchParams | undefined => {
  if (config.grant !== "client_credentials") return undefined
  const params = new URLSearchParams({ grant_type: "client_credentials" })
  const wanted = scope ?? config.scopes?.join(" ")
  if (wanted !== undefined && wanted !== "") params.set("scope", wanted)
  return params
}

/** `saved` without what `scope` invalidates. */
const invalidated = (saved: Saved, scope: "all" | "client" | "tokens" | "discovery"): Saved => ({
  ...(scope === "all" || scope === "client" ? {} : { clientInformation: saved.clientInformation }),
  ...(scope === "all" || scope === "tokens" ? {} : { tokens: saved.tokens }),
  ...(scope === "all" || scope === "discovery" ? {} : { discoveryState: saved.discoveryState })
})

/** Why a host with nobody to ask cannot authorize at `authorizationUrl`, and what to do instead. */
const needsPersonText = (server: string, authorizationUrl: URL): string =>
  `it needs a person to sign in at its authorization server (${authorizationUrl.origin}; OAuth grant ` +
  `authorization_code) and this host has nobody to ask: sign in once with \`corral mcp login ${server}\` ` +
  "(the tokens are stored for corral serve, which needs CORRAL_SECRET_KEY), or use \"grant\": " +
  "\"client_credentials\" if the server allows it, or a token in `headers` " +
  "(`{ \"Authorization\": { \"env\": \"VAR\", \"prefix\": \"Bearer \" } }`)"

/**
 * Follows the authorization URL without following redirects (`follow`): the redirect back to `redirectUrl` must carry
 * the state the URL was made with and a code, which is answered. Bounded by `FOLLOW_TIMEOUT_MS`.
 */
const follow = async (
  authorizationUrl: URL,
  redirectUrl: string,
  expectedState: string | undefined
): Promise<string> => {
  const response = await fetch(authorizationUrl, {
    redirect: "manual",
    signal: AbortSignal.timeout(FOLLOW_TIMEOUT_MS)
  })
  await response.body?.cancel()
  const location = response.headers.get("location")
  if (response.status < 300 || response.status >= 400 || location === null) {
    throw new NeedsPerson(
      `its authorization server answered HTTP ${response.status} instead of redirecting back (a sign-in page?): ` +
        "a person must authorize Corral there, which corral mcp inspect cannot do"
    )
  }
  const back = new URL(location, authorizationUrl)
  const expected = new URL(redirectUrl)
  if (back.origin !== expected.origin || back.pathname !== expected.pathname) {
    throw new Error(`the authorization server redirected to ${back.origin}${back.pathname}, not to ${expected.href}`)
  }
  const error = back.searchParams.get("error")
  if (error !== null) {
    const description = back.searchParams.get("error_description")
    throw new Error(`the authorization server refused: ${error}${description === null ? "" : ` (${description})`}`)
  }
  if (expectedState !== undefined && back.searchParams.get("state") !== expectedState) {
    throw new Error("the authorization server's redirect carried another state: refused (a forged redirect?)")
  }
  const code = back.searchParams.get("code")
  if (code === null) throw new Error("the authorization server's redirect carried no code")
  return code
}
