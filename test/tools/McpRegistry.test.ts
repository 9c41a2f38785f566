import { describe, expect, it, layer } from "@effect/vitest"
import type { Vitest } from "@effect/vitest"
import { Clock, Deferred, Effect, Fiber, Layer } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type * as McpConfig from "../../src/tools/McpConfig.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import { ToolExecutor } from "../../src/tools/ToolExecutor.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import { ctx, fixture, root } from "../support/McpServers.js"
import { freePort } from "../support/Ports.js"

const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const FILESYSTEM = path.join(root, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")

/** server-everything's `get-env` returns its whole environment: never offered, never called. */
const everythingStdio: McpConfig.StdioServer = {
  command: process.execPath,
  args: [EVERYTHING, "stdio"],
  exclude: ["get-env"]
}

const call = (name: string, args: unknown) =>
  Effect.flatMap(ToolExecutor, (mcp) => mcp.call(name, typeof args === "string" ? args : JSON.stringify(args), ctx))

const pidOf = (tool: string) => Effect.map(call(tool, {}), (o) => o.content)

/** server-everything in Streamable HTTP mode on `port` (it reads PORT), killed when the scope closes. */
const everythingHttp = (port: number) =>
  Effect.acquireRelease(
    Effect.async<ChildProcess, Error>((resume) => {
      const child = spawn(process.execPath, [EVERYTHING, "streamableHttp"], {
        env: { ...process.env, PORT: String(port) },
        stdio: ["ignore", "pipe", "pipe"]
      })
      child.stdout?.resume()
      child.stderr?.on("data", (chunk: Buffer) => {
        if (chunk.toString().includes("listening on port")) resume(Effect.succeed(child))
      })
      child.once("exit", (code) => resume(Effect.fail(new Error(`server-everything exited with ${code}`))))
    }),
    kill
  )

const kill = (child: ChildProcess) =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })

/** Resolves when the HTTP server logs its next POST: registered now, awaited later (no sleeping). */
const nextPost = (child: ChildProcess) =>
  Effect.gen(function*() {
    const seen = yield* Deferred.make<void>()
    const onData = (chunk: Buffer) => {
      if (chunk.toString().includes("Received MCP POST request")) Deferred.unsafeDone(seen, Effect.void)
    }
    child.stdout?.on("data", onData)
    return Deferred.await(seen).pipe(Effect.ensuring(Effect.sync(() => child.stdout?.off("data", onData))))
  })

