/**
 * The MCP client beyond tools, against real servers: a server configured twice under two prefixes, resources read
 * through the core `read_resource` tool (following a link a tool returned, scoped to the agent's allowlist), and a
 * server's prompt as an agent's instructions at burst start.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as path from "node:path"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import { makeMemory } from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import type * as McpConfig from "../../src/tools/McpConfig.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import { ctx, fixture, root } from "../support/McpServers.js"

const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")

/** server-everything over stdio; `get-env` (its whole environment) is never offered. */
const everything = (extra: Partial<McpConfig.StdioServer> = {}): McpConfig.StdioServer => ({
  command: process.execPath,
  args: [EVERYTHING, "stdio"],
  exclude: ["get-env"],
  ...extra
})

/** The registry over `servers`, connected for the rest of the test's scope. */
const executorOf = (servers: McpConfig.McpServers) => McpRegistry.make(servers)

/** The `read_resource` call a resource link in `text` asks for (the hint the model copies). */
const hints = (text: string): ReadonlyArray<{ server: string; uri: string }> =>
  [...text.matchAll(/read it with read_resource (\{[^}]*\})/g)].map((m) => JSON.parse(m[1]!))

describe("MCP prefixes", () => {
  it.scopedLive(
    "serves the same server twice under two prefixes, each call reaching its own server",
    () =>
      Effect.gen(function*() {
        const mcp = yield* executorOf({
          one: fixture(["--only", "echo,pid"], { prefix: "a" }),
          two: fixture(["--only", "echo,pid"], { prefix: "b-", effects: { echo: "read" } })
        })
        const tools = yield* mcp.list(ctx)
        expect(tools.map((t) => [t.name, t.source, t.effect])).toEqual([
          ["a_echo", "mcp:one", "write"],
          ["a_pid", "mcp:one", "read"],
          ["b-echo", "mcp:two", "read"],
          ["b-pid", "mcp:two", "read"]
        ])
        expect(yield* mcp.call("b-echo", JSON.stringify({ message: "hi" }), ctx)).toEqual({
          content: "echo: hi",
          isError: false
        })
        const [a, b] = yield* Effect.all([mcp.call("a_pid", "{}", ctx), mcp.call("b-pid", "{}", ctx)])
        expect(a.isError || b.isError).toBe(false)
        expect(a.content).not.toBe(b.content)
        // The server's own name is not advertised, so it is not callable either.
        expect((yield* mcp.call("echo", "{}", ctx)).failure).toBe("unknown_tool")
      }),
    60_000
  )
})

describe("MCP resources", () => {
  it.scopedLive("reads, through read_resource, the resources a tool linked to", () =>
    Effect.gen(function*() {
      const mcp = yield* executorOf({ ev: everything(), fx: fixture(["--only", "echo"], { prefix: "fx" }) })
      const listed = yield* mcp.list(ctx)
      const read = listed.find((t) => t.name === "read_resource")
      expect(read).toMatchObject({ source: "core", effect: "read" })
      // Only servers that offer resources are named (the fixture offers none).
      expect(read?.parameters).toMatchObject({ properties: { server: { enum: ["ev"] } } })

      const links = yield* mcp.call("get-resource-links", JSON.stringify({ count: 2 }), ctx)
      const [blob, text] = hints(links.content)
      expect(text).toEqual({ server: "ev", uri: expect.stringMatching(/^demo:\/\/resource\/dynamic\/text\/2$/) })
      const allowlist = ["get-resource-links", "read_resource"]
      const readText = yield* mcp.call("read_resource", JSON.stringify(text), { ...ctx, allowlist })
      expect(readText.isError).toBe(false)
      expect(readText.content).toMatch(/^\[resource: demo:\/\/resource\/dynamic\/text\/2, text\/plain\]\n\S/)
      // A binary resource is described; the server is implied when the agent may read only one.
      const readBlob = yield* mcp.call("read_resource", JSON.stringify({ uri: blob!.uri }), { ...ctx, allowlist })
      expect(readBlob.content).toMatch(/^\[resource: demo:\/\/resource\/dynamic\/blob\/1, \S+, \d+ bytes\]$/)
      const missing = yield* mcp.call("read_resource", JSON.stringify({ server: "ev", uri: "demo://nope" }), ctx)
      expect(missing).toMatchObject({ isError: true, failure: "tool_error" })
      expect(missing.content).toMatch(
        /^tool "read_resource" failed: MCP server "ev" answered: .*\(reading demo:\/\/nope\)$/
      )
    }), 60_000)

  it.scopedLive("reads only resources of servers whose tools the agent is allowed", () =>
    Effect.gen(function*() {
      const mcp = yield* executorOf({ ev: everything(), fx: fixture(["--only", "echo"], { prefix: "fx" }) })
      const uri = "demo://resource/dynamic/text/2"
      const refused = yield* mcp.call("read_resource", JSON.stringify({ server: "ev", uri }), {
        ...ctx,
        allowlist: ["fx_echo", "read_resource"]
      })
      expect(refused).toEqual({
        content: "tool \"read_resource\" failed: this agent may not read resources of MCP server \"ev\" (it may read " +
          "those of fx).",
        isError: true,
        failure: "tool_error"
      })
      const unnamed = yield* mcp.call("read_resource", JSON.stringify({ uri }), {
        ...ctx,
        allowlist: ["read_resource"]
      })
      expect(unnamed).toMatchObject({ isError: true, failure: "invalid_args" })
      expect(unnamed.content).toMatch(/may read resources of no MCP server/)
    }), 60_000)

  it.scopedLive("lists no read_resource when no server offers resources", () =>
    Effect.gen(function*() {
      const mcp = yield* executorOf({ fx: fixture(["--only", "echo"]) })
      expect((yield* mcp.list(ctx)).map((t) => t.name)).toEqual(["echo"])
    }), 60_000)
})

