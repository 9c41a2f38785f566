/**
 * A Streamable HTTP MCP server stopped and started again (issue 42, item 4), for real: an in-process server on a fixed
 * port of 127.0.0.1, every socket destroyed at the stop. The registry's restart backoff is set to a minute, so only
 * what the issue asks for can bring the tools back in time: a listing (every burst lists before it offers) or a call
 * tries the server at once. While it is down, a session whose model calls the tool anyway (it knows it from an earlier
 * turn) is told the tool is temporarily unavailable and why, never that it is unknown.
 */
import { describe, expect, it } from "@effect/vitest"
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, isInitializeRequest, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Layer, Schedule } from "effect"
import { randomUUID } from "node:crypto"
import * as http from "node:http"
import { Corral } from "../../src/Corral.js"
import type { ModelReply, TurnEntry } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import { Usage } from "../../src/domain/Usage.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import { ToolExecutor } from "../../src/tools/ToolExecutor.js"
import { ctx } from "../support/McpServers.js"
import { freePort } from "../support/Ports.js"
import { eventually } from "../support/ServerHarness.js"

/**
 * A stateful Streamable HTTP MCP server with one tool, `echo { message }` → `echo: <message>`, on `port`. `stop`
 * closes the listener and destroys every socket (the open `GET /mcp` streams included); the scope stops it too.
 */
const echoServer = (port: number) =>
  Effect.acquireRelease(
    Effect.async<{ readonly stop: Effect.Effect<void> }, Error>((resume) => {
      const transports = new Map<string, StreamableHTTPServerTransport>()
      const make = () => {
        const server = new Server({ name: "echo", version: "1.0.0" }, { capabilities: { tools: {} } })
        server.setRequestHandler(ListToolsRequestSchema, () => ({
          tools: [{
            name: "echo",
            description: "Echoes its message.",
            inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
            annotations: { readOnlyHint: true }
          }]
        }))
        server.setRequestHandler(CallToolRequestSchema, (request) => ({
          content: [{ type: "text", text: `echo: ${String(request.params.arguments?.["message"])}` }]
        }))
        return server
      }
      const httpServer = http.createServer((req, res) => {
        let body = ""
        req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")))
        req.on("end", () => {
          const parsed: unknown = body.length > 0 ? JSON.parse(body) : undefined
          const id = req.headers["mcp-session-id"]
          const known = typeof id === "string" ? transports.get(id) : undefined
          if (known !== undefined) return void known.handleRequest(req, res, parsed)
          if (!isInitializeRequest(parsed)) {
            res.writeHead(404, { "content-type": "application/json" })
            return void res.end(
              JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" } })
            )
          }
          const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
            sessionIdGenerator: () => randomUUID(),
            onsessioninitialized: (sid) => void transports.set(sid, transport)
          })
          void make().connect(transport).then(() => transport.handleRequest(req, res, parsed))
        })
      })
      httpServer.once("error", (error) => resume(Effect.fail(error)))
      httpServer.listen(port, "127.0.0.1", () =>
        resume(Effect.succeed({
          stop: Effect.async<void>((done) => {
            httpServer.close(() => done(Effect.void))
            httpServer.closeAllConnections()
          })
        })))
    }),
    (server) => server.stop
  )

/** A minute between restart attempts: only a listing or a call can bring the server back within the test. */
const slowRestarts = { restartSchedule: Schedule.spaced("1 minute"), connectTimeoutMs: 5_000 }

/** What the tests allow from the server's return to its tools being offered (the kick gap, one connect, a re-list). */
const BACK_WITHIN_MS = 2_000

const stateOf = (mcp: McpRegistry.McpRegistry) =>
  Effect.map(mcp.servers ?? Effect.succeed([]), (servers) => servers.find((s) => s.name === "echo")?.state)

