/**
 * An agent's own limits bite (issue 15, "limits from one place"): for every field of `Limits`, an agent spec that
 * tightens ONLY that field — the host's ceilings left at their defaults — sees it enforced wherever the agent's work
 * is bounded: the loop, the provider chain, the tool executors (in-process and MCP), the approval path of the actor,
 * and the store writes of recovery. A place that read the host's ceiling instead would let the default through, and
 * each test is built so that the default gives a visibly different outcome. The approval path and the store writes of
 * recovery are in AgentLimits.actor.test.ts.
 *
 * TestClock throughout, except the MCP cases: the fixture is a real child process answering in real time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import type { LimitsOverride } from "../../src/domain/Limits.js"
import type { Turn } from "../../src/domain/Message.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Limits from "../../src/rails/Limits.js"
import * as Truncate from "../../src/rails/Truncate.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import * as Harness from "../../src/testing/Harness.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import { ctx, fixture } from "../support/McpServers.js"
import * as Tools from "../support/tools.js"

/** A tool that takes `seconds` of (Test)Clock time, then answers. */
const sleepy = (name: string, seconds: number) =>
  ToolRegistry.define<{ q: string }>({
    name,
    description: `Takes ${seconds} s.`,
    parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
    run: (args) => Effect.as(Effect.sleep(`${seconds} seconds`), `${name}:${args.q}`)
  })

const slow = sleepy("slow", 30)
const tools = [...Tools.all, slow]

const spec = (limits: LimitsOverride) => Harness.agent({ tools: tools.map((t) => t.name), limits })

/** One burst of an agent with `limits` against `providers`, host limits at their defaults. */
const run = (providers: ReadonlyArray<ModelProvider>, limits: LimitsOverride) =>
  Harness.drive(
    Harness.runBurst({ spec: spec(limits) }).pipe(Effect.provide(Harness.layer({ providers, tools })))
  )

/** `n` echo calls with arguments never seen before (the repeat guard stays out of the way). */
let fresh = 0
const calls = (n: number) =>
  Scripted.toolCalls(Array.from({ length: n }, () => ({ name: "echo", arguments: { q: `q${fresh++}` } })))

const results = (turns: ReadonlyArray<Turn>) =>
  turns.flatMap((t) => t.entry.kind === "tool_results" ? t.entry.results : [])

