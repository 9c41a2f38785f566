import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import { ctx, fixture } from "../support/McpServers.js"

/** The fixture MCP server over stdio, able to change its tools (`--mutable`), with more flags and config extras. */
const mutable = (flags: ReadonlyArray<string>, extra?: Parameters<typeof fixture>[1]) =>
  fixture(["--mutable", ...flags], extra)

const call = (mcp: McpRegistry.McpRegistry, name: string, args: unknown) => mcp.call(name, JSON.stringify(args), ctx)

/** Asks the server to change its list, then waits until the registry has applied the change. */
const change = (mcp: McpRegistry.McpRegistry, tool: string, args: unknown) =>
  Effect.gen(function*() {
    const outcome = yield* call(mcp, tool, args)
    expect(outcome.isError).toBe(false)
    // The server notifies before it answers: the change is already noticed, so this waits for its re-list.
    yield* mcp.refreshed
  })

const names = (mcp: McpRegistry.McpRegistry) => mcp.list(ctx).pipe(Effect.map((tools) => tools.map((t) => t.name)))

/** Every log line at `level` or above, as `LEVEL message`, for the test to read. */
const captureLogs = () => {
  const lines: Array<string> = []
  const logger = Logger.make(({ logLevel, message }) => {
    lines.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

describe("McpRegistry when a server changes its tools", () => {
  it.scopedLive("advertises and serves a tool the server adds, and forgets one it removes", () =>
    Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({
        dyn: mutable(["--only", "echo,pid"], { exclude: ["secret"], effects: { audited: "read" } })
      })
      expect(yield* names(mcp)).toEqual(["add_tool", "echo", "fail_listing", "pid", "remove_tool"])

      yield* change(mcp, "add_tool", { name: "greet" })
      yield* change(mcp, "add_tool", { name: "peek", readOnly: true })
      yield* change(mcp, "add_tool", { name: "audited" })
      yield* change(mcp, "add_tool", { name: "secret" })
      const listed = yield* mcp.list(ctx)
      expect(listed.map((t) => t.name)).toEqual([
        "add_tool",
        "audited",
        "echo",
        "fail_listing",
        "greet",
        "peek",
        "pid",
        "remove_tool"
      ])
      expect(mcp.tools).toEqual(listed)
      const effect = (name: string) => listed.find((t) => t.name === name)?.effect
      expect(listed.find((t) => t.name === "greet")?.source).toBe("mcp:dyn")
      expect(effect("greet")).toBe("write") // no hint
      expect(effect("peek")).toBe("read") // readOnlyHint
      expect(effect("audited")).toBe("read") // the config override, though the tool came later
      expect(yield* call(mcp, "greet", {})).toEqual({ content: "greet: {}", isError: false })
      expect((yield* call(mcp, "secret", {})).failure).toBe("unknown_tool") // still excluded

      yield* change(mcp, "remove_tool", { name: "echo" })
      expect(yield* names(mcp)).not.toContain("echo")
      const removed = yield* call(mcp, "echo", { message: "hi" })
      expect(removed).toEqual({
        content: "unknown tool \"echo\". Available tools: add_tool, audited, fail_listing, greet, peek, pid, " +
          "remove_tool. Call one of them by its exact name.",
        isError: true,
        failure: "unknown_tool"
      })
    }))

  it.scopedLive("validates the arguments of a redefined tool with its new schema", () =>
    Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({ dyn: mutable(["--only", "pid"]) })
      const schema = (type: string) => ({
        type: "object",
        properties: { n: { type } },
        required: ["n"],
        additionalProperties: false
      })
      yield* change(mcp, "add_tool", { name: "count", inputSchema: schema("integer") })
      expect(yield* call(mcp, "count", { n: 2 })).toEqual({ content: "count: {\"n\":2}", isError: false })
      expect(yield* call(mcp, "count", { n: "two" })).toMatchObject({ isError: true, failure: "invalid_args" })

      yield* change(mcp, "add_tool", { name: "count", inputSchema: schema("string") })
      expect(mcp.tools.find((t) => t.name === "count")?.parameters).toEqual(schema("string"))
      expect(yield* call(mcp, "count", { n: "two" })).toEqual({ content: "count: {\"n\":\"two\"}", isError: false })
      const stale = yield* call(mcp, "count", { n: 2 })
      expect(stale).toMatchObject({ isError: true, failure: "invalid_args" })
      expect(stale.content).toContain("Expected arguments: { n: string }")
    }))

  it.scopedLive("refuses a newcomer named like another server's tool, keeps the owner serving it, and logs it", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({
        one: mutable(["--prefix", "a_", "--only", "echo"]),
        two: mutable(["--prefix", "b_", "--only", "echo"])
      })
      // `two` adds a tool named like `one`'s echo, and a fresh one in the same change.
      yield* change(mcp, "b_add_tool", { name: "a_echo" })
      yield* change(mcp, "b_add_tool", { name: "b_fresh" })
      const listed = yield* mcp.list(ctx)
      expect(listed.filter((t) => t.name === "a_echo")).toEqual([expect.objectContaining({ source: "mcp:one" })])
      expect(listed.find((t) => t.name === "b_fresh")?.source).toBe("mcp:two")
      expect(yield* call(mcp, "a_echo", { message: "hi" })).toEqual({ content: "echo: hi", isError: false })
      const refused = logs.lines.filter((l) => l.startsWith("ERROR"))
      // Logged once, though `two` was listed again after the collision appeared.
      expect(refused).toEqual([
        "ERROR tool \"a_echo\" is exported by both MCP servers \"one\" and \"two\"; give one of them a `prefix`, or exclude the tool from one of them; " +
        "\"one\" keeps serving it and \"two\"'s is not advertised"
      ])

      // Once its owner drops the name, the server that was refused gets it (with its own, empty, schema).
      yield* change(mcp, "a_remove_tool", { name: "a_echo" })
      expect((yield* mcp.list(ctx)).find((t) => t.name === "a_echo")?.source).toBe("mcp:two")
      expect(yield* call(mcp, "a_echo", {})).toEqual({ content: "a_echo: {}", isError: false })
    }).pipe(Effect.provide(logs.layer))
  })

  it.scopedLive("keeps the last list when listing again fails, and catches up on the next notification", () => {
    const logs = captureLogs()
    return Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({ dyn: mutable(["--only", "echo"]) })
      yield* change(mcp, "fail_listing", { fail: true })
      expect(logs.lines.filter((l) => l.startsWith("WARN"))).toEqual([
        "WARN MCP server \"dyn\": listing its tools again failed (MCP error -32603: tools/list fails on purpose); " +
        "keeping the 4 tools it listed last until its next change or restart"
      ])
      yield* change(mcp, "remove_tool", { name: "echo" })
      expect(yield* call(mcp, "echo", { message: "still listed" })).toMatchObject({ isError: true })
      expect(yield* names(mcp)).toContain("echo")

      yield* change(mcp, "fail_listing", { fail: false })
      expect(yield* names(mcp)).toEqual(["add_tool", "fail_listing", "remove_tool"])
    }).pipe(Effect.provide(logs.layer))
  })

  it.scopedLive("applies a burst of changes completely", () =>
    Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({ dyn: mutable(["--only", "pid"]) })
      const added = Array.from({ length: 12 }, (_, i) => `t${String(i).padStart(2, "0")}`)
      yield* Effect.forEach(added, (name) => call(mcp, "add_tool", { name }), { concurrency: "unbounded" })
      yield* mcp.refreshed
      expect(yield* names(mcp)).toEqual([...added, "add_tool", "fail_listing", "pid", "remove_tool"].sort())
      for (const name of added) {
        expect(yield* call(mcp, name, {})).toEqual({ content: `${name}: {}`, isError: false })
      }
    }))

  it.scopedLive("lists a restarted server's tools again", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-mcp-tools-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const toolsFile = path.join(dir, "tools.json")
      const mcp = yield* McpRegistry.make({ dyn: mutable(["--only", "crash,echo,pid", "--tools-file", toolsFile]) })
      expect(yield* names(mcp)).toContain("echo")
      const pid = (yield* call(mcp, "pid", {})).content

      // What the server will list once restarted (it reads the file at start; no notification is sent).
      fs.writeFileSync(toolsFile, JSON.stringify({ add: [{ name: "reborn" }], remove: ["echo"] }))
      expect((yield* call(mcp, "crash", {})).content).toContain("exited while running tool \"crash\"")
      // Waits for the restart: it is noticed as a change before the call resumes.
      expect((yield* call(mcp, "pid", {})).content).not.toBe(pid)
      yield* mcp.refreshed

      expect(yield* names(mcp)).toEqual(["add_tool", "crash", "fail_listing", "pid", "reborn", "remove_tool"])
      expect(yield* call(mcp, "reborn", {})).toEqual({ content: "reborn: {}", isError: false })
      expect((yield* call(mcp, "echo", { message: "gone" })).failure).toBe("unknown_tool")
    }))
})
