/**
 * A server started with one MCP server that cannot start (a missing command) and one that works: `serve` comes up
 * anyway, `GET /v1/tools` tells both servers' states and every tool, `/readyz` reports the down server and stays
 * ready, an agent naming the down server's tool is published, and its run leaves the tool out and says why.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as path from "node:path"
import * as Server from "../../src/server/Server.js"
import { fixture, root } from "../support/McpServers.js"
import { client, settings } from "../support/ServerHarness.js"

const mcpServers = {
  ghost: { command: path.join(root, "no-such-mcp-server"), tools: ["ghost_search"] },
  fx: fixture(["--only", "echo,read_notes"])
}

layer(Server.layer(settings({ mcpServers })), { excludeTestServices: true, timeout: "60 seconds" })(
  "HTTP API with an MCP server down",
  (it) => {
    it.effect("lists every tool and every tool server's state", () =>
      Effect.gen(function*() {
        const api = yield* client()
        const { servers, tools } = yield* api.tools.listTools()
        expect(servers.map((s) => [s.name, s.transport, s.state, s.tools])).toEqual([
          ["fx", "stdio", "up", 2],
          ["ghost", "stdio", "down", 1]
        ])
        const ghost = servers.find((s) => s.name === "ghost")!
        expect(ghost.lastError).toMatch(/ENOENT/)
        expect(Date.parse(ghost.since)).not.toBeNaN()
        expect(ghost.failures).toBeGreaterThanOrEqual(1)
        expect(tools.map((t) => [t.name, t.server, t.effect, t.available])).toEqual([
          ["demo_logs", undefined, "read", true],
          ["demo_restart", undefined, "write", true],
          ["demo_status", undefined, "read", true],
          ["echo", "fx", "write", true],
          ["ghost_search", "ghost", "write", false],
          ["read_notes", "fx", "read", true]
        ])
        expect(tools.find((t) => t.name === "echo")?.description).toBe("Echoes its message.")
        expect(tools.find((t) => t.name === "ghost_search")?.reason).toMatch(
          /^MCP server "ghost" is down since .*ENOENT/
        )
      }))

    it.effect("stays ready while reporting the down server in /readyz", () =>
      Effect.gen(function*() {
        const api = yield* client()
        const ready = yield* api.system.readyz()
        expect(ready.status).toBe("ready")
        expect(ready.checks["store"]).toBe("memory")
        expect(ready.checks["mcp:fx"]).toBe("up")
        expect(ready.checks["mcp:ghost"]).toMatch(/^down since \d{4}-.*ENOENT/)
      }))

    it.effect("publishes an agent naming the down server's tool, runs it without the tool and says why", () =>
      Effect.gen(function*() {
        const api = yield* client()
        const spec = {
          id: "with-ghost",
          version: 1,
          name: "With ghost",
          instructions: "Find the cause.",
          tier: "demo",
          tools: ["demo_status", "demo_logs", "ghost_search"]
        }
        yield* api.agents.publishAgent({ payload: spec })
        // A tool no config or server knows is still refused.
        const unknown = yield* Effect.flip(api.agents.publishAgent({ payload: { ...spec, tools: ["ghost_delete"] } }))
        expect(unknown._tag).toBe("InvalidRequest")

        const view = yield* api.sessions.startSession({
          payload: { agentId: "with-ghost", scope: "incident:G-1", prompt: "Why is checkout failing?" },
          urlParams: { wait: true }
        })
        if (!("exitReason" in view)) throw new Error("expected the landed view")
        const { trajectories } = yield* api.sessions.trajectory({ path: { id: view.id } })
        expect(trajectories[0]?.errors).toContainEqual({
          code: "tool_unavailable",
          message: expect.stringMatching(
            /^tool "ghost_search" was not offered: MCP server "ghost" is down since .*ENOENT/
          )
        })
        expect(trajectories[0]?.toolCalls.some((c) => c.name === "ghost_search")).toBe(false)
      }))
  }
)