describe("an agent's limits bite in the loop (host limits at defaults)", () => {
  it.effect("modelCallsPerBurst: the burst stops at the agent's per-burst ceiling", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: Array.from({ length: 10 }, () => calls(1)) })
      const landed = yield* run([model], { modelCallsPerBurst: 3 })
      expect(landed.reason).toBe<ExitReason>("burst_limit")
      expect(model.requests).toHaveLength(3)
    }))

  it.effect("modelCallsPerSession: the burst stops at the agent's per-session ceiling", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: Array.from({ length: 10 }, (_, i) => calls(1 + (i % 2))) })
      const landed = yield* run([model], { modelCallsPerSession: 4 })
      expect(landed.reason).toBe<ExitReason>("session_limit")
      expect(landed.state.modelCalls).toBe(4)
    }))

  it.effect("toolCalls: a call past the agent's budget is not executed and the burst ends", () =>
    Effect.gen(function*() {
      const landed = yield* run([Scripted.make({ script: [calls(2), calls(2)] })], { toolCalls: 3 })
      expect(landed.reason).toBe<ExitReason>("tool_budget")
      expect(results(landed.turns).map((r) => r.status)).toEqual(["ok", "ok", "ok", "not_executed"])
      expect(landed.state.toolCalls).toBe(3)
    }))

  it.effect("toolCallsPerTurn: calls past the agent's per-turn cap are not executed", () =>
    Effect.gen(function*() {
      const landed = yield* run([Scripted.make({ script: [calls(3), Scripted.text("done")] })], {
        toolCallsPerTurn: 2
      })
      expect(landed.reason).toBe<ExitReason>("completed")
      const [a, b, c] = results(landed.turns)
      expect([a?.status, b?.status, c?.status]).toEqual(["ok", "ok", "not_executed"])
      expect(c?.content).toContain("at most 2 tool calls are executed per turn")
    }))

  it.effect("tokens: the burst stops once the agent's token budget is spent", () =>
    Effect.gen(function*() {
      // 15 tokens per scripted reply: the second reply spends the budget.
      const landed = yield* run([Scripted.make({ script: [calls(1), calls(1), calls(1)] })], { tokens: 25 })
      expect(landed.reason).toBe<ExitReason>("token_budget")
      expect(landed.state.usage.total).toBe(30)
    }))

  it.effect("repeatWarnAt: the agent's threshold warns on the first identical result", () =>
    Effect.gen(function*() {
      const same = Scripted.toolCalls([{ name: "status", arguments: { q: "db" } }])
      const landed = yield* run([Scripted.make({ script: [same, Scripted.text("done")] })], { repeatWarnAt: 1 })
      expect(landed.reason).toBe<ExitReason>("completed")
      expect(results(landed.turns)[0]?.content).toContain("[repeat guard]")
    }))

  it.effect("repeatHaltAt: the burst halts at the agent's repeat threshold", () =>
    Effect.gen(function*() {
      const same = Scripted.toolCalls([{ name: "status", arguments: { q: "db" } }])
      const landed = yield* run([Scripted.make({ script: [same, same, same, same] })], { repeatHaltAt: 2 })
      expect(landed.reason).toBe<ExitReason>("repeat_call_halt")
      expect(results(landed.turns)).toHaveLength(2)
    }))

  it.effect("strikes: one bad tool call is bad_tool_use for an agent allowed one strike", () =>
    Effect.gen(function*() {
      const bad = Scripted.toolCalls([{ name: "nope", arguments: {} }])
      const landed = yield* run([Scripted.make({ script: [bad, Scripted.text("done")] })], { strikes: 1 })
      expect(landed.reason).toBe<ExitReason>("bad_tool_use")
    }))

  it.effect("emptyNudges: the agent's single nudge, then empty_exhausted", () =>
    Effect.gen(function*() {
      const landed = yield* run([Scripted.make({ script: [Scripted.empty(), Scripted.empty(), Scripted.text("x")] })], {
        emptyNudges: 1
      })
      expect(landed.reason).toBe<ExitReason>("empty_exhausted")
      expect(landed.turns.map((t) => t.entry.kind)).toEqual(["user", "notice"])
    }))

  it.effect("retryAfterCapMs: a Retry-After past the agent's cap fails over instead of waiting", () =>
    Effect.gen(function*() {
      const a = Scripted.make({
        name: "a",
        script: [Scripted.fault("rate_limit", { retryAfterMs: 5_000 }), Scripted.text("a, after waiting")]
      })
      const b = Scripted.make({ name: "b", script: [Scripted.text("b, at once")] })
      const landed = yield* run([a, b], { retryAfterCapMs: 1_000 })
      expect(landed.reason).toBe<ExitReason>("completed")
      expect(a.requests).toHaveLength(1)
      expect(landed.turns.at(-1)?.entry).toMatchObject({ kind: "assistant", text: "b, at once" })
    }))

  it.effect("activeTimeMs: a model call past the agent's active time ends the burst", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [calls(1), Scripted.delay(2 * 60_000, Scripted.text("late"))],
        timeoutMs: 15 * 60_000
      })
      const landed = yield* run([model], { activeTimeMs: 60_000 })
      expect(landed.reason).toBe<ExitReason>("deadline")
      expect(landed.state.activeMs).toBe(60_000)
    }))

  it.effect("toolResultMaxBytes: a tool result is cut to the agent's size", () =>
    Effect.gen(function*() {
      const logs = Scripted.toolCalls([{ name: "logs", arguments: { q: "api" } }])
      const landed = yield* run([Scripted.make({ script: [logs, Scripted.text("done")] })], {
        toolResultMaxBytes: 2_048
      })
      const content = results(landed.turns)[0]?.content ?? ""
      expect(content).toContain("api start")
      expect(Truncate.utf8Length(content)).toBeLessThanOrEqual(2_048)
      expect(Truncate.utf8Length(content)).toBeGreaterThan(1_024)
    }))

  it.effect("toolTimeoutMs: an in-process tool is stopped at the agent's timeout", () =>
    Effect.gen(function*() {
      const slowCall = Scripted.toolCalls([{ name: "slow", arguments: { q: "x" } }])
      const landed = yield* run([Scripted.make({ script: [slowCall, Scripted.text("done")] })], {
        toolTimeoutMs: 5_000
      })
      expect(results(landed.turns)[0]).toMatchObject({
        status: "error",
        content: "tool \"slow\" did not finish within 5000 ms; it was stopped. Try a narrower request."
      })
    }))
})

