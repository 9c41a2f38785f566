/**
 * `corral/mcp` — tools from MCP servers (stdio or Streamable HTTP) for an embedded Corral, the way `corral serve`
 * gets them: connected at start, a server that is down retried in the background (never fatal), a call validated
 * against the tool's schema and bounded by its deadline.
 *
 * Without this entry an embedder could only give Corral in-process tools. `layer(servers, { tools })` also stacks
 * the host's own in-process tools on top, and refuses a start where an MCP server exports one of their names: a
 * server that silently took over a host tool's name would take its calls (and its approvals) too.
 */
import { Effect, Layer } from "effect"
import * as McpConfig from "./tools/McpConfig.js"
import * as McpRegistry from "./tools/McpRegistry.js"
import { ToolExecutor } from "./tools/ToolExecutor.js"
import * as ToolRegistry from "./tools/ToolRegistry.js"

/** The `mcpServers` configuration: the server schemas (`McpServers`, `StdioServer`, `HttpServer`) and `decode`. */
export * as McpConfig from "./tools/McpConfig.js"
/** The registry itself: `make(servers, options)` (scoped), `layer(servers, options)`, `McpToolNameCollision`. */
export * as McpRegistry from "./tools/McpRegistry.js"
/**
 * The port through which an MCP server's questions (elicitation) reach the session's person: provide
 * `Elicitations.Elicitations` (or `Elicitations.layerAnswer(...)`) next to the layer; without it questions are declined.
 */
export * as Elicitations from "./tools/Elicitations.js"
/** A tool server's state as `ToolExecutor.servers` reports it. */
export type { ToolServerState, ToolServerStatus } from "./tools/ToolExecutor.js"

/** Options of `layer`: the registry's own, plus in-process tools that sit on top of the MCP servers' tools. */
export interface LayerOptions extends McpRegistry.MakeOptions {
  /** The host's own tools (`ToolRegistry.define`); none may share a name with an MCP tool known at start. */
  readonly tools?: ReadonlyArray<ToolRegistry.ToolHandler>
}

/**
 * The `ToolExecutor` over `servers` (as decoded by `McpConfig.decode`, or written as `McpConfig.McpServers`), with
 * `options.tools` on top. Fails to build with `McpToolNameCollision` when two servers export one name, and with
 * `ToolNameTaken` (`takenBy: "core"`) when an MCP tool known at start has the name of one of `options.tools`. A
 * server that cannot start does not fail it. The connections (and stdio children) live as long as the layer.
 */
export const layer = (
  servers: McpConfig.McpServers,
  options: LayerOptions = {}
): Layer.Layer<ToolExecutor, McpRegistry.McpStartError | ToolRegistry.ToolNameTaken> => {
  const { tools, ...registry } = options
  if (tools === undefined || tools.length === 0) return McpRegistry.layer(servers, registry)
  return Layer.scoped(
    ToolExecutor,
    Effect.gen(function*() {
      const own = ToolRegistry.make(tools)
      const mcp = yield* McpRegistry.make(servers, registry)
      const clash = mcp.tools.find((def) => own.has(def.name))
      if (clash !== undefined) return yield* new ToolRegistry.ToolNameTaken({ tool: clash.name, takenBy: "core" })
      return ToolRegistry.layered(own, mcp)
    })
  )
}

/**
 * `layer` from an unvalidated `mcpServers` value (a parsed JSON or YAML file): fails with `McpConfigInvalid`
 * listing every problem with its path before anything is started, else as `layer`.
 */
export const layerConfig = (
  input: unknown,
  options: LayerOptions = {}
): Layer.Layer<
  ToolExecutor,
  McpConfig.McpConfigInvalid | McpRegistry.McpStartError | ToolRegistry.ToolNameTaken
> => Layer.unwrapEffect(Effect.map(McpConfig.decode(input), (servers) => layer(servers, options)))
