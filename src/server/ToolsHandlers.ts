/**
 * ToolsHandlers — the handler of `ToolsApi`: the executor's known tools for the caller's principal, and its tool
 * servers' states, read live (a server's state changes in the background).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import type { ToolDef, ToolServerStatus } from "../tools/ToolExecutor.js"
import { ToolExecutor } from "../tools/ToolExecutor.js"
import { Api } from "./Api.js"
import { CurrentPrincipal } from "./Authentication.js"
import type { ToolsView } from "./ToolsApi.js"

const toolInfo = (def: ToolDef): ToolsView["tools"][number] => ({
  name: def.name,
  source: def.source,
  ...(def.source.startsWith("mcp:") ? { server: def.source.slice(4) } : {}),
  effect: def.effect,
  description: def.description,
  available: def.unavailable === undefined,
  ...(def.unavailable === undefined ? {} : { reason: def.unavailable })
})

const serverInfo = (status: ToolServerStatus): ToolsView["servers"][number] => ({
  name: status.name,
  transport: status.transport,
  state: status.state,
  since: new Date(status.since).toISOString(),
  ...(status.lastError === undefined ? {} : { lastError: status.lastError }),
  failures: status.failures,
  tools: status.tools
})

/** The `tools` group's handlers. Needs the `ToolExecutor`. */
export const layer = HttpApiBuilder.group(Api, "tools", (handlers) =>
  Effect.gen(function*() {
    const executor = yield* ToolExecutor
    return handlers.handle("listTools", () =>
      Effect.gen(function*() {
        const principal = yield* CurrentPrincipal
        const tools = yield* executor.list({ sessionId: "", principal, scope: "", runId: "" })
        const servers = yield* (executor.servers ?? Effect.succeed([]))
        return { tools: tools.map(toolInfo), servers: servers.map(serverInfo) }
      }))
  }))
