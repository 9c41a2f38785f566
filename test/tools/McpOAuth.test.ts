/**
 * OAuth 2.1 for Streamable HTTP MCP servers (`auth` in mcpServers), against a real authorization server and MCP
 * server on 127.0.0.1 (test/support/McpHttpFixture with `oauth`): the client credentials grant with a secret read from
 * the environment, the authorization code grant with PKCE when the host may follow the redirect (inspect), a refresh
 * when the server stops taking the token, tokens kept in `McpCredentials` (sealed, reused by the next registry), and a
 * host with nobody to sign in (serve): that server is down saying what to do, the others are not.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Schedule } from "effect"
import * as McpCredentials from "../../src/tools/McpCredentials.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import type { ToolServerStatus } from "../../src/tools/ToolExecutor.js"
import { inspectable } from "../support/Credentials.js"
import * as McpHttpFixture from "../support/McpHttpFixture.js"
import { ctx, fixture } from "../support/McpServers.js"

const quick = { restartSchedule: Schedule.stop, connectTimeoutMs: 10_000 }
const client = { clientId: "corral-test", clientSecret: "cs-0123456789" }
const env = ConfigProvider.fromMap(new Map([["REMOTE_CLIENT_SECRET", client.clientSecret]]))

const stateOf = (mcp: McpRegistry.McpRegistry, name: string) =>
  Effect.map(mcp.servers!, (all): ToolServerStatus | undefined => all.find((s) => s.name === name))

describe("McpRegistry with OAuth", () => {
  it.scopedLive("gets a token with the client credentials grant (secret from the environment) and calls", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ oauth: client })
      const store = inspectable()
      const mcp = yield* McpRegistry.make({
        remote: {
          url: server.url,
          auth: {
            type: "oauth",
            grant: "client_credentials",
            clientId: client.clientId,
            clientSecretEnv: "REMOTE_CLIENT_SECRET"
          }
        }
      }, quick).pipe(Effect.withConfigProvider(env), Effect.provide(store.layer))
      expect(yield* stateOf(mcp, "remote")).toMatchObject({ state: "up" })
      expect(yield* mcp.call("echo", `{"message":"hi"}`, ctx)).toEqual({ content: "echo: hi", isError: false })
      expect(server.grants).toMatchObject({ client_credentials: 1 })
      // Stored sealed: neither the token nor the secret is readable in what the store holds.
      const sealed = [...store.raw.values()].join()
      expect(sealed).toMatch(/^v1\./)
      expect(sealed).not.toContain("at-1")
      expect(sealed).not.toContain(client.clientSecret)
    }))

  it.scopedLive("is down naming the variable when the client secret's variable is unset", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ oauth: client })
      const mcp = yield* McpRegistry.make({
        remote: {
          url: server.url,
          auth: {
            type: "oauth",
            grant: "client_credentials",
            clientId: client.clientId,
            clientSecretEnv: "REMOTE_CLIENT_SECRET"
          }
        }
      }, quick).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      expect(yield* stateOf(mcp, "remote")).toMatchObject({
        state: "down",
        lastError: "auth.clientSecretEnv: environment variable REMOTE_CLIENT_SECRET is not set"
      })
      expect(server.grants).toEqual({})
    }))

  it.scopedLive("follows the authorization code flow (registration, PKCE), refreshes, and reuses stored tokens", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ oauth: client })
      const store = inspectable()
      const config = {
        remote: { url: server.url, auth: { type: "oauth" as const, grant: "authorization_code" as const } }
      }
      const first = yield* Effect.scoped(Effect.gen(function*() {
        const mcp = yield* McpRegistry.make(config, { ...quick, interaction: "follow" }).pipe(
          Effect.provide(store.layer)
        )
        expect(yield* stateOf(mcp, "remote")).toMatchObject({ state: "up" })
        expect(server.grants).toMatchObject({ register: 1, authorize: 1, authorization_code: 1 })
        // The server stops taking the token: the next call is answered 401, the token refreshed, the call made.
        server.expireTokens()
        return yield* mcp.call("echo", `{"message":"after refresh"}`, ctx)
      }))
      expect(first).toEqual({ content: "echo: after refresh", isError: false })
      expect(server.grants).toMatchObject({ refresh_token: 1 })

      // A new registry on the same store (a restart) starts with the stored tokens: no new sign-in.
      const mcp = yield* McpRegistry.make(config, quick).pipe(Effect.provide(store.layer))
      expect(yield* stateOf(mcp, "remote")).toMatchObject({ state: "up" })
      expect(yield* mcp.call("echo", `{"message":"again"}`, ctx)).toEqual({ content: "echo: again", isError: false })
      expect(server.grants).toMatchObject({ register: 1, authorize: 1, authorization_code: 1, refresh_token: 1 })
    }))

  it.scopedLive("without anyone to sign in, marks only that server down and says what to do", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ oauth: client })
      const mcp = yield* McpRegistry.make({
        remote: { url: server.url, auth: { type: "oauth", grant: "authorization_code" }, tools: ["echo"] },
        fx: fixture(["--only", "pid"])
      }, quick)
      const remote = yield* stateOf(mcp, "remote")
      expect(remote).toMatchObject({ state: "down" })
      expect(remote!.lastError).toMatch(
        /needs a person to sign in at its authorization server \(http:\/\/127\.0\.0\.1:/
      )
      expect(remote!.lastError).toMatch(/"grant": "client_credentials"/)
      expect(server.grants).not.toHaveProperty("authorize")
      expect(yield* stateOf(mcp, "fx")).toMatchObject({ state: "up" })
      expect((yield* mcp.list(ctx)).find((t) => t.name === "echo")?.unavailable).toMatch(/needs a person/)
    }))
})

describe("McpCredentials sealing", () => {
  const key = McpCredentials.keyOf("0123456789abcdef0123")
  it("opens what it sealed, for the same row only, and not with another key", () => {
    const sealed = McpCredentials.seal(key, "remote http://x/mcp", `{"tokens":{"access_token":"t"}}`)
    expect(McpCredentials.open(key, "remote http://x/mcp", sealed)).toBe(`{"tokens":{"access_token":"t"}}`)
    expect(McpCredentials.open(key, "other http://x/mcp", sealed)).toBeUndefined()
    expect(McpCredentials.open(McpCredentials.keyOf("another key, long enough"), "remote http://x/mcp", sealed))
      .toBeUndefined()
    // Tampered: one bit of the ciphertext flipped (replacing its last characters was a no-op when they were already
    // those: the second-to-last is "A" one time in 64, the last, carrying two data bits, one in 4 — about 1 run in 256).
    const [version, iv, tag, body] = sealed.split(".")
    const flipped = Buffer.from(body!, "base64url")
    flipped[0] = flipped[0]! ^ 1
    const tampered = [version, iv, tag, flipped.toString("base64url")].join(".")
    expect(McpCredentials.open(key, "remote http://x/mcp", tampered)).toBeUndefined()
  })

  it("refuses a key shorter than 16 characters, saying how to make one", () => {
    expect(() => McpCredentials.keyOf("short")).toThrow(/at least 16 characters.*openssl rand/)
  })
})
