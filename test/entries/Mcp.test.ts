/**
 * `corral/mcp` from an embedder's side: an MCP server's tools next to the host's own, and a start refused when a
 * server exports one of the host's tool names (it would take over that tool's calls).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { ToolExecutor, ToolRegistry } from "../../src/index.js"
import { layer } from "../../src/mcp.js"
import { ctx, fixture } from "../support/McpServers.js"

const own = (name: string) =>
  ToolRegistry.define<{ q: string }>({
    name,
    description: "The host's own tool.",
    parameters: { type: "object", properties: { q: { type: "string" } } },
    run: () => Effect.succeed("from the host")
  })

describe("corral/mcp", () => {
  it.scopedLive(
    "lists the host's tools and the server's together, each called where it lives",
    () =>
      Effect.gen(function*() {
        const executor = yield* Effect.provide(
          ToolExecutor,
          layer({ fx: fixture(["--only", "echo"]) }, { tools: [own("mine")] })
        )
        const names = (yield* executor.list(ctx)).map((t) => t.name)
        expect(names).toEqual(["echo", "mine"])
        expect((yield* executor.call("mine", "{}", ctx)).content).toBe("from the host")
      }),
    60_000
  )

  it.scopedLive("refuses to start when a server exports the name of a host tool", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Layer.build(layer({ fx: fixture(["--only", "echo"]) }, { tools: [own("echo")] }))
      )
      expect(error).toMatchObject({ _tag: "ToolNameTaken", tool: "echo", takenBy: "core" })
    }), 60_000)
})
