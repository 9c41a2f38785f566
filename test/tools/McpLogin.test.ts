/**
 * A person's sign-in to an MCP server behind OAuth (`McpLogin`, the body of `corral mcp login`), against a real
 * authorization server and MCP server on 127.0.0.1 (test/support/McpHttpFixture with `oauth`): the test plays the
 * browser — it GETs the authorization URL and follows the redirect to Corral's loopback listener — then a registry as
 * `corral serve` builds it (nobody to sign in) connects with the stored tokens, calls, and refreshes. A forged
 * redirect (another state) is refused, the wait for the person is bounded (TestClock), logout forgets the tokens, and
 * a registry already running (serve on a shared store) picks a sign-in up at its next retry.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Schedule, TestClock } from "effect"
import * as McpCredentials from "../../src/tools/McpCredentials.js"
import * as McpLogin from "../../src/tools/McpLogin.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import { inspectable } from "../support/Credentials.js"
import * as McpHttpFixture from "../support/McpHttpFixture.js"
import { ctx } from "../support/McpServers.js"
import { eventually } from "../support/ServerHarness.js"

const client = { clientId: "corral-test", clientSecret: "cs-0123456789" }

const signable = (url: string): McpLogin.Signable => ({
  url,
  auth: { type: "oauth", grant: "authorization_code" }
})

/** Starts a login in a fiber; resolves with it and the authorization URL it shows (and its redirect URI). */
const started = (server: McpLogin.Signable, waitMs = 60_000) =>
  Effect.gen(function*() {
    const shown = yield* Deferred.make<{ readonly url: string; readonly redirectUrl: string }>()
    const fiber = yield* McpLogin.login("remote", server, {
      waitMs,
      connectTimeoutMs: 10_000,
      onAuthorizationUrl: (url, redirectUrl) => Deferred.succeed(shown, { url, redirectUrl })
    }).pipe(Effect.scoped, Effect.fork)
    return { fiber, shown: yield* Deferred.await(shown) }
  })

/** The browser: GETs the authorization URL and follows the redirect to the loopback callback. */
const browse = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url, { signal: AbortSignal.timeout(10_000) })
    return { status: response.status, url: response.url, text: await response.text() }
  })

