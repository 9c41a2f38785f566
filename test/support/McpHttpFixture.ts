/**
 * A Streamable HTTP MCP server on 127.0.0.1 (a real listening socket, in the test's process), for the faults the
 * stdio fixture cannot show: a bearer token it requires (401 without it), progress reported for as long as a call
 * runs, log messages sent mid-call, and a server stopped mid-call (every socket destroyed under an open response
 * stream).
 *
 * Stateless (a fresh `Server` and transport per request), which is what most hosted MCP servers are. Tools:
 * - `echo { message }` answers `echo: <message>`;
 * - `progress { everyMs, count }` reports progress 1..count of count, `everyMs` apart, then answers `done`;
 * - `endless { everyMs }` reports progress every `everyMs` until the client cancels;
 * - `chatty` sends an `info` log message and progress 1 of 2, then answers `chatted`;
 * - `hang` never answers (until cancelled); `calls` counts how many `hang` calls arrived.
 *
 * With `oauth`, the same server is also a small OAuth 2.1 authorization server in front of `/mcp` (RFC 9728 protected
 * resource metadata, RFC 8414 metadata, `/authorize` that approves at once and redirects back with a code, `/token`
 * for the authorization_code (PKCE checked), refresh_token and client_credentials grants, `/register`), and `/mcp`
 * answers 401 with `WWW-Authenticate: Bearer resource_metadata=…` to any request without a live access token.
 * `expireTokens` makes every access token issued so far invalid (as if they had expired); `grants` counts the token
 * requests per grant type.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect } from "effect"
import type { Scope } from "effect"
import { createHash } from "node:crypto"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

const object = (properties: Record<string, object>, required: ReadonlyArray<string> = []): Tool["inputSchema"] => ({
  type: "object",
  properties,
  required: [...required]
})

const tools: ReadonlyArray<Tool> = [
  { name: "echo", description: "Echoes its message.", inputSchema: object({ message: { type: "string" } }) },
  {
    name: "progress",
    description: "Reports progress `count` times, `everyMs` apart, then answers.",
    inputSchema: object({ everyMs: { type: "integer" }, count: { type: "integer" } }, ["everyMs", "count"])
  },
  {
    name: "endless",
    description: "Reports progress every `everyMs` until cancelled.",
    inputSchema: object({ everyMs: { type: "integer" } }, ["everyMs"])
  },
  { name: "chatty", description: "Logs, reports progress, answers.", inputSchema: object({}) },
  { name: "hang", description: "Never answers (until cancelled).", inputSchema: object({}) }
]

const text = (s: string): CallToolResult => ({ content: [{ type: "text", text: s }] })

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const onAbort = () => {
      clearTimeout(timer)
      resolve()
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort)
      resolve()
    }, ms)
    signal.addEventListener("abort", onAbort, { once: true })
  })

/** The running fixture. */
export interface McpHttpFixture {
  readonly url: string
  /** Resolves when the next `hang` call has arrived (registered now, awaited later). */
  readonly nextHang: Effect.Effect<Effect.Effect<void>>
  /** Stops listening and destroys every open socket, mid-response or not. */
  readonly stop: Effect.Effect<void>
  /** With `oauth`: token requests per grant type, authorization requests, registrations. */
  readonly grants: Record<string, number>
  /** With `oauth`: every access token issued so far stops being accepted. */
  readonly expireTokens: () => void
}

/** The OAuth side of the fixture: a pre-registered client (`clientId`, `clientSecret`) and whether DCR is offered. */
export interface OAuthOptions {
  readonly clientId: string
  readonly clientSecret: string
}

const readBody = (req: http.IncomingMessage): Promise<string> =>
  new Promise((resolve) => {
    let body = ""
    req.on("data", (chunk: Buffer) => (body += chunk.toString()))
    req.on("end", () => resolve(body))
  })

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { "content-type": "application/json", ...headers })
  res.end(JSON.stringify(body))
}

const serverFor = (onHang: () => void): Server => {
  const server = new Server({ name: "corral-http-fixture", version: "1.0.0" }, {
    capabilities: { tools: {}, logging: {} }
  })
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [...tools] }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
    const args = (request.params.arguments ?? {}) as Record<string, number | string>
    const progressToken = request.params._meta?.progressToken
    const progress = (value: number, total?: number) =>
      progressToken === undefined ? Promise.resolve() : extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken, progress: value, ...(total === undefined ? {} : { total }) }
      })
    switch (request.params.name) {
      case "echo":
        return text(`echo: ${String(args["message"])}`)
      case "progress": {
        const count = Number(args["count"])
        for (let i = 1; i <= count && !extra.signal.aborted; i++) {
          await sleep(Number(args["everyMs"]), extra.signal)
          await progress(i, count)
        }
        return text("done")
      }
      case "endless": {
        for (let i = 1; !extra.signal.aborted; i++) {
          await sleep(Number(args["everyMs"]), extra.signal)
          if (!extra.signal.aborted) await progress(i)
        }
        return text("cancelled")
      }
      case "chatty":
        await extra.sendNotification({
          method: "notifications/message",
          params: { level: "info", logger: "fixture", data: "warming up" }
        })
        await progress(1, 2)
        return text("chatted")
      case "hang":
        onHang()
        await new Promise<void>((resolve) => extra.signal.addEventListener("abort", () => resolve()))
        return text("cancelled")
    }
    return { content: [{ type: "text", text: `unknown tool ${request.params.name}` }], isError: true }
  })
  return server
}

