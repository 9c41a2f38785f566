/**
 * An MCP host for the tests of Corral as an MCP server: the SDK's own `Client` over Streamable HTTP (with a bearer
 * key) or over stdio (a spawned `corral mcp`), optionally declaring elicitation and answering it with a given
 * function, recording what the server asked. Every helper is bounded: a connection or call that does not answer
 * dies with what was awaited.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import type { ElicitRequest, ElicitResult } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import { bin } from "./ServerHarness.js"

/** A connected host: the client, the elicitation requests it received, and stderr of a stdio server. */
export interface Host {
  readonly client: Client
  readonly elicited: Array<ElicitRequest["params"]>
  readonly stderr: () => string
  readonly close: () => Promise<void>
}

/** Options of a host. */
export interface HostOptions {
  /** Declares elicitation and answers each request with this. */
  readonly elicit?: (params: ElicitRequest["params"]) => ElicitResult | Promise<ElicitResult>
}

const makeClient = (options: HostOptions) => {
  const elicited: Array<ElicitRequest["params"]> = []
  const client = new Client(
    { name: "corral-test-host", version: "1.0.0" },
    { capabilities: options.elicit === undefined ? {} : { elicitation: {} } }
  )
  if (options.elicit !== undefined) {
    const answer = options.elicit
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      elicited.push(request.params)
      return answer(request.params)
    })
  }
  return { client, elicited }
}

/** Connects to `url` (Streamable HTTP), sending `key` as bearer when given. Scoped: closed at the end. */
export const http = (url: string, key?: string, options: HostOptions = {}) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<Host> => {
      const { client, elicited } = makeClient(options)
      const transport = new StreamableHTTPClientTransport(new URL(url), {
        ...(key === undefined ? {} : { requestInit: { headers: { authorization: `Bearer ${key}` } } })
      })
      await client.connect(transport, { timeout: 15_000 })
      return { client, elicited, stderr: () => "", close: () => client.close() }
    }),
    (host) => Effect.promise(() => host.close().catch(() => undefined))
  )

/** Spawns `corral mcp ...args` with `env` and connects over its stdin/stdout. Scoped: the child is closed at the end. */
export const stdio = (args: ReadonlyArray<string>, env: Record<string, string>, options: HostOptions = {}) =>
  Effect.acquireRelease(
    Effect.promise(async (): Promise<Host> => {
      const { client, elicited } = makeClient(options)
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [bin, "mcp", ...args],
        env: { ...process.env, ...env } as Record<string, string>,
        stderr: "pipe"
      })
      let stderr = ""
      transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
      await client.connect(transport, { timeout: 60_000 })
      return { client, elicited, stderr: () => stderr, close: () => client.close() }
    }),
    (host) => Effect.promise(() => host.close().catch(() => undefined))
  )

/** A tool call's result with the fields the tests read. */
export interface RunResult {
  readonly isError?: boolean
  readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string; readonly uri?: string }>
  readonly structuredContent?: Record<string, unknown>
}

/** Calls `name` with `args`; `onProgress` receives each progress notification (a progress token is sent then). */
export const call = (
  host: Host,
  name: string,
  args: Record<string, unknown>,
  options: {
    readonly onProgress?: (progress: { progress: number; message?: string | undefined }) => void
    readonly signal?: AbortSignal
  } = {}
): Effect.Effect<RunResult> =>
  Effect.promise(() =>
    host.client.callTool({ name, arguments: args }, undefined, {
      timeout: 60_000,
      ...(options.onProgress === undefined ? {} : { onprogress: options.onProgress }),
      ...(options.signal === undefined ? {} : { signal: options.signal })
    }) as Promise<RunResult>
  )

/** The text of a resource content (dies when it is a blob or absent). */
export const textOf = (content: { readonly text?: unknown; readonly blob?: unknown } | undefined): string => {
  if (content === undefined || typeof content.text !== "string") throw new Error("expected a text resource content")
  return content.text
}

/** A raw `initialize` request body (for the tests that speak HTTP to `/mcp` without the SDK). */
export const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "raw", version: "1" } }
})

/** The headers a Streamable HTTP client sends with a JSON-RPC POST. */
export const mcpHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" }
