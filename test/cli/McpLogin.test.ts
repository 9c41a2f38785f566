/**
 * `corral mcp login` / `logout` as a person runs them (child processes of bin/corral.js), against a test-owned OAuth
 * authorization server and MCP server on 127.0.0.1 (test/support/McpHttpFixture with `oauth`) and an embedded
 * PGlite data directory: the test plays the browser (it GETs the printed authorization URL and follows the redirect
 * to Corral's loopback callback), then `corral serve`'s runtime (`Wiring.layer`, in-process, on the same data
 * directory and key) lists and calls the server's tools with the stored token; logout deletes it, and serve marks the
 * server down again saying to log in. Refusals: no CORRAL_SECRET_KEY, and nobody signing in within --wait (exit 2).
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Config from "../../src/config/Config.js"
import { Principal } from "../../src/domain/Principal.js"
import * as Wiring from "../../src/server/Wiring.js"
import { ToolExecutor } from "../../src/tools/ToolExecutor.js"
import * as McpHttpFixture from "../support/McpHttpFixture.js"
import { ctx } from "../support/McpServers.js"
import { corral, corralRun, eventually } from "../support/ServerHarness.js"

const client = { clientId: "corral-test", clientSecret: "cs-0123456789" }
const SECRET_KEY = "a login test key, long enough"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "corral-login-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** The server in a configuration file under `dir` (what `--config` is given), with the data directory beside it. */
const configure = (url: string, dir: string): string => {
  const file = join(dir, "corral.json")
  writeFileSync(
    file,
    JSON.stringify({ mcpServers: { remote: { url, auth: { type: "oauth", grant: "authorization_code" } } } })
  )
  return file
}

/** The environment of a `corral` child: the data directory and (unless `key` is false) the key. */
const envOf = (dataDir: string, key = true): Record<string, string> => ({
  CORRAL_DATA_DIR: dataDir,
  ...(key ? { CORRAL_SECRET_KEY: SECRET_KEY } : {})
})

/** What `corral serve`'s runtime on `dataDir` makes of server "remote": its state, and an echo call when it is up. */
const asServe = (url: string, dataDir: string) => {
  const settings: Config.Settings = {
    ...Config.defaults,
    database: { _tag: "Embedded", dataDir },
    demo: { ...Config.defaults.demo, enabled: false },
    mcpServers: { remote: { url, auth: { type: "oauth", grant: "authorization_code" } } }
  }
  return Effect.gen(function*() {
    const tools = yield* ToolExecutor
    const remote = (yield* tools.servers!).find((s) => s.name === "remote")!
    if (remote.state !== "up") return { state: remote.state, lastError: remote.lastError }
    const listed = (yield* tools.list(ctx)).map((t) => t.name)
    const call = yield* tools.call("echo", `{"message":"from serve"}`, ctx)
    return { state: remote.state, listed, call }
  }).pipe(
    Effect.provide(Layer.fresh(Wiring.layer(settings, [new Principal({ orgId: "local", userId: "cli" })]))),
    Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["CORRAL_SECRET_KEY", SECRET_KEY]]))),
    Effect.scoped
  )
}

describe("corral mcp login", () => {
  it.scopedLive(
    "signs a person in for corral serve, which then lists and calls the server's tools; logout signs it out",
    () =>
      Effect.gen(function*() {
        const server = yield* McpHttpFixture.start({ oauth: client })
        const dir = yield* tempDir
        const config = configure(server.url, dir)
        const child = corral(["mcp", "login", "remote", "--no-browser", "--config", config], envOf(join(dir, "data")))
        yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
        const url = yield* eventually(
          "the authorization URL on stdout",
          Effect.sync(() => /^ {2}(http:\/\/127\.0\.0\.1:\d+\/authorize\?\S+)$/m.exec(child.stdout())?.[1]),
          "90 seconds"
        )
        expect(child.stdout()).toMatch(/Sign in to MCP server "remote": open this URL in a browser/)
        expect(new URL(url).searchParams.get("code_challenge_method")).toBe("S256")
        // The browser: follows the authorization server's redirect to Corral's loopback callback.
        const page = yield* Effect.promise(() =>
          fetch(url, { signal: AbortSignal.timeout(10_000) }).then(async (r) => ({
            status: r.status,
            text: await r.text()
          }))
        )
        expect(page).toMatchObject({ status: 200, text: expect.stringMatching(/you can close this tab/) })
        const code = yield* Effect.promise(() => child.exited)
        expect(code, child.stderr()).toBe(0)
        expect(child.stdout()).toMatch(/signed in to MCP server "remote": the server lists 5 tool\(s\): echo, /)
        expect(server.grants).toMatchObject({ register: 1, authorize: 1, authorization_code: 1 })

        // corral serve's runtime on the same store and key: up with the stored token, lists and calls.
        const served = yield* asServe(server.url, join(dir, "data"))
        expect(served).toMatchObject({ state: "up", call: { content: "echo: from serve", isError: false } })
        expect(served.listed).toContain("echo")
        expect(server.grants).toMatchObject({ authorize: 1, authorization_code: 1 })

        const out = yield* corralRun(["mcp", "logout", "remote", "--config", config], envOf(join(dir, "data"), false))
        expect(out.code, out.stderr).toBe(0)
        expect(out.stdout).toMatch(/signed out of MCP server "remote": its stored tokens and client registration/)
        const again = yield* corralRun(["mcp", "logout", "remote", "--config", config], envOf(join(dir, "data"), false))
        expect(again.stdout).toMatch(/nothing was stored for MCP server "remote"/)

        // Signed out: serve has nobody to sign in, and says how to.
        const after = yield* asServe(server.url, join(dir, "data"))
        expect(after).toMatchObject({ state: "down" })
        expect(after.lastError).toMatch(/sign in once with `corral mcp login remote`/)
      }),
    { timeout: 240_000 }
  )

  it.scopedLive(
    "refuses without CORRAL_SECRET_KEY before listening, and gives up at --wait with exit 2",
    () =>
      Effect.gen(function*() {
        expect(process.env["CORRAL_SECRET_KEY"], "the test needs CORRAL_SECRET_KEY unset").toBeUndefined()
        const server = yield* McpHttpFixture.start({ oauth: client })
        const dir = yield* tempDir
        const config = configure(server.url, dir)
        const login = ["mcp", "login", "remote", "--no-browser", "--config", config]
        const [keyless, waited] = yield* Effect.all([
          corralRun(login, envOf(join(dir, "a"), false)),
          corralRun([...login, "--wait", "300"], envOf(join(dir, "b")))
        ], { concurrency: 2 })
        expect(keyless.code).toBe(1)
        expect(keyless.stderr).toMatch(/corral mcp login: CORRAL_SECRET_KEY is not set: the tokens are stored only/)
        expect(keyless.stdout).not.toMatch(/authorize/)

        expect(waited.code, waited.stderr).toBe(2)
        expect(waited.stdout).toMatch(/open this URL in a browser \(waiting up to 300 ms/)
        expect(waited.stderr).toMatch(
          /nobody completed the sign-in to MCP server "remote" within 300 ms \(--wait\): nothing was stored/
        )
        expect(server.grants).not.toHaveProperty("authorize")
      }),
    { timeout: 180_000 }
  )
})
