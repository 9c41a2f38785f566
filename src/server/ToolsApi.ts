/**
 * ToolsApi — `GET /v1/tools`: what an operator asks when an agent misses a tool. Every tool Corral knows (name, the
 * server it comes from, its declared effect, its description, and whether it can be called now) and every tool
 * server with its state (starting, up, down), since when, and its last error.
 *
 * A server that is down is reported here and in `/readyz`, never as a failure: its tools are withdrawn, the rest of
 * Corral serves on (see `tools/McpRegistry`). The contract lives here and the handler in `ToolsHandlers`, so that
 * `Api.ts` only adds the group.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "./Authentication.js"

/** One known tool. */
export const ToolInfo = Schema.Struct({
  name: Schema.String,
  /** `core`, `job`, `session`, or `mcp:<server>`. */
  source: Schema.String,
  /** The MCP server it comes from (absent for in-process tools). */
  server: Schema.optional(Schema.String),
  effect: Schema.Literal("read", "write"),
  description: Schema.String,
  /** Whether a burst offers it now; `false` while its server is not up. */
  available: Schema.Boolean,
  /** Why it is unavailable. */
  reason: Schema.optional(Schema.String)
}).annotations({ identifier: "ToolInfo" })

/** One configured tool server. */
export const ToolServerInfo = Schema.Struct({
  name: Schema.String,
  transport: Schema.Literal("stdio", "http"),
  state: Schema.Literal("starting", "up", "down"),
  /** When it entered `state` (ISO 8601). */
  since: Schema.String,
  /** Why it was last lost or could not be (re)started (kept after it came back). */
  lastError: Schema.optional(Schema.String),
  /** Failed (re)start attempts since it was last up. */
  failures: Schema.Int,
  /** How many known tools are its. */
  tools: Schema.Int
}).annotations({ identifier: "ToolServerInfo" })

/** The answer of `GET /v1/tools`. */
export const ToolsView = Schema.Struct({
  tools: Schema.Array(ToolInfo),
  servers: Schema.Array(ToolServerInfo)
}).annotations({ identifier: "ToolsView" })
export type ToolsView = typeof ToolsView.Type

/** Tools and tool servers. */
export class ToolsGroup extends HttpApiGroup.make("tools")
  .add(
    HttpApiEndpoint.get("listTools", "/v1/tools")
      .addSuccess(ToolsView)
      .annotate(
        OpenApi.Summary,
        "Every known tool (name, server, effect, description, available now?) and every tool server's state"
      )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Description, "The tools an agent may name, and the state of the tool servers that provide them")
{}