/** The same behaviour over either transport. */
const everythingSuite = (it: Vitest.MethodsNonLive<ToolExecutor, true>) => {
  it.effect("lists its tools sorted by name, read from readOnlyHint, without get-env", () =>
    Effect.gen(function*() {
      const tools = yield* Effect.flatMap(ToolExecutor, (mcp) => mcp.list(ctx))
      const names = tools.map((t) => t.name)
      expect(names).toEqual([...names].sort())
      expect(names).toContain("echo")
      expect(names).not.toContain("get-env")
      expect(tools.find((t) => t.name === "get-sum")).toMatchObject({ effect: "read", source: "mcp:everything" })
      expect(tools.find((t) => t.name === "toggle-simulated-logging")?.effect).toBe("write")
      expect((yield* call("get-env", {})).failure).toBe("unknown_tool")
    }))

  it.effect("echoes", () =>
    Effect.gen(function*() {
      expect(yield* call("echo", { message: "hello" })).toEqual({ content: "Echo: hello", isError: false })
    }))

  it.effect("refuses get-sum with bad arguments before sending them", () =>
    Effect.gen(function*() {
      const outcome = yield* call("get-sum", { a: "one" })
      expect(outcome).toMatchObject({ isError: true, failure: "invalid_args" })
      expect(outcome.content).toContain("Expected arguments: { a: number, b: number }")
      expect(yield* call("get-sum", { a: 1, b: 2 })).toEqual({ content: "The sum of 1 and 2 is 3.", isError: false })
    }))

  it.effect("finishes a long-running operation that reports progress", () =>
    Effect.gen(function*() {
      const outcome = yield* call("trigger-long-running-operation", { duration: 0.3, steps: 3 })
      expect(outcome).toEqual({
        content: "Long running operation completed. Duration: 0.3 seconds, Steps: 3.",
        isError: false
      })
    }))

  it.effect("describes the tiny image instead of passing its bytes", () =>
    Effect.gen(function*() {
      const outcome = yield* call("get-tiny-image", {})
      expect(outcome.isError).toBe(false)
      expect(outcome.content).toMatch(/^Here's the image you requested:\n\[image: image\/png, \d+ bytes\]\nThe image/)
      expect(outcome.content.length).toBeLessThan(200)
    }))

  it.effect("renders structured content as JSON", () =>
    Effect.gen(function*() {
      const outcome = yield* call("get-structured-content", { location: "Chicago" })
      expect(JSON.parse(outcome.content)).toEqual({ temperature: 36, conditions: "Light rain / drizzle", humidity: 82 })
    }))

  it.effect("describes resource links and embedded resources", () =>
    Effect.gen(function*() {
      const links = yield* call("get-resource-links", { count: 2 })
      expect(links.content).toMatch(
        /\[resource link: .+ (demo:\/\/resource\/\S+) \(text\/plain\); read it with read_resource \{"server":"everything","uri":"\1"\}\]/
      )
      const reference = yield* call("get-resource-reference", { resourceType: "Blob", resourceId: 1 })
      expect(reference.content).toMatch(/\[resource: demo:\/\/resource\/\S+, \S+, \d+ bytes\]/)
    }))
}

layer(McpRegistry.layer({ everything: everythingStdio }), { excludeTestServices: true, timeout: "30 seconds" })(
  "McpRegistry over server-everything (stdio)",
  everythingSuite
)

const httpRegistry = Layer.unwrapScoped(
  Effect.gen(function*() {
    const port = yield* freePort
    yield* everythingHttp(port)
    return McpRegistry.layer({ everything: { url: `http://127.0.0.1:${port}/mcp`, exclude: ["get-env"] } })
  })
)

layer(httpRegistry, { excludeTestServices: true, timeout: "30 seconds" })(
  "McpRegistry over server-everything (Streamable HTTP)",
  everythingSuite
)

describe("McpRegistry over Streamable HTTP when the server goes away", () => {
  it.scopedLive("retries on a fresh client when a restarted server no longer knows the session", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const first = yield* everythingHttp(port)
      const mcp = yield* McpRegistry.make({ everything: { url: `http://127.0.0.1:${port}/mcp`, exclude: ["get-env"] } })
      expect((yield* mcp.call("echo", `{"message":"one"}`, ctx)).content).toBe("Echo: one")
      yield* kill(first)
      yield* everythingHttp(port)
      expect(yield* mcp.call("echo", `{"message":"two"}`, ctx)).toEqual({ content: "Echo: two", isError: false })
    }))

  it.scopedLive("fails a call at once when its server is killed mid-call, reports it unavailable, then reconnects", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const server = yield* everythingHttp(port)
      const mcp = yield* McpRegistry.make({
        everything: { url: `http://127.0.0.1:${port}/mcp`, exclude: ["get-env"], timeoutMs: 20_000 }
      })
      const posted = yield* nextPost(server)
      const running = yield* Effect.fork(mcp.call("trigger-long-running-operation", `{"duration":10,"steps":10}`, ctx))
      yield* posted
      const killedAt = yield* Clock.currentTimeMillis
      yield* kill(server)
      // The response stream breaks under the call: it fails now with a transport error, not at its 20 s timeout
      // with advice to narrow the request — and never says the tool did not run.
      const killed = yield* Fiber.join(running)
      expect((yield* Clock.currentTimeMillis) - killedAt).toBeLessThan(5_000)
      expect(killed).toMatchObject({ isError: true, failure: "tool_error" })
      expect(killed.content).toMatch(/^the connection to MCP server "everything" was lost while running tool/)
      expect(killed.content).not.toContain("narrower")

      const down = yield* mcp.call("echo", `{"message":"down"}`, ctx)
      expect(down).toMatchObject({ isError: true, failure: "tool_error" })
      expect(down.content).toMatch(
        /^tool "echo" was not run: it is temporarily unavailable because MCP server "everything" is down .*ECONNREFUSED/
      )

      yield* everythingHttp(port)
      expect(yield* mcp.call("echo", `{"message":"back"}`, ctx)).toEqual({ content: "Echo: back", isError: false })
    }))
})