describe("McpRegistry when a Streamable HTTP server stops and comes back", () => {
  it.scopedLive("a listing brings its tools back at once, whatever the backoff; a call meanwhile says it is down", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const server = yield* echoServer(port)
      const mcp = yield* McpRegistry.make({ echo: { url: `http://127.0.0.1:${port}/mcp` } }, slowRestarts)
      expect(yield* mcp.call("echo", `{"message":"one"}`, ctx)).toEqual({ content: "echo: one", isError: false })

      yield* server.stop
      // Its notification stream breaks: the registry notices, and the tool is withdrawn.
      yield* eventually("the server to be noticed down", Effect.map(stateOf(mcp), (s) => s === "down" || undefined))
      const listed = (yield* mcp.list(ctx)).find((t) => t.name === "echo")
      expect(listed?.unavailable).toMatch(/^MCP server "echo" is down since /)
      const down = yield* mcp.call("echo", `{"message":"two"}`, ctx)
      expect(down).toMatchObject({ isError: true, failure: "tool_error" })
      expect(down.content).toMatch(
        /^tool "echo" was not run: it is temporarily unavailable because MCP server "echo" is down since \d{4}-\d\d-\d\dT[\d:.]+Z \(restarting it failed: .*ECONNREFUSED.*\)\. The tool exists and Corral is reconnecting/
      )
      expect(down.content).not.toMatch(/unknown tool/)

      yield* echoServer(port)
      const back = Date.now()
      // Polled with a bound: each listing may try the server (that is the point), never a fixed sleep.
      yield* eventually(
        "the tool to be offered again",
        Effect.map(
          mcp.list(ctx),
          (tools) => tools.some((t) => t.name === "echo" && t.unavailable === undefined) || undefined
        ),
        "30 seconds"
      )
      expect(Date.now() - back, "ms from the server's return to its tool offered again").toBeLessThan(BACK_WITHIN_MS)
      expect(yield* mcp.call("echo", `{"message":"three"}`, ctx)).toEqual({ content: "echo: three", isError: false })
    }))

  it.scopedLive("a session whose model calls the tool while its server is down hears it is unavailable; once it is back, the next call runs", () =>
    Effect.gen(function*() {
      const port = yield* freePort
      const server = yield* echoServer(port)
      const offered: Array<ReadonlyArray<string>> = []
      const usage = new Usage({ inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 })
      // Each prompt: call echo with the prompt's text, then answer with what the tool said.
      const model = Scripted.fromFunction({
        reply: (request: ModelRequest): ModelReply => {
          const last = request.messages.at(-1)!
          if (last.kind === "user") {
            offered.push(request.tools.map((t) => t.name))
            return {
              text: "",
              toolCalls: [{
                id: `c_${request.messages.length}`,
                name: "echo",
                arguments: JSON.stringify({ message: last.text })
              }],
              finishReason: "tool_calls",
              usage,
              model: "m"
            }
          }
          const said = last.kind === "tool_results" ? last.results[0]!.content : ""
          return { text: `the tool said: ${said}`, toolCalls: [], finishReason: "stop", usage, model: "m" }
        }
      })
      const runtime = Corral.layer().pipe(
        Layer.provideMerge(McpRegistry.layer({ echo: { url: `http://127.0.0.1:${port}/mcp` } }, slowRestarts)),
        Layer.provide(Layer.mergeAll(
          LiveEvents.layer,
          Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
        )),
        Layer.provide(MemoryStore.layerMemory)
      )
      const principal = new Principal({ orgId: "acme", userId: "alice" })
      const resultOf = (turns: ReadonlyArray<{ readonly entry: TurnEntry }>) => {
        const entry = turns.filter((t) => t.entry.kind === "tool_results").at(-1)!.entry
        return entry.kind === "tool_results" ? entry.results[0]! : undefined
      }
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(principal, {
          id: "echoer",
          version: 1,
          name: "Echoer",
          instructions: "Echo.",
          tools: ["echo"],
          finalize: "transcript"
        })
        const first = yield* c.run(principal, { agentId: "echoer", scope: "s", prompt: "one" })
        expect(first.exitReason).toBe("completed")
        expect(resultOf(yield* c.turns(principal, first.id))).toMatchObject({ content: "echo: one", status: "ok" })

        yield* server.stop
        const executor = yield* ToolExecutor
        yield* eventually(
          "the server to be noticed down",
          Effect.map(executor.servers!, (servers) => servers[0]?.state === "down" || undefined)
        )
        // The burst starts while the server is down: echo is not offered, but the model calls it (it knows it).
        const second = yield* c.continue(principal, first.id, "two")
        expect(second.exitReason).toBe("completed")
        const down = resultOf(yield* c.turns(principal, first.id))!
        expect(down.status).toBe("error")
        expect(down.content).toMatch(
          /^tool "echo" was not run: it is temporarily unavailable because MCP server "echo" is down since /
        )
        expect(down.content).not.toMatch(/unknown tool/)
        expect(offered.at(-1)).not.toContain("echo")

        yield* echoServer(port)
        const back = Date.now()
        // The next burst, started at once: its listing or its model's call tries the server, which is back, so the
        // call runs (the backoff alone would wait a minute).
        const third = yield* c.continue(principal, first.id, "three")
        expect(Date.now() - back, "ms from the server's return to the call answered").toBeLessThan(BACK_WITHIN_MS)
        expect(third.exitReason).toBe("completed")
        expect(resultOf(yield* c.turns(principal, first.id))).toMatchObject({ content: "echo: three", status: "ok" })
        // And the tool is offered again.
        yield* c.continue(principal, first.id, "four")
        expect(offered.at(-1)).toContain("echo")
        expect(resultOf(yield* c.turns(principal, first.id))).toMatchObject({ content: "echo: four", status: "ok" })
      }).pipe(Effect.provide(runtime))
    }))
})
