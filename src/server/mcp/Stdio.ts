/**
 * Stdio — Corral as an MCP server on this process's stdin and stdout (`corral mcp`), for hosts that spawn their
 * servers (Claude Desktop, IDEs): one connection, one principal, the same `Catalog` as `/mcp`.
 *
 * stdout carries the protocol and nothing else; whoever runs this must send logs to stderr (the CLI does). It
 * serves until the host closes stdin (or the process is interrupted), then closes the connection.
 */
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Option, Runtime } from "effect"
import type { Corral } from "../../Corral.js"
import type { Principal } from "../../domain/Principal.js"
import type { SessionStore } from "../../store/SessionStore.js"
import * as AgentFeed from "./AgentFeed.js"
import * as Catalog from "./Catalog.js"
import * as Protocol from "./Protocol.js"

/** Options of `serve`. */
export interface Options {
  readonly catalog?: Catalog.Options
  readonly protocol?: Protocol.Options
  readonly stdin?: NodeJS.ReadableStream & { on: (event: string, listener: () => void) => unknown }
  readonly stdout?: NodeJS.WritableStream
}

/** Serves `by` over stdio until stdin ends; resolves then. Interrupted, it closes the connection first. */
export const serve = (by: Principal, options: Options = {}): Effect.Effect<void, never, Corral | SessionStore> =>
  Effect.gen(function*() {
    const catalog = yield* Catalog.make(options.catalog)
    const runtime = yield* Effect.runtime<never>()
    const feed = Option.getOrUndefined(yield* Effect.serviceOption(AgentFeed.AgentFeed))
    const server = Protocol.make(catalog, by, runtime, { ...options.protocol, ...(feed === undefined ? {} : { feed }) })
    const stdin = options.stdin ?? process.stdin
    const transport = new StdioServerTransport(
      stdin as NodeJS.ReadStream,
      (options.stdout ?? process.stdout) as NodeJS.WriteStream
    )
    // A line that is not JSON, or not JSON-RPC, gets the JSON-RPC error it deserves (the SDK only reports it), and
    // the next line is read as usual.
    server.onerror = (error) => {
      const code = error instanceof SyntaxError ? -32700 : error.name === "ZodError" ? -32600 : undefined
      if (code === undefined) {
        Runtime.runFork(runtime)(Effect.logWarning(`MCP stdio: ${error.message}`))
        return
      }
      const message = code === -32700
        ? "Parse error: a line that is not JSON"
        : "Invalid Request: not a JSON-RPC message"
      Runtime.runFork(runtime)(Effect.logWarning(`MCP stdio: ${message}`))
      transport.send({ jsonrpc: "2.0", id: null, error: { code, message } } as unknown as JSONRPCMessage).catch(
        () => {}
      )
    }
    yield* Effect.acquireUseRelease(
      Effect.zipRight(
        Effect.promise(() => server.connect(transport)),
        Effect.logInfo(`MCP stdio: serving Corral on stdin/stdout as org ${by.orgId}, user ${by.userId}`)
      ),
      () =>
        Effect.async<void>((resume) => {
          const done = () => resume(Effect.void)
          const ending = server.onclose
          server.onclose = () => {
            ending?.()
            done()
          }
          stdin.on("end", done)
          stdin.on("close", done)
        }),
      () => Effect.promise(() => server.close().catch(() => undefined))
    )
    yield* Effect.logInfo(`MCP stdio: the host closed the connection (org ${by.orgId})`)
  })