describe("McpRegistry over server-filesystem", () => {
  it.scopedLive("reads inside its root and answers Access denied outside it", () =>
    Effect.gen(function*() {
      const base = fs.realpathSync(os.tmpdir())
      const inside = fs.mkdtempSync(path.join(base, "corral-mcp-root-"))
      const outside = fs.mkdtempSync(path.join(base, "corral-mcp-outside-"))
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          fs.rmSync(inside, { recursive: true, force: true })
          fs.rmSync(outside, { recursive: true, force: true })
        })
      )
      fs.writeFileSync(path.join(inside, "notes.txt"), "disk 93% full on db-1\n")
      fs.writeFileSync(path.join(outside, "secret.txt"), "nope\n")
      const mcp = yield* McpRegistry.make({ files: { command: process.execPath, args: [FILESYSTEM, inside] } })

      expect(mcp.tools.find((t) => t.name === "read_text_file")?.effect).toBe("read")
      expect(mcp.tools.find((t) => t.name === "write_file")?.effect).toBe("write")
      const read = yield* mcp.call("read_text_file", JSON.stringify({ path: path.join(inside, "notes.txt") }), ctx)
      expect(read).toEqual({ content: "disk 93% full on db-1\n", isError: false })
      const denied = yield* mcp.call("read_text_file", JSON.stringify({ path: path.join(outside, "secret.txt") }), ctx)
      expect(denied).toMatchObject({ isError: true, failure: "tool_error" })
      expect(denied.content).toContain("Access denied")
      expect(denied.content).not.toContain("nope")
    }))
})

/**
 * Four fixture servers: `fx` (all tools, 500 ms timeout), `crashy` (`c_` tools), `big` and `junk` (`j_` tools).
 * `big` exports `big_output` unprefixed, like `fx`: the collision is resolved by `fx` excluding it.
 */
const fixtures = McpRegistry.layer({
  fx: fixture([], { timeoutMs: 500, effects: { read_notes: "write", fail: "read" }, exclude: ["big_output"] }),
  crashy: fixture(["--prefix", "c_", "--only", "crash,echo,hang,stats,pid"]),
  big: fixture(["--only", "big_output"], { timeoutMs: 20_000 }),
  junk: fixture(["--prefix", "j_", "--only", "echo,pid", "--junk"])
})

