/**
 * A server's questions and requests while its tool runs, against server-everything over stdio: an elicitation
 * answered by the session's person (defaults filled in), declined when no one can be asked, cancelled when the person
 * does not answer before the call's deadline (TestClock); sampling refused with a JSON-RPC error that says why; the
 * configured roots listed to the server.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, TestClock } from "effect"
import * as path from "node:path"
import * as Elicitations from "../../src/tools/Elicitations.js"
import type * as McpConfig from "../../src/tools/McpConfig.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import { ToolNotices } from "../../src/tools/ToolNotices.js"
import type { ToolNotice } from "../../src/tools/ToolNotices.js"
import { ctx, root } from "../support/McpServers.js"

const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")

const SAMPLER = path.join(root, "test/support/mcp-sampler.ts")

const everything = (extra: Partial<McpConfig.StdioServer> = {}): McpConfig.StdioServer => ({
  command: process.execPath,
  args: [EVERYTHING, "stdio"],
  exclude: ["get-env"],
  ...extra
})

/** A sink keeping every notice, as the session's stream would get them. */
const recordNotices = () => {
  const seen: Array<ToolNotice> = []
  return { seen, layer: Layer.succeed(ToolNotices, { notify: (n) => Effect.sync(() => void seen.push(n)) }) }
}

describe("MCP elicitation", () => {
  it.scopedLive(
    "routes a server's question to the session's person and sends the answer, defaults filled in",
    () =>
      Effect.gen(function*() {
        const asked: Array<Elicitations.ElicitationRequest> = []
        const notices = recordNotices()
        const person = Layer.succeed(Elicitations.Elicitations, {
          ask: (request) => Effect.sync(() => (asked.push(request), { action: "accept", content: { name: "Ada" } }))
        })
        const mcp = yield* McpRegistry.make({ ev: everything() }).pipe(
          Effect.provide(Layer.merge(person, notices.layer))
        )
        const outcome = yield* mcp.call("trigger-elicitation-request", "{}", { ...ctx, timeoutMs: 20_000 })
        expect(outcome.isError).toBe(false)
        expect(outcome.content).toContain("User provided the requested information")
        expect(outcome.content).toContain("Ada")
        // Left out by the person, taken from the schema's default.
        expect(outcome.content).toContain("It was a dark and stormy night.")
        expect(asked).toEqual([expect.objectContaining({
          server: "ev",
          sessionId: ctx.sessionId,
          callId: ctx.callId,
          tool: "trigger-elicitation-request",
          message: "Please provide inputs for the following fields:"
        })])
        expect(notices.seen.map((n) => n._tag === "log" ? `${n.level} ${n.message}` : "progress")).toEqual([
          "notice MCP server \"ev\" asks: Please provide inputs for the following fields:",
          "info answered MCP server \"ev\": accept"
        ])
      }),
    60_000
  )

  it.scopedLive("declines, and says so on the stream, when no one can be asked", () =>
    Effect.gen(function*() {
      const notices = recordNotices()
      const mcp = yield* McpRegistry.make({ ev: everything() }).pipe(Effect.provide(notices.layer))
      const outcome = yield* mcp.call("trigger-elicitation-request", "{}", { ...ctx, timeoutMs: 20_000 })
      expect(outcome.content).toContain("User declined to provide the requested information")
      expect(notices.seen).toContainEqual(expect.objectContaining({
        _tag: "log",
        level: "warning",
        message: expect.stringContaining("declined (no one can be asked here)")
      }))
    }), 60_000)

  it.scoped(
    "cancels the question when the person does not answer before the call's deadline",
    () =>
      Effect.gen(function*() {
        const reached = yield* Deferred.make<void>()
        const person = Layer.succeed(Elicitations.Elicitations, {
          ask: () => Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never)
        })
        const notices = recordNotices()
        const mcp = yield* McpRegistry.make({ ev: everything() }).pipe(
          Effect.provide(Layer.merge(person, notices.layer))
        )
        const call = yield* Effect.fork(mcp.call("trigger-elicitation-request", "{}", { ...ctx, timeoutMs: 20_000 }))
        yield* Deferred.await(reached)
        // 20 s window: the question may wait until 2 s (the margin) before the call's deadline, and no longer.
        yield* TestClock.adjust("17999 millis")
        expect(notices.seen.some((n) => n._tag === "log" && n.level === "warning")).toBe(false)
        yield* TestClock.adjust("1 millis")
        const outcome = yield* Fiber.join(call)
        expect(outcome.isError).toBe(false)
        expect(outcome.content).toContain("User cancelled")
        expect(notices.seen).toContainEqual(expect.objectContaining({
          _tag: "log",
          level: "warning",
          message: "no answer to MCP server \"ev\" within 18000 ms: the question was cancelled"
        }))
      }),
    60_000
  )
})

describe("MCP sampling and roots", () => {
  it.scopedLive(
    "refuses a server's sampling request with an error that says how to allow it",
    () =>
      Effect.gen(function*() {
        const mcp = yield* McpRegistry.make({
          sampler: { command: process.execPath, args: ["--import", "tsx", SAMPLER] }
        })
        const outcome = yield* mcp.call("sample", "{}", ctx)
        expect(outcome.content).toBe(
          "refused: MCP error -32601: Corral does not let MCP server \"sampler\" sample its model: sampling is off for " +
            "this server (set \"sampling\": true on mcpServers.sampler to allow it)"
        )
      }),
    60_000
  )

  it.scopedLive("lists the configured roots to the server", () =>
    Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({
        ev: everything({ roots: [{ uri: "file:///srv/project", name: "project" }] })
      })
      const outcome = yield* mcp.call("get-roots-list", "{}", ctx)
      expect(outcome.content).toContain("file:///srv/project")
    }), 60_000)
})
