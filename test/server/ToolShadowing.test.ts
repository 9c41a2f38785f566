/**
 * A built-in tool cannot be shadowed by an MCP tool (issue 15), through the server's wiring with the real fixture
 * MCP server: a clash known at start refuses the start naming the server and the tool (whether the server lists the
 * tool or is down and only its config names it); a clash that appears later keeps the built-in — in the listing and
 * for every call — and logs a warning naming both.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Logger } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Failure from "../../src/cli/Failure.js"
import type { Settings } from "../../src/config/Config.js"
import * as Server from "../../src/server/Server.js"
import * as Wiring from "../../src/server/Wiring.js"
import { ToolExecutor } from "../../src/tools/ToolExecutor.js"
import { ctx, fixture, root } from "../support/McpServers.js"
import { eventually, settings } from "../support/ServerHarness.js"

/** A tools file for the fixture (`--tools-file`): it starts exporting `names` as well. */
const toolsFile = (names: ReadonlyArray<string>): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "corral-shadow-"))
  const file = path.join(dir, "tools.json")
  fs.writeFileSync(file, JSON.stringify({ add: names.map((name) => ({ name, readOnly: true })) }))
  return file
}

/** Builds the whole server for `mcpServers` (demo on: its tools are the built-ins) and returns why it failed. */
const refusedStart = (mcpServers: Settings["mcpServers"]) =>
  Effect.scoped(Layer.build(Server.layer(settings({ mcpServers })))).pipe(Effect.flip)

/** The server's tool executor for `mcpServers` (demo on), alive for the enclosing scope. */
const executorFor = (mcpServers: Settings["mcpServers"]) =>
  Effect.map(Layer.build(Wiring.tools(settings({ mcpServers }))), (built) => Context.get(built, ToolExecutor))

describe("a built-in tool cannot be shadowed by an MCP tool", () => {
  it.live(
    "an MCP server exporting a built-in's name refuses the start, naming the server and the tool",
    () =>
      Effect.gen(function*() {
        const error = yield* refusedStart({
          fx: fixture(["--only", "echo", "--tools-file", toolsFile(["demo_status"])])
        })
        expect(error).toMatchObject({ _tag: "McpToolShadowsBuiltIn", server: "fx", tool: "demo_status" })
        // What `corral serve` prints.
        expect(Failure.describe(error)).toBe(
          "McpToolShadowsBuiltIn: MCP server \"fx\" exports tool \"demo_status\", the name of a built-in tool; a " +
            "built-in tool cannot be shadowed: add \"demo_status\" to the server's \"exclude\" list, or rename it on " +
            "the server"
        )
      }),
    { timeout: 60_000 }
  )

  it.live("a server that is down is refused too when its config names a built-in's tool", () =>
    Effect.gen(function*() {
      const error = yield* refusedStart({
        ghost: { command: path.join(root, "no-such-mcp-server"), tools: ["ghost_search", "demo_logs"] }
      })
      expect(error).toMatchObject({ _tag: "McpToolShadowsBuiltIn", server: "ghost", tool: "demo_logs" })
    }), { timeout: 60_000 })

  it.live(
    "excluding the clashing tool lets the server start; the built-in keeps its name",
    () =>
      Effect.gen(function*() {
        const executor = yield* executorFor({
          fx: fixture(["--only", "echo", "--tools-file", toolsFile(["demo_status"])], { exclude: ["demo_status"] })
        })
        const listed = yield* executor.list(ctx)
        expect(listed.filter((t) => t.name === "demo_status").map((t) => t.source)).toEqual(["demo"])
        expect(listed.some((t) => t.name === "echo" && t.source === "mcp:fx")).toBe(true)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live(
    "a clash that appears later keeps the built-in for every listing and call, and warns naming both",
    () =>
      Effect.gen(function*() {
        const logs: Array<string> = []
        const capture = Logger.make(({ logLevel, message }) => {
          logs.push(`${logLevel.label} ${Array.isArray(message) ? message.join(" ") : String(message)}`)
        })
        yield* Effect.gen(function*() {
          const executor = yield* executorFor({ fx: fixture(["--only", "echo", "--mutable"]) })
          // The server starts exporting `demo_status` (and says so with notifications/tools/list_changed).
          const added = yield* executor.call("add_tool", JSON.stringify({ name: "demo_status", readOnly: true }), ctx)
          expect(added.content).toBe("added demo_status")
          yield* eventually(
            "the registry to take the new list",
            Effect.sync(() => logs.find((l) => l.includes("changed its tools: added [demo_status]")))
          )

          const listed = yield* executor.list(ctx)
          expect(listed.filter((t) => t.name === "demo_status").map((t) => t.source)).toEqual(["demo"])
          const called = yield* executor.call("demo_status", JSON.stringify({ service: "checkout" }), ctx)
          expect(called).toEqual({ content: "checkout: healthy=false error_rate=12.5% p99=2400ms", isError: false })
          expect(logs.filter((l) => l.startsWith("WARN") && l.includes("\"demo_status\""))).toEqual([
            "WARN MCP server \"fx\" now exports tool \"demo_status\", the name of a built-in tool: the built-in keeps " +
            "the name and the server's tool is not offered; add \"demo_status\" to the server's \"exclude\" list, or " +
            "rename it on the server"
          ])
          // Once per clash: listing again does not repeat it.
          yield* executor.list(ctx)
          expect(logs.filter((l) => l.startsWith("WARN") && l.includes("\"demo_status\""))).toHaveLength(1)
        }).pipe(Effect.scoped, Effect.provide(Logger.replace(Logger.defaultLogger, capture)))
      }),
    { timeout: 60_000 }
  )
})