describe("McpLogin", () => {
  it.scopedLive("signs a person in through the loopback redirect; serve then connects, calls and refreshes", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ oauth: client })
      const store = inspectable()
      const { fiber, shown } = yield* started(signable(server.url)).pipe(Effect.provide(store.layer))
      const authorize = new URL(shown.url)
      expect(authorize.searchParams.get("code_challenge_method")).toBe("S256")
      expect(authorize.searchParams.get("redirect_uri")).toBe(shown.redirectUrl)
      expect(shown.redirectUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/oauth\/callback$/)

      const page = yield* browse(shown.url)
      expect(page.status).toBe(200)
      expect(page.url.startsWith(shown.redirectUrl)).toBe(true)
      expect(page.text).toMatch(/you can close this tab/)
      const signedIn = yield* Fiber.join(fiber)
      expect(signedIn).toMatchObject({ server: "remote", refreshable: true })
      expect(signedIn.tools).toContain("echo")
      expect(server.grants).toMatchObject({ register: 1, authorize: 1, authorization_code: 1 })
      // Stored sealed, under the key the registry reads; the listener is gone.
      const sealed = store.raw.get(McpCredentials.keyFor("remote", server.url))
      expect(sealed).toMatch(/^v1\./)
      expect(sealed).not.toContain("at-1")
      expect(yield* Effect.promise(() => fetch(shown.redirectUrl).then(() => "open", () => "closed"))).toBe("closed")

      // `corral serve`'s registry (nobody to sign in): up with the stored token, calls, and refreshes it.
      const mcp = yield* McpRegistry.make({ remote: signable(server.url) }, {
        restartSchedule: Schedule.stop,
        connectTimeoutMs: 10_000
      }).pipe(Effect.provide(store.layer))
      expect((yield* mcp.servers!).find((s) => s.name === "remote")).toMatchObject({ state: "up" })
      expect(yield* mcp.call("echo", `{"message":"signed in"}`, ctx)).toEqual({
        content: "echo: signed in",
        isError: false
      })
      server.expireTokens()
      expect(yield* mcp.call("echo", `{"message":"refreshed"}`, ctx)).toEqual({
        content: "echo: refreshed",
        isError: false
      })
      expect(server.grants).toMatchObject({ authorize: 1, authorization_code: 1, refresh_token: 1 })

      // Logout forgets them: the next serve has nobody to sign in, and says to log in.
      expect(yield* McpLogin.logout("remote", signable(server.url)).pipe(Effect.provide(store.layer))).toBe(true)
      expect(store.raw.size).toBe(0)
      expect(yield* McpLogin.logout("remote", signable(server.url)).pipe(Effect.provide(store.layer))).toBe(false)
      const after = yield* McpRegistry.make({ remote: signable(server.url) }, {
        restartSchedule: Schedule.stop,
        connectTimeoutMs: 10_000
      }).pipe(Effect.provide(store.layer))
      const down = (yield* after.servers!).find((s) => s.name === "remote")
      expect(down).toMatchObject({ state: "down" })
      expect(down!.lastError).toMatch(/sign in once with `corral mcp login remote`/)
    }))

  it.scopedLive("a serve already running picks up a sign-in made meanwhile at its next retry", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ oauth: client })
      const store = inspectable()
      const mcp = yield* McpRegistry.make({ remote: signable(server.url) }, {
        restartSchedule: Schedule.spaced("50 millis"),
        connectTimeoutMs: 10_000
      }).pipe(Effect.provide(store.layer))
      expect((yield* mcp.servers!).find((s) => s.name === "remote")).toMatchObject({ state: "down" })
      const { fiber, shown } = yield* started(signable(server.url)).pipe(Effect.provide(store.layer))
      yield* browse(shown.url)
      yield* Fiber.join(fiber)
      yield* eventually(
        "the running registry to come up with the stored tokens and offer the server's tools",
        Effect.map(mcp.list(ctx), (tools) => tools.find((t) => t.name === "echo" && t.unavailable === undefined))
      )
      expect(yield* mcp.call("echo", `{"message":"picked up"}`, ctx)).toEqual({
        content: "echo: picked up",
        isError: false
      })
      expect(server.grants).toMatchObject({ authorize: 1, authorization_code: 1 })
    }))

  it.scopedLive("refuses a redirect that carries another state, and stores nothing", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ oauth: client })
      const store = inspectable()
      const { fiber, shown } = yield* started(signable(server.url)).pipe(Effect.provide(store.layer))
      // The authorization server redirects back; an attacker's page sends its own code and state instead.
      const answer = yield* Effect.promise(() => fetch(shown.url, { redirect: "manual" }))
      const back = new URL(answer.headers.get("location")!)
      back.searchParams.set("state", "forged")
      const page = yield* browse(back.href)
      expect(page.status).toBe(400)
      expect(page.text).toMatch(/another state/)
      const exit = yield* Fiber.await(fiber)
      expect(exit).toMatchObject(Exit.fail(expect.objectContaining({ _tag: "LoginRedirectRefused" })))
      if (Exit.isFailure(exit)) expect(String(exit.cause)).toMatch(/another state than the authorization URL/)
      expect(server.grants).not.toHaveProperty("authorization_code")
      expect(store.raw.size).toBe(0)
    }))

  it.scoped("gives up when nobody signs in within the bound, storing nothing and closing the listener", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ oauth: client })
      const store = inspectable()
      const { fiber, shown } = yield* started(signable(server.url), 120_000).pipe(Effect.provide(store.layer))
      yield* TestClock.adjust("119 seconds")
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust("1 second")
      const exit = yield* Fiber.await(fiber)
      expect(exit).toMatchObject(Exit.fail(expect.objectContaining({ _tag: "LoginTimedOut", waitMs: 120_000 })))
      if (Exit.isFailure(exit)) {
        expect(String(exit.cause)).toMatch(/nobody completed the sign-in to MCP server "remote" within 120000 ms/)
      }
      expect(store.raw.size).toBe(0)
      expect(yield* Effect.promise(() => fetch(shown.redirectUrl).then(() => "open", () => "closed"))).toBe("closed")
    }))

  it.effect("names the field to change for a server a person cannot sign in to", () =>
    Effect.gen(function*() {
      const why = (server: Parameters<typeof McpLogin.signable>[1]) =>
        Effect.flip(McpLogin.signable("x", server, ["x", "y"])).pipe(Effect.map((e) => e.message))
      expect(yield* why(undefined)).toBe(`MCP server "x": not in mcpServers (configured: x, y)`)
      expect(yield* why({ command: "srv" })).toMatch(/a stdio server \(command\) has no OAuth sign-in/)
      expect(yield* why({ url: "http://h/mcp" })).toMatch(/mcpServers\.x\.auth is not set/)
      expect(
        yield* why({
          url: "http://h/mcp",
          auth: { type: "oauth", grant: "client_credentials", clientId: "c", clientSecretEnv: "S" }
        })
      ).toMatch(/mcpServers\.x\.auth\.grant is client_credentials/)
      const remote = yield* Effect.flip(
        McpLogin.listenerOf(
          "x",
          { type: "oauth", grant: "authorization_code", redirectUrl: "https://app/cb" },
          undefined
        )
      )
      expect(remote.message).toMatch(/mcpServers\.x\.auth\.redirectUrl is https:\/\/app\/cb, not a loopback address/)
      expect(
        yield* McpLogin.listenerOf("x", {
          type: "oauth",
          grant: "authorization_code",
          redirectUrl: "http://127.0.0.1:9123/cb"
        }, undefined)
      ).toEqual({ port: 9123, path: "/cb", redirectUrl: "http://127.0.0.1:9123/cb" })
      expect(
        yield* McpLogin.listenerOf("x", {
          type: "oauth",
          grant: "authorization_code",
          redirectUrl: "http://localhost:9123/cb"
        }, 9200)
      ).toEqual({ port: 9200, path: "/cb" })
      expect(yield* McpLogin.listenerOf("x", { type: "oauth", grant: "authorization_code" }, 7000)).toEqual({
        port: 7000,
        path: "/oauth/callback"
      })
    }))
})