layer(fixtures, { excludeTestServices: true, timeout: "30 seconds" })("McpRegistry with the fixture server", (it) => {
  it.effect("merges every page of every server into one list sorted by name", () =>
    Effect.gen(function*() {
      const tools = yield* Effect.flatMap(ToolExecutor, (mcp) => mcp.list(ctx))
      const names = tools.map((t) => t.name)
      expect(names).toEqual([...names].sort())
      // 11 tools in pages of 3: the last ones are only reached by following nextCursor.
      expect(tools.filter((t) => t.source === "mcp:fx").map((t) => t.name)).toEqual([
        "crash",
        "delete_file",
        "echo",
        "fail",
        "hang",
        "pid",
        "progress_then_hang",
        "read_notes",
        "stats",
        "structured_only"
      ])
      // Exported by `fx` too, which excludes it: no collision.
      expect(tools.find((t) => t.name === "big_output")?.source).toBe("mcp:big")
      expect(tools.find((t) => t.name === "c_crash")?.source).toBe("mcp:crashy")
      expect(tools.find((t) => t.name === "j_echo")?.source).toBe("mcp:junk")
    }))

  it.effect("reads effects from readOnlyHint, and a config override wins", () =>
    Effect.gen(function*() {
      const tools = yield* Effect.flatMap(ToolExecutor, (mcp) => mcp.list(ctx))
      const effect = (name: string) => tools.find((t) => t.name === name)?.effect
      expect(effect("stats")).toBe("read") // readOnlyHint: true
      expect(effect("delete_file")).toBe("write") // no hint
      expect(effect("read_notes")).toBe("write") // readOnlyHint: true, overridden
      expect(effect("fail")).toBe("read") // no hint, overridden
    }))

  it.effect("speaks like the in-process registry about bad JSON and bad arguments", () =>
    Effect.gen(function*() {
      const builtIn = ToolRegistry.make([
        ToolRegistry.define({
          name: "echo",
          description: "Echoes its message.",
          parameters: {
            type: "object",
            properties: { message: { type: "string" } },
            required: ["message"],
            additionalProperties: false
          },
          run: () => Effect.succeed("unused")
        })
      ])
      for (const args of [`{"message": "unterminated`, `[1,2]`, `{"message": 7, "extra": true}`]) {
        const fromMcp = yield* call("echo", args)
        expect(fromMcp.isError).toBe(true)
        expect(fromMcp).toEqual(yield* builtIn.call("echo", args, ctx))
      }
    }))

  it.effect("validates arguments against a JSON Schema 2020-12 schema too", () =>
    Effect.gen(function*() {
      expect(yield* call("delete_file", { path: 7 })).toMatchObject({ isError: true, failure: "invalid_args" })
      expect(yield* call("delete_file", { path: "/tmp/x" })).toEqual({ content: "deleted /tmp/x", isError: false })
    }))

  it.effect("passes an isError result on as a tool error", () =>
    Effect.gen(function*() {
      expect(yield* call("fail", {})).toEqual({
        content: "the fixture failed on purpose",
        isError: true,
        failure: "tool_error"
      })
    }))

  it.effect("renders structured content as JSON when there is no text", () =>
    Effect.gen(function*() {
      expect(yield* call("structured_only", {})).toEqual({ content: `{"ok":true,"items":[1,2]}`, isError: false })
    }))

  it.effect("stops a hanging tool at its timeout and tells the server to cancel", () =>
    Effect.gen(function*() {
      const before = JSON.parse((yield* call("stats", {})).content)
      expect(yield* call("hang", {})).toEqual({
        content: "tool \"hang\" did not finish within 500 ms; it was stopped. Try a narrower request.",
        isError: true,
        failure: "timeout"
      })
      const after = yield* waitForStats("stats", (s) => s.hangCancelled > before.hangCancelled)
      expect(after.hangStarted).toBe(before.hangStarted + 1)
    }))

  it.effect("says how far a tool got when it reported progress before its timeout", () =>
    Effect.gen(function*() {
      expect(yield* call("progress_then_hang", {})).toEqual({
        content: "tool \"progress_then_hang\" did not finish within 500 ms; it was stopped. Try a narrower request. " +
          "Last progress reported: 2 of 3.",
        isError: true,
        failure: "timeout"
      })
    }))

  it.effect("aborts the MCP request promptly when the call is interrupted", () =>
    Effect.gen(function*() {
      const before = JSON.parse((yield* call("c_stats", {})).content)
      const running = yield* Effect.fork(call("c_hang", {}))
      yield* waitForStats("c_stats", (s) => s.hangStarted > before.hangStarted)
      const start = yield* Clock.currentTimeMillis
      yield* Fiber.interrupt(running)
      expect((yield* Clock.currentTimeMillis) - start).toBeLessThan(500)
      const after = yield* waitForStats("c_stats", (s) => s.hangCancelled > before.hangCancelled)
      expect(after.hangCancelled).toBe(before.hangCancelled + 1)
    }))

  it.effect("reports a crash mid-call, restarts the server, and serves later calls", () =>
    Effect.gen(function*() {
      const pid = yield* pidOf("c_pid")
      expect(yield* call("c_crash", {})).toEqual({
        content:
          "MCP server \"crashy\" exited while running tool \"c_crash\"; it is being restarted; retry the call if it is safe.",
        isError: true,
        failure: "tool_error"
      })
      expect(yield* call("c_echo", { message: "still here" })).toEqual({ content: "echo: still here", isError: false })
      expect(yield* pidOf("c_pid")).not.toBe(pid)
    }))

  it.effect("returns a large output whole, and reports one over 10 MiB as too large", () =>
    Effect.gen(function*() {
      const mib = yield* call("big_output", { bytes: 1024 * 1024 })
      expect(mib.isError).toBe(false)
      expect(mib.content.length).toBe(1024 * 1024)
      const huge = yield* call("big_output", { bytes: 11 * 1024 * 1024 })
      expect(huge).toMatchObject({ isError: true, failure: "tool_error" })
      expect(huge.content).toContain("larger than the 10 MiB an MCP stdio message may carry")
      // Restarted: the next call is served again.
      const again = yield* call("big_output", { bytes: 5 })
      expect(again).toEqual({ content: "xxxxx", isError: false })
    }), { timeout: 30_000 })

  it.effect("skips a junk line on stdout without losing the connection", () =>
    Effect.gen(function*() {
      const pid = yield* pidOf("j_pid")
      expect(yield* call("j_echo", { message: "a" })).toEqual({ content: "echo: a", isError: false })
      expect(yield* call("j_echo", { message: "b" })).toEqual({ content: "echo: b", isError: false })
      expect(yield* pidOf("j_pid")).toBe(pid)
    }))

  it.effect("lets session tools shadow a shared MCP tool of the same name", () =>
    Effect.gen(function*() {
      const shared = yield* ToolExecutor
      const session = ToolRegistry.make([
        ToolRegistry.define({
          name: "echo",
          description: "The session's own echo.",
          parameters: { type: "object", properties: {} },
          run: () => Effect.succeed("session echo")
        })
      ], { source: "session" })
      const tools = ToolRegistry.layered(session, shared)
      const listed = yield* tools.list(ctx)
      expect(listed.filter((t) => t.name === "echo")).toEqual([expect.objectContaining({ source: "session" })])
      expect(listed.map((t) => t.name)).toEqual(listed.map((t) => t.name).sort())
      expect(yield* tools.call("echo", "{}", ctx)).toEqual({ content: "session echo", isError: false })
      expect(yield* tools.call("j_echo", `{"message":"shared"}`, ctx)).toEqual({
        content: "echo: shared",
        isError: false
      })
    }))
})

