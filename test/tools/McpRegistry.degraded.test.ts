/**
 * MCP servers that are down: at start (a missing command, a 401, a server not there yet) and later (a killed child
 * whose restarts fail). The registry starts anyway, lists their tools unavailable with the reason, retries them in
 * the background, and swaps their tools in when they come up. Real processes and sockets throughout; waiting is a
 * bounded poll on a real condition.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Fiber, Schedule } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import type { ToolServerStatus } from "../../src/tools/ToolExecutor.js"
import * as McpHttpFixture from "../support/McpHttpFixture.js"
import { ctx, fixture, root } from "../support/McpServers.js"

/** Retries every 50 ms: the tests bring servers up and down in well under a second. */
const quick = { restartSchedule: Schedule.spaced("50 millis"), connectTimeoutMs: 10_000 }

/** Polls `check` every 20 ms until it returns a value; dies after `ms`. */
const until = <A>(what: string, check: Effect.Effect<A | undefined>, ms = 15_000): Effect.Effect<A> =>
  Effect.gen(function*() {
    for (let i = 0; i < ms / 20; i++) {
      const value = yield* check
      if (value !== undefined) return value
      yield* Effect.sleep("20 millis")
    }
    return yield* Effect.dieMessage(`${what} did not happen within ${ms} ms`)
  })

const tempFile = Effect.acquireRelease(
  Effect.sync(() => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "corral-mcp-")), "up")),
  (file) => Effect.sync(() => fs.rmSync(path.dirname(file), { recursive: true, force: true }))
)

const stateOf = (mcp: McpRegistry.McpRegistry, name: string) =>
  Effect.map(mcp.servers!, (all): ToolServerStatus | undefined => all.find((s) => s.name === name))

describe("McpRegistry with a server that is down", () => {
  it.scopedLive("starts, lists the down server's config-known tools unavailable, and serves the others", () =>
    Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({
        ghost: {
          command: path.join(root, "no-such-mcp-server"),
          tools: ["ghost_search"],
          effects: { ghost_fix: "write" }
        },
        fx: fixture(["--only", "echo"])
      }, quick)
      const tools = yield* mcp.list(ctx)
      expect(tools.map((t) => [t.name, t.source, t.unavailable === undefined])).toEqual([
        ["echo", "mcp:fx", true],
        ["ghost_fix", "mcp:ghost", false],
        ["ghost_search", "mcp:ghost", false]
      ])
      expect(tools.find((t) => t.name === "ghost_search")?.unavailable).toMatch(
        /^MCP server "ghost" is down since \d{4}-\d\d-\d\dT.*ENOENT/
      )
      expect(yield* mcp.call("echo", `{"message":"still here"}`, ctx)).toEqual({
        content: "echo: still here",
        isError: false
      })
      // A call that names it anyway is told the server is unavailable, never that the tool does not exist.
      const refused = yield* mcp.call("ghost_search", "{}", ctx)
      expect(refused).toMatchObject({ isError: true, failure: "tool_error" })
      expect(refused.content).toMatch(
        /^tool "ghost_search" was not run: it is temporarily unavailable because MCP server "ghost" is down since /
      )
      const ghost = yield* stateOf(mcp, "ghost")
      expect(ghost).toMatchObject({ transport: "stdio", state: "down", tools: 2 })
      expect(ghost!.failures).toBeGreaterThanOrEqual(1)
      expect(yield* stateOf(mcp, "fx")).toMatchObject({ state: "up", failures: 0, tools: 1 })
    }))

  it.scopedLive("brings a server that was down at start up in the background and swaps its tools in", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const mcp = yield* McpRegistry.make({
        late: fixture(["--only", "echo,read_notes", "--require-file", file], { tools: ["echo"] })
      }, quick)
      expect((yield* stateOf(mcp, "late"))?.lastError).toMatch(/does not exist/)
      expect((yield* mcp.list(ctx)).map((t) => [t.name, t.unavailable !== undefined])).toEqual([["echo", true]])
      // Retried while it stays down: the failures count up.
      yield* until("a second failed attempt", Effect.map(stateOf(mcp, "late"), (s) => s!.failures >= 2 || undefined))

      fs.writeFileSync(file, "")
      yield* until("the server to come up", Effect.map(stateOf(mcp, "late"), (s) => s!.state === "up" || undefined))
      yield* mcp.refreshed
      const tools = yield* mcp.list(ctx)
      expect(tools.map((t) => [t.name, t.effect, t.unavailable])).toEqual([
        ["echo", "write", undefined],
        ["read_notes", "read", undefined]
      ])
      expect(yield* mcp.call("read_notes", "{}", ctx)).toEqual({ content: "notes: all quiet", isError: false })
      const late = yield* stateOf(mcp, "late")
      expect(late).toMatchObject({ state: "up", failures: 0, tools: 2 })
      expect(late!.lastError).toMatch(/does not exist/)
    }))

  it.scopedLive("withdraws a killed server's tools while its restarts fail, and restores them when it is back", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      fs.writeFileSync(file, "")
      const mcp = yield* McpRegistry.make({ fx: fixture(["--only", "echo,pid", "--require-file", file]) }, quick)
      expect((yield* mcp.list(ctx)).every((t) => t.unavailable === undefined)).toBe(true)
      const pid = Number((yield* mcp.call("pid", "{}", ctx)).content)

      fs.rmSync(file)
      process.kill(pid, "SIGKILL")
      yield* until("its tools to be withdrawn", Effect.map(mcp.list(ctx), (tools) => tools[0]?.unavailable))
      const down = yield* mcp.list(ctx)
      expect(down.map((t) => t.name)).toEqual(["echo", "pid"])
      expect(down.every((t) => /^MCP server "fx" is down since /.test(t.unavailable ?? ""))).toBe(true)
      yield* until(
        "a failed restart",
        Effect.map(stateOf(mcp, "fx"), (s) => /does not exist/.test(s!.lastError!) || undefined)
      )

      fs.writeFileSync(file, "")
      yield* until(
        "its tools to be restored",
        Effect.map(mcp.list(ctx), (tools) => tools.every((t) => t.unavailable === undefined) || undefined)
      )
      expect(Number((yield* mcp.call("pid", "{}", ctx)).content)).not.toBe(pid)
    }))

  it.scopedLive("starts without a Streamable HTTP server that answers 401, reporting the status", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ token: "s3cret" })
      const mcp = yield* McpRegistry.make({ remote: { url: server.url, tools: ["echo"] } }, quick)
      const remote = yield* stateOf(mcp, "remote")
      expect(remote).toMatchObject({ transport: "http", state: "down" })
      expect(remote!.lastError).toMatch(/401/)
      // The fix is named: the configuration has no "auth" and no Authorization header.
      expect(remote!.lastError).toContain("mcpServers.remote has none: add \"auth\"")
      expect(remote!.lastError).toContain("corral mcp login remote")
      expect((yield* mcp.list(ctx))[0]?.unavailable).toMatch(/401/)
      // With an Authorization header that is wrong, the 401 is reported without the hint: the header is the fix.
      const wrong = yield* McpRegistry.make(
        { remote: { url: server.url, tools: ["echo"], headers: { Authorization: "Bearer nope" } } },
        quick
      )
      const refused = yield* stateOf(wrong, "remote")
      expect(refused!.lastError).toMatch(/401/)
      expect(refused!.lastError).not.toContain("add \"auth\"")
    }))

  it.scopedLive("starts without a URL nobody listens on", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start()
      yield* server.stop
      const mcp = yield* McpRegistry.make({ gone: { url: server.url } }, quick)
      const gone = yield* stateOf(mcp, "gone")
      expect(gone).toMatchObject({ state: "down", tools: 0 })
      expect(gone!.lastError).toMatch(/ECONNREFUSED|fetch failed/)
    }))
})

