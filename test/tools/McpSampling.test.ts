/**
 * The MCP client's side of sampling, against a real stdio server (test/support/mcp-sampler.ts) asking from inside
 * its tool: the request reaches the call's sampler as text (system prompt, caps), content Corral does not sample is
 * refused before any model is asked, a call with no sampler (outside a burst) gets its own refusal, and a sample that
 * takes too long is refused before the calling tool's deadline (TestClock). The session's side (gate, counters,
 * trajectory, replay) is in test/session/McpSampling.test.ts.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option, TestClock } from "effect"
import * as path from "node:path"
import type * as McpConfig from "../../src/tools/McpConfig.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import type { Sampler, SampleRequest } from "../../src/tools/ToolExecutor.js"
import { ctx, root } from "../support/McpServers.js"

const SAMPLER = path.join(root, "test/support/mcp-sampler.ts")

const sampler: McpConfig.StdioServer = {
  command: process.execPath,
  args: ["--import", "tsx", SAMPLER],
  cwd: root,
  sampling: true
}

/** A sampler answering `text`, keeping what it was asked. */
const answering = (text: string) => {
  const asked: Array<SampleRequest> = []
  const sample: Sampler = (request) =>
    Effect.sync(() => (asked.push(request), { text, model: "m-1", stopReason: "endTurn" }))
  return { asked, sample }
}

describe("MCP sampling (client side)", () => {
  it.scopedLive(
    "hands the server's request to the call's sampler as text and sends the answer back",
    () =>
      Effect.gen(function*() {
        const mcp = yield* McpRegistry.make({ sampler })
        const model = answering("hello")
        const outcome = yield* mcp.call(
          "sample",
          JSON.stringify({ prompt: "Greet.", system: "Be brief.", stop: ["\n"] }),
          { ...ctx, sample: model.sample }
        )
        expect(outcome.content).toBe("sampled: hello [m-1, endTurn]")
        expect(model.asked).toEqual([{
          server: "sampler",
          system: "Be brief.",
          messages: [{ role: "user", text: "Greet." }],
          maxTokens: 20,
          stopSequences: ["\n"]
        }])
      }),
    60_000
  )

  it.scopedLive("refuses content other than text without asking the model", () =>
    Effect.gen(function*() {
      const mcp = yield* McpRegistry.make({ sampler })
      const model = answering("never")
      const outcome = yield* mcp.call("sample", JSON.stringify({ image: true }), { ...ctx, sample: model.sample })
      expect(outcome.content).toBe(
        "refused: MCP error -32602: MCP server \"sampler\" sent image content in message 2 of its sample request: " +
          "Corral samples text only (send the content as text)"
      )
      expect(model.asked).toEqual([])
    }), 60_000)

  it.scopedLive(
    "refuses a sample for a call that runs outside a session's burst (no sampler)",
    () =>
      Effect.gen(function*() {
        const mcp = yield* McpRegistry.make({ sampler })
        const outcome = yield* mcp.call("sample", "{}", ctx)
        expect(outcome.content).toBe(
          "refused: MCP error -32600: MCP server \"sampler\" asked for a sample, but no model serves samples for this " +
            "call (it does not run in a session's burst)"
        )
      }),
    60_000
  )

  it.scoped(
    "refuses a sample still unanswered a margin before the calling tool's deadline",
    () =>
      Effect.gen(function*() {
        const mcp = yield* McpRegistry.make({ sampler })
        const reached = yield* Deferred.make<void>()
        const sample: Sampler = () => Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never)
        const call = yield* Effect.fork(mcp.call("sample", "{}", { ...ctx, timeoutMs: 20_000, sample }))
        yield* Deferred.await(reached)
        // 20 s window: the model may write until 2 s (the margin) before the call's deadline, and no longer.
        yield* TestClock.adjust("17999 millis")
        expect(Option.isNone(yield* Fiber.poll(call))).toBe(true)
        yield* TestClock.adjust("1 millis")
        const outcome = yield* Fiber.join(call)
        expect(outcome.content).toBe(
          "refused: MCP error -32001: the session's model did not answer MCP server \"sampler\" within 18000 ms (the " +
            "calling tool \"sample\"'s deadline, less a margin for the server to answer)"
        )
      }),
    60_000
  )
})