/**
 * Starts the fixture on a free port of 127.0.0.1; with `token`, every request without `Authorization: Bearer
 * <token>` is answered 401. Stopped when the scope closes.
 */
export const start = (
  options: { readonly token?: string; readonly oauth?: OAuthOptions } = {}
): Effect.Effect<McpHttpFixture, never, Scope.Scope> =>
  Effect.gen(function*() {
    let hangWaiters: Array<() => void> = []
    const grants: Record<string, number> = {}
    const count = (what: string) => (grants[what] = (grants[what] ?? 0) + 1)
    let live = new Set<string>()
    const refreshTokens = new Set<string>()
    const codes = new Map<string, string>()
    let issued = 0
    let base = ""
    const issue = (res: http.ServerResponse) => {
      issued++
      const access = `at-${issued}`
      const refresh = `rt-${issued}`
      live.add(access)
      refreshTokens.add(refresh)
      json(res, 200, { access_token: access, token_type: "Bearer", expires_in: 3600, refresh_token: refresh })
    }
    const oauth = async (req: http.IncomingMessage, res: http.ServerResponse, o: OAuthOptions): Promise<boolean> => {
      const url = new URL(req.url ?? "/", base)
      switch (url.pathname) {
        case "/.well-known/oauth-protected-resource/mcp":
          json(res, 200, { resource: `${base}/mcp`, authorization_servers: [base] })
          return true
        case "/.well-known/oauth-authorization-server":
          json(res, 200, {
            issuer: base,
            authorization_endpoint: `${base}/authorize`,
            token_endpoint: `${base}/token`,
            registration_endpoint: `${base}/register`,
            response_types_supported: ["code"],
            grant_types_supported: ["authorization_code", "refresh_token", "client_credentials"],
            code_challenge_methods_supported: ["S256"],
            token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"]
          })
          return true
        case "/register": {
          count("register")
          const body = JSON.parse(await readBody(req)) as Record<string, unknown>
          json(res, 201, { ...body, client_id: `dyn-${grants["register"]}`, token_endpoint_auth_method: "none" })
          return true
        }
        case "/authorize": {
          count("authorize")
          const code = `code-${grants["authorize"]}`
          codes.set(code, url.searchParams.get("code_challenge") ?? "")
          const back = new URL(url.searchParams.get("redirect_uri")!)
          back.searchParams.set("code", code)
          const state = url.searchParams.get("state")
          if (state !== null) back.searchParams.set("state", state)
          res.writeHead(302, { location: back.href })
          res.end()
          return true
        }
        case "/token": {
          const form = new URLSearchParams(await readBody(req))
          const grant = form.get("grant_type") ?? "?"
          count(grant)
          if (grant === "client_credentials") {
            const basic = Buffer.from(`${o.clientId}:${o.clientSecret}`).toString("base64")
            if (req.headers.authorization !== `Basic ${basic}`) {
              json(res, 401, { error: "invalid_client" })
              return true
            }
            issue(res)
            return true
          }
          if (grant === "authorization_code") {
            const challenge = codes.get(form.get("code") ?? "")
            const verifier = form.get("code_verifier") ?? ""
            if (challenge !== createHash("sha256").update(verifier).digest("base64url")) {
              json(res, 400, { error: "invalid_grant", error_description: "PKCE verifier does not match" })
              return true
            }
            issue(res)
            return true
          }
          if (grant === "refresh_token" && refreshTokens.has(form.get("refresh_token") ?? "")) {
            issue(res)
            return true
          }
          json(res, 400, { error: "invalid_grant" })
          return true
        }
      }
      const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1]
      if (bearer === undefined || !live.has(bearer)) {
        json(res, 401, { error: "invalid_token" }, {
          "www-authenticate": `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`
        })
        return true
      }
      return false
    }
    const node = http.createServer((req, res) => {
      void (async () => {
        if (options.oauth !== undefined && await oauth(req, res, options.oauth)) return
        if (options.token !== undefined && req.headers.authorization !== `Bearer ${options.token}`) {
          res.writeHead(401, { "content-type": "application/json", "www-authenticate": "Bearer" })
          res.end(JSON.stringify({ error: "unauthorized" }))
          return
        }
        const transport = new StreamableHTTPServerTransport({})
        const server = serverFor(() => {
          const waiting = hangWaiters
          hangWaiters = []
          waiting.forEach((w) => w())
        })
        res.on("close", () => {
          void transport.close()
          void server.close()
        })
        await server.connect(transport)
        await transport.handleRequest(req, res)
      })()
    })
    yield* Effect.async<void>((resume) => {
      node.listen(0, "127.0.0.1", () => resume(Effect.void))
    })
    const port = (node.address() as AddressInfo).port
    base = `http://127.0.0.1:${port}`
    const stop = Effect.async<void>((resume) => {
      if (!node.listening) return resume(Effect.void)
      node.close(() => resume(Effect.void))
      node.closeAllConnections()
    })
    yield* Effect.addFinalizer(() => stop)
    const nextHang = Effect.map(Deferred.make<void>(), (arrived) => {
      hangWaiters.push(() => Deferred.unsafeDone(arrived, Effect.void))
      return Deferred.await(arrived)
    })
    return {
      url: `${base}/mcp`,
      nextHang,
      stop,
      grants,
      expireTokens: () => {
        live = new Set()
      }
    }
  })