interface Stats {
  readonly hangStarted: number
  readonly hangCancelled: number
}

/** Asks the fixture for its counters until `done` holds (each ask is a real round trip; bounded). */
const waitForStats = (tool: string, done: (s: Stats) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 500; i++) {
      const stats: Stats = JSON.parse((yield* call(tool, {})).content)
      if (done(stats)) return stats
    }
    return yield* Effect.dieMessage(`${tool} never reached the expected state`)
  })

describe("McpRegistry start", () => {
  it.scopedLive("refuses a tool name exported by two servers, naming both", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(McpRegistry.make({
        beta: fixture(["--only", "echo"]),
        alpha: fixture(["--only", "echo,pid"])
      }))
      expect(error).toBeInstanceOf(McpRegistry.McpToolNameCollision)
      expect(error.message).toBe(
        "tool \"echo\" is exported by both MCP servers \"alpha\" and \"beta\"; give one of them a `prefix`, or exclude the tool from one of them"
      )
    }))

  it.scopedLive("starts without a server whose command is missing, reporting it down with the reason", () =>
    Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({ ghost: { command: path.join(root, "no-such-mcp-server") } })
      const [ghost] = yield* mcp.servers!
      expect(ghost).toMatchObject({ name: "ghost", transport: "stdio", state: "down", tools: 0 })
      expect(ghost?.lastError).toMatch(/ENOENT/)
    }))
})