describe("McpRegistry headers from the environment", () => {
  it.scopedLive("sends a bearer token read from an environment variable", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ token: "s3cret" })
      const mcp = yield* McpRegistry.make({
        remote: { url: server.url, headers: { Authorization: { env: "REMOTE_MCP_TOKEN", prefix: "Bearer " } } }
      }, quick).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["REMOTE_MCP_TOKEN", "s3cret"]]))))
      expect(yield* stateOf(mcp, "remote")).toMatchObject({ state: "up" })
      expect(yield* mcp.call("echo", `{"message":"authorized"}`, ctx)).toEqual({
        content: "echo: authorized",
        isError: false
      })
    }))

  it.scopedLive("is down, naming the header and the variable (never a value), when the variable is unset", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start({ token: "s3cret" })
      const mcp = yield* McpRegistry.make({
        remote: { url: server.url, headers: { Authorization: { env: "REMOTE_MCP_TOKEN", prefix: "Bearer " } } }
      }, quick).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      expect(yield* stateOf(mcp, "remote")).toMatchObject({
        state: "down",
        lastError: `header "Authorization": environment variable REMOTE_MCP_TOKEN is not set`
      })
    }))
})

describe("McpRegistry over Streamable HTTP when the server stops mid-call", () => {
  it.scopedLive("fails the call at once with a transport error", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start()
      const mcp = yield* McpRegistry.make({ remote: { url: server.url, timeoutMs: 30_000 } }, quick)
      const arrived = yield* server.nextHang
      const running = yield* Effect.fork(mcp.call("hang", "{}", ctx))
      yield* arrived
      yield* server.stop
      const outcome = yield* Fiber.join(running).pipe(Effect.timeout("5 seconds"))
      expect(outcome).toMatchObject({ isError: true, failure: "tool_error" })
      expect(outcome.content).toMatch(/^the connection to MCP server "remote" was lost while running tool "hang"/)
    }))
})