describe("the executors bound a call by the caller's timeout (ToolContext.timeoutMs)", () => {
  it.effect("the in-process registry stops a call at ctx.timeoutMs, and a tool's own tighter timeout still wins", () =>
    Effect.gen(function*() {
      const registry = ToolRegistry.make([slow, { ...sleepy("brisk", 30), timeoutMs: 2_000 }])
      const call = (name: string) => Harness.drive(registry.call(name, `{"q":"x"}`, { ...ctx, timeoutMs: 5_000 }))
      const startedAt = yield* TestClock.currentTimeMillis
      expect(yield* call("slow")).toMatchObject({ failure: "timeout", content: expect.stringContaining("5000 ms") })
      expect((yield* TestClock.currentTimeMillis) - startedAt).toBeLessThan(30_000)
      expect(yield* call("brisk")).toMatchObject({ failure: "timeout", content: expect.stringContaining("2000 ms") })
    }))

  it.live(
    "an MCP call is stopped at ctx.timeoutMs, and a server's own tighter timeout still wins",
    () =>
      Effect.gen(function*() {
        const mcp = yield* McpRegistry.make({
          lax: fixture(["--only", "hang"], { effects: { hang: "read" } }),
          tight: fixture(["--prefix", "t_", "--only", "hang"], { timeoutMs: 200, effects: { t_hang: "read" } })
        })
        // Bounded here so that, should the limit be ignored, the test fails instead of waiting out the 60 s default.
        const call = (name: string) =>
          mcp.call(name, "{}", { ...ctx, timeoutMs: 300 }).pipe(Effect.timeout("10 seconds"))
        expect(yield* call("hang")).toMatchObject({
          failure: "timeout",
          content: "tool \"hang\" did not finish within 300 ms; it was stopped. Try a narrower request."
        })
        expect((yield* call("t_hang")).content).toContain("did not finish within 200 ms")
      }).pipe(Effect.scoped),
    { timeout: 30_000 }
  )

  it.live(
    "toolTimeoutMs: an MCP tool is stopped at the agent's timeout, through the loop",
    () =>
      Effect.gen(function*() {
        const model = Scripted.make({
          script: [Scripted.toolCalls([{ name: "hang", arguments: {} }]), Scripted.text("done")]
        })
        const layer = Layer.mergeAll(
          LiveEvents.layer,
          McpRegistry.layer({ fx: fixture(["--only", "hang"], { effects: { hang: "read" } }) }),
          Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
        ).pipe(Layer.provideMerge(MemoryStore.layerMemory))
        const landed = yield* Harness.runBurst({
          spec: Harness.agent({ tools: ["hang"], limits: { toolTimeoutMs: 300 } })
        }).pipe(Effect.provide(layer), Effect.timeout("15 seconds"))
        expect(results(landed.turns)[0]?.content).toBe(
          "tool \"hang\" did not finish within 300 ms; it was stopped. Try a narrower request."
        )
      }),
    { timeout: 30_000 }
  )
})

describe("Limits.effective", () => {
  it("tightens the host's ceilings by the agent's, field by field; a value that would loosen one leaves it", () => {
    const host = { ...Limits.defaults, toolTimeoutMs: 10_000 }
    expect(Limits.effective(host, undefined)).toEqual(host)
    expect(Limits.effective(host, { toolTimeoutMs: 500 })).toEqual({ ...host, toolTimeoutMs: 500 })
    expect(Limits.effective(host, { toolTimeoutMs: 20_000, strikes: 1 })).toEqual({ ...host, strikes: 1 })
  })
})
