/**
 * The approval round in the trace (a write waiting for a person, then the person's decision) and `execute_tool`
 * spans for an MCP tool (a real stdio server) next to an in-process one.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import { ToolExecutor } from "../../src/tools/ToolExecutor.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as InMemoryTracing from "../support/InMemoryTracing.js"
import * as McpServers from "../support/McpServers.js"
import * as Tools from "../support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })

const agent = (tools: ReadonlyArray<string>) => ({
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: [...tools],
  finalize: "transcript" as const
})

describe("rail events and tool spans", () => {
  it.effect("an approval round shows the pending write and the person's decision as events", () => {
    const tracing = InMemoryTracing.make()
    const model = Scripted.make({
      script: [Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }]), Scripted.text("done")]
    })
    const runtime = Corral.layer().pipe(
      Layer.provide(Layer.mergeAll(
        LiveEvents.layer,
        ToolRegistry.layer(Tools.all),
        Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
      )),
      Layer.provide(MemoryStore.layerMemory)
    )
    return Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, agent(["echo", "restart"]))
      const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
      expect(v.exitReason).toBe("confirmation_pending")
      const done = yield* c.approve(alice, v.id, v.pending[0]?.token ?? "")
      expect(done.exitReason).toBe("completed")

      const bursts = tracing.exporter.getFinishedSpans().filter((s) => s.name === "invoke_agent Triage")
      expect(bursts).toHaveLength(2)
      const callId = v.pending[0]?.callId
      expect(bursts[0]!.events.map((e) => [e.name, e.attributes])).toEqual([
        ["corral.rail.confirmation", { "corral.rail.call_id": callId, "corral.rail.tool": "restart" }],
        ["corral.rail.exit", expect.objectContaining({ "corral.rail.reason": "confirmation_pending" })]
      ])
      expect(bursts[0]!.attributes["error.type"]).toBeUndefined()
      expect(bursts[1]!.events.map((e) => [e.name, e.attributes])).toEqual([
        ["corral.rail.approval", {
          "corral.rail.call_id": callId,
          "corral.rail.tool": "restart",
          "corral.rail.decision": "approve",
          "corral.rail.status": "ok"
        }],
        ["corral.rail.exit", expect.objectContaining({ "corral.rail.reason": "completed" })]
      ])

      // Refused decisions start no burst; each gets a short `approval` span telling why.
      const second = yield* Effect.flip(c.approve(alice, v.id, v.pending[0]?.token ?? ""))
      expect(second._tag).toBe("AlreadyDecided")
      const forged = yield* Effect.flip(c.approve(alice, v.id, "forged-token", "reject"))
      expect(forged._tag).toBe("InvalidSessionState")
      const refusals = tracing.exporter.getFinishedSpans().filter((s) => s.name === "approval")
      expect(refusals.map((s) => [s.attributes, s.status.code])).toEqual([
        [
          expect.objectContaining({
            "corral.session.id": v.id,
            "corral.approval.decision": "approve",
            "corral.approval.refused": "already_decided",
            "error.type": "approval_refused"
          }),
          2
        ],
        [expect.objectContaining({ "corral.approval.decision": "reject", "corral.approval.refused": "unknown" }), 2]
      ])
      const rail = (span: (typeof refusals)[number]) =>
        span.events.filter((e) => e.name.startsWith("corral.rail.")).map((e) => [e.name, e.attributes])
      expect(refusals.map(rail)).toEqual([
        [["corral.rail.approval_refused", {
          "corral.rail.reason": "already_decided",
          "corral.rail.decision": "approve",
          "corral.rail.call_id": callId,
          "corral.rail.notice": expect.stringContaining("already")
        }]],
        [["corral.rail.approval_refused", {
          "corral.rail.reason": "unknown",
          "corral.rail.decision": "reject",
          "corral.rail.notice": expect.stringContaining("forged")
        }]]
      ])
      expect(tracing.exporter.getFinishedSpans().filter((s) => s.name === "invoke_agent Triage")).toHaveLength(2)
    }).pipe(Effect.provide(runtime), Effect.provide(tracing.layer))
  })

  it.live("an MCP tool call and an in-process one each get an execute_tool span", () => {
    const tracing = InMemoryTracing.make()
    const model = Scripted.make({
      script: [
        Scripted.toolCalls([
          { name: "echo", arguments: { q: "local" } },
          { name: "mcp_echo", arguments: { message: "remote" } },
          { name: "mcp_fail", arguments: {} }
        ]),
        Scripted.text("done")
      ]
    })
    const tools = Layer.scoped(
      ToolExecutor,
      Effect.map(
        McpRegistry.make({
          fixture: McpServers.fixture(["--prefix", "mcp_", "--only", "echo,fail"], {
            effects: { mcp_echo: "read", mcp_fail: "read" }
          })
        }),
        (mcp) => ToolRegistry.layered(ToolRegistry.make(Tools.all), mcp)
      )
    )
    const runtime = Corral.layer().pipe(
      Layer.provide(Layer.mergeAll(
        LiveEvents.layer,
        tools,
        Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
      )),
      Layer.provide(MemoryStore.layerMemory)
    )
    return Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, agent(["echo", "mcp_echo", "mcp_fail"]))
      const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "look" })
      expect(v.exitReason).toBe("completed")
      const spans = tracing.exporter.getFinishedSpans().filter((s) => s.name.startsWith("execute_tool"))
      const byName = Object.fromEntries(spans.map((s) => [s.name, s.attributes]))
      expect(byName["execute_tool echo"]).toMatchObject({
        "gen_ai.tool.type": "function",
        "corral.tool.server": "core",
        "corral.tool.is_error": false,
        "corral.tool.result_bytes": "echo:local".length
      })
      expect(byName["execute_tool mcp_echo"]).toMatchObject({
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.type": "extension",
        "corral.tool.server": "fixture",
        "corral.tool.effect": "read",
        "corral.tool.is_error": false,
        "corral.tool.result_bytes": "echo: remote".length,
        "corral.tool.truncated": false,
        "mcp.method.name": "tools/call"
      })
      expect(byName["execute_tool mcp_echo"]!["corral.tool.duration_ms"]).toEqual(expect.any(Number))
      expect(byName["execute_tool mcp_fail"]).toMatchObject({
        "corral.tool.server": "fixture",
        "corral.tool.is_error": true,
        "error.type": "tool_error"
      })
      // The MCP client's own span is gone: one span per tool call.
      expect(tracing.exporter.getFinishedSpans().some((s) => s.name === "mcp.tool_call")).toBe(false)
    }).pipe(Effect.provide(runtime), Effect.provide(tracing.layer))
  }, 30_000)
})