const alice = new Principal({ orgId: "org_a", userId: "alice" })

/** A Corral over the MCP servers with one scripted model; the body gets the service and the model. */
const withCorral = <A, E>(
  servers: McpConfig.McpServers,
  body: (c: Corral["Type"], model: Scripted.Scripted) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const model = Scripted.make({ script: [Scripted.text("done")] })
    const store = yield* makeMemory
    const runtime = Corral.layer().pipe(
      Layer.provide(Layer.mergeAll(
        LiveEvents.layer,
        McpRegistry.layer(servers),
        Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
      )),
      Layer.provide(Layer.succeed(SessionStore, store))
    )
    return yield* Effect.flatMap(Corral, (c) => body(c, model)).pipe(Effect.provide(runtime))
  })

describe("MCP prompts", () => {
  it.scopedLive(
    "adds a server's prompt, with its arguments, to the agent's instructions at burst start",
    () =>
      withCorral({ ev: everything() }, (c, model) =>
        Effect.gen(function*() {
          yield* c.publishAgent(alice, {
            id: "weather",
            version: 1,
            name: "Weather",
            instructions: "Answer briefly.",
            mcpPrompt: { name: "ev/args-prompt", arguments: { city: "Lyon" } },
            finalize: "transcript"
          })
          const run = yield* c.run(alice, { agentId: "weather", scope: "q:1", prompt: "go" })
          expect(run.exitReason).toBe("completed")
          expect(model.requests[0]?.system).toMatch(/^Answer briefly\.\n\nWhat's weather in Lyon\?\n\n/)
        })),
    60_000
  )

  it.scopedLive(
    "runs on the agent's own instructions and says why when the prompt is missing",
    () =>
      withCorral({ ev: everything() }, (c, model) =>
        Effect.gen(function*() {
          yield* c.publishAgent(alice, {
            id: "lost",
            version: 1,
            name: "Lost",
            instructions: "Answer briefly.",
            mcpPrompt: { name: "ev/no-such-prompt" },
            finalize: "transcript"
          })
          const run = yield* c.run(alice, { agentId: "lost", scope: "q:1", prompt: "go" })
          expect(run.exitReason).toBe("completed")
          expect(model.requests[0]?.system).toMatch(/^Answer briefly\.\n\nText inside <context>/)
          const [trajectory] = yield* c.trajectories(alice, run.id)
          expect(trajectory?.errors).toContainEqual({
            code: "mcp_prompt_unavailable",
            message: expect.stringMatching(
              /^prompt "ev\/no-such-prompt": MCP server "ev".*no prompt "no-such-prompt" \(its prompts: .*args-prompt/
            )
          })
        })),
    60_000
  )
})
