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
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import { Deferred, Effect } from "effect"
import type { Scope } from "effect"
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
export const start = (options: { readonly token?: string } = {}): Effect.Effect<McpHttpFixture, never, Scope.Scope> =>
  Effect.gen(function*() {
    let hangWaiters: Array<() => void> = []
    const node = http.createServer((req, res) => {
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
      void server.connect(transport).then(() => transport.handleRequest(req, res))
    })
    yield* Effect.async<void>((resume) => {
      node.listen(0, "127.0.0.1", () => resume(Effect.void))
    })
    const port = (node.address() as AddressInfo).port
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
    return { url: `http://127.0.0.1:${port}/mcp`, nextHang, stop }
  })
