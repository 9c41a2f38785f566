import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, TestClock } from "effect"
import { Principal } from "../../src/domain/Principal.js"
import { defaults, Limits } from "../../src/rails/Limits.js"
import type { ToolContext } from "../../src/tools/ToolExecutor.js"
import { ToolExecutor } from "../../src/tools/ToolExecutor.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

const ctx: ToolContext = {
  sessionId: "ses_1",
  principal: new Principal({ orgId: "org_a", userId: "u1" }),
  scope: "incident:1",
  runId: "run_1",
  callId: "call_1"
}

const search = ToolRegistry.define<{ q: string; limit?: number }>({
  name: "search",
  description: "Full-text search.",
  parameters: {
    type: "object",
    additionalProperties: false,
    required: ["q"],
    properties: { q: { type: "string" }, limit: { type: "integer", minimum: 1 } }
  },
  run: ({ limit, q }) => Effect.succeed(`results for ${q} (${limit ?? 10})`)
})

const noArgs = { type: "object", properties: {} }
const tool = (name: string, run: () => Effect.Effect<ToolRegistry.ToolReturn, unknown>, timeoutMs?: number) =>
  ToolRegistry.define({
    name,
    description: `the ${name} tool`,
    parameters: noArgs,
    ...(timeoutMs === undefined ? {} : { timeoutMs }),
    run
  })

const registry = ToolRegistry.make([
  tool("zeta", () => Effect.succeed("z")),
  search,
  tool("alpha", () => Effect.succeed({ content: "not found", isError: true }))
])

const withToolTimeout = (toolTimeoutMs: number) => Effect.provideService(Limits, { ...defaults, toolTimeoutMs })

describe("ToolRegistry", () => {
  it.effect("lists tools sorted by name, without their run functions", () =>
    Effect.gen(function*() {
      const tools = yield* registry.list(ctx)
      expect(tools.map((t) => t.name)).toEqual(["alpha", "search", "zeta"])
      expect(tools[1]).toEqual({
        name: "search",
        description: "Full-text search.",
        parameters: search.parameters,
        effect: "read",
        source: "core"
      })
    }))

  it.effect("runs a tool with schema-valid arguments", () =>
    Effect.gen(function*() {
      expect(yield* registry.call("search", `{"q":"disk full","limit":3}`, ctx)).toEqual({
        content: "results for disk full (3)",
        isError: false
      })
      expect(yield* registry.call("alpha", "{}", ctx)).toEqual({
        content: "not found",
        isError: true,
        failure: "tool_error"
      })
    }))

  it.effect("names every available tool for an unknown tool", () =>
    Effect.gen(function*() {
      expect(yield* registry.call("serach", "{}", ctx)).toEqual({
        content: "unknown tool \"serach\". Available tools: alpha, search, zeta. Call one of them by its exact name.",
        isError: true,
        failure: "unknown_tool"
      })
    }))

  it.effect("quotes the parser for malformed JSON and never repairs it", () =>
    Effect.gen(function*() {
      const outcome = yield* registry.call("search", `{"q": "disk",}`, ctx)
      expect(outcome.isError).toBe(true)
      expect(outcome.failure).toBe("invalid_json")
      expect(outcome.content).toMatch(/^arguments for tool "search" were not valid JSON: .+\. Re-emit the call/)
      expect(outcome.content).toMatch(
        /Re-emit the call with corrected arguments: a single JSON object matching the tool's schema\.$/
      )
    }))

  it.effect("rejects JSON that is not an object as invalid arguments", () =>
    Effect.gen(function*() {
      for (const [json, kind] of [["[1]", "an array"], [`"q"`, "a string"], ["null", "null"]] as const) {
        const outcome = yield* registry.call("search", json, ctx)
        expect(outcome.failure).toBe("invalid_args")
        expect(outcome.content).toBe(
          `arguments for tool "search" must be a JSON object, got ${kind}.\n` +
            "Expected arguments: { q: string, limit?: integer }. Re-emit the call with corrected arguments."
        )
      }
    }))

  it.effect("lists every schema error with its path and the expected shape", () =>
    Effect.gen(function*() {
      const outcome = yield* registry.call("search", `{"q": 42, "limit": 0, "extra": true}`, ctx)
      expect(outcome).toEqual({
        isError: true,
        failure: "invalid_args",
        content: [
          "arguments for tool \"search\" do not match its schema:",
          "- (root): must NOT have additional properties: \"extra\"",
          "- /q: must be string",
          "- /limit: must be >= 1",
          "Expected arguments: { q: string, limit?: integer }. Re-emit the call with corrected arguments."
        ].join("\n")
      })
      const missing = yield* registry.call("search", "{}", ctx)
      expect(missing.content).toContain("- (root): must have required property 'q'")
    }))

  it.effect("turns a tool's failure into a tool_error with its message", () =>
    Effect.gen(function*() {
      const r = ToolRegistry.make([tool("boom", () => Effect.fail(new Error("disk on fire")))])
      expect(yield* r.call("boom", "{}", ctx)).toEqual({
        content: "tool \"boom\" failed: disk on fire",
        isError: true,
        failure: "tool_error"
      })
    }))

  it.effect("turns defects (throw, Effect.die) into tool_error results", () =>
    Effect.gen(function*() {
      const r = ToolRegistry.make([
        tool("throws", () => {
          throw new Error("thrown outside the effect")
        }),
        tool("dies", () => Effect.die(new Error("died inside"))),
        tool("dies_later", () => Effect.sync(() => JSON.parse("{")))
      ])
      expect(yield* r.call("throws", "{}", ctx)).toEqual({
        content: "tool \"throws\" failed: thrown outside the effect",
        isError: true,
        failure: "tool_error"
      })
      expect((yield* r.call("dies", "{}", ctx)).content).toBe("tool \"dies\" failed: died inside")
      expect((yield* r.call("dies_later", "{}", ctx)).failure).toBe("tool_error")
    }))

  it.effect("waits for a tool that suspends, and reports its later failure", () =>
    Effect.gen(function*() {
      const r = ToolRegistry.make([
        tool("later", () => Effect.as(Effect.sleep(500), "done")),
        tool("fails_later", () => Effect.zipRight(Effect.sleep(500), Effect.fail(new Error("upstream 503"))))
      ])
      const ok = yield* Effect.fork(r.call("later", "{}", ctx))
      const bad = yield* Effect.fork(r.call("fails_later", "{}", ctx))
      yield* TestClock.adjust(500)
      expect(yield* Fiber.join(ok)).toEqual({ content: "done", isError: false })
      expect((yield* Fiber.join(bad)).content).toBe("tool \"fails_later\" failed: upstream 503")
    }))

  it.effect("runs the tool with the caller's services", () =>
    Effect.gen(function*() {
      const r = ToolRegistry.make([
        tool("limit", () => Effect.map(Limits, (l) => String(l.toolTimeoutMs))),
        tool(
          "limit_later",
          () => Effect.zipRight(Effect.yieldNow(), Effect.map(Limits, (l) => String(l.toolTimeoutMs)))
        )
      ])
      expect((yield* r.call("limit", "{}", ctx).pipe(withToolTimeout(1_234))).content).toBe("1234")
      expect((yield* r.call("limit_later", "{}", ctx).pipe(withToolTimeout(4_321))).content).toBe("4321")
    }))

  it.effect("stops a tool at Limits.toolTimeoutMs", () =>
    Effect.gen(function*() {
      const stopped = yield* Deferred.make<void>()
      const r = ToolRegistry.make([
        tool("slow", () => Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(stopped, void 0))))
      ])
      const fiber = yield* r.call("slow", "{}", ctx).pipe(withToolTimeout(1_000), Effect.fork)
      yield* TestClock.adjust(999)
      expect(fiber.unsafePoll()).toBeNull()
      yield* TestClock.adjust(1)
      expect(yield* Fiber.join(fiber)).toEqual({
        content: "tool \"slow\" did not finish within 1000 ms; it was stopped. Try a narrower request.",
        isError: true,
        failure: "timeout"
      })
      expect(yield* Deferred.isDone(stopped)).toBe(true)
    }))

  it.effect("applies the tighter of a tool's own timeout and the limit", () =>
    Effect.gen(function*() {
      const r = ToolRegistry.make([tool("slow", () => Effect.never, 200)])
      const fiber = yield* r.call("slow", "{}", ctx).pipe(withToolTimeout(1_000), Effect.fork)
      yield* TestClock.adjust(200)
      expect((yield* Fiber.join(fiber)).content).toContain("did not finish within 200 ms")
      const looser = ToolRegistry.make([tool("slow", () => Effect.never, 5_000)])
      const capped = yield* looser.call("slow", "{}", ctx).pipe(withToolTimeout(300), Effect.fork)
      yield* TestClock.adjust(300)
      expect((yield* Fiber.join(capped)).content).toContain("did not finish within 300 ms")
    }))

  it.effect("interrupting the caller interrupts the tool instead of producing a result", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const stopped = yield* Deferred.make<void>()
      const r = ToolRegistry.make([
        tool("hang", () =>
          Deferred.succeed(started, void 0).pipe(
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() => Deferred.succeed(stopped, void 0))
          ))
      ])
      const fiber = yield* Effect.fork(r.call("hang", "{}", ctx))
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(yield* Deferred.isDone(stopped)).toBe(true)
    }))

  it.effect("at the deadline the timed-out result waits until the interrupted tool has ended", () =>
    Effect.gen(function*() {
      const interrupted = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const r = ToolRegistry.make([
        tool("stubborn", () =>
          Effect.never.pipe(
            Effect.onInterrupt(() => Effect.zipRight(Deferred.succeed(interrupted, void 0), Deferred.await(release)))
          ))
      ])
      const fiber = yield* r.call("stubborn", "{}", ctx).pipe(withToolTimeout(1_000), Effect.fork)
      yield* TestClock.adjust(1_000)
      yield* Deferred.await(interrupted)
      for (let turn = 0; turn < 50; turn++) yield* Effect.yieldNow()
      expect(fiber.unsafePoll()).toBeNull()
      yield* Deferred.succeed(release, void 0)
      expect((yield* Fiber.join(fiber)).failure).toBe("timeout")
    }))

  it.effect("interrupting the caller of a suspended tool ends it only once the tool has ended", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const interrupted = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const r = ToolRegistry.make([
        tool("stubborn", () =>
          Deferred.succeed(started, void 0).pipe(
            Effect.zipRight(Effect.never),
            Effect.onInterrupt(() => Effect.zipRight(Deferred.succeed(interrupted, void 0), Deferred.await(release)))
          ))
      ])
      const fiber = yield* Effect.fork(r.call("stubborn", "{}", ctx))
      yield* Deferred.await(started)
      const stopping = yield* Effect.fork(Fiber.interrupt(fiber))
      yield* Deferred.await(interrupted)
      for (let turn = 0; turn < 50; turn++) yield* Effect.yieldNow()
      expect(stopping.unsafePoll()).toBeNull()
      yield* Deferred.succeed(release, void 0)
      expect(Exit.isInterrupted(yield* Fiber.join(stopping))).toBe(true)
    }))

  it.effect("a tool that suspends, then interrupts itself or dies, yields an interrupted or a failed result", () =>
    Effect.gen(function*() {
      const r = ToolRegistry.make([
        tool("quit_later", () => Effect.zipRight(Effect.sleep(100), Effect.interrupt)),
        tool("dies_later", () => Effect.zipRight(Effect.sleep(100), Effect.die(new Error("kaput"))))
      ])
      const quit = yield* Effect.fork(r.call("quit_later", "{}", ctx).pipe(withToolTimeout(1_000)))
      const died = yield* Effect.fork(r.call("dies_later", "{}", ctx).pipe(withToolTimeout(1_000)))
      yield* TestClock.adjust(100)
      const quitOutcome = yield* Fiber.join(quit)
      expect({ failure: quitOutcome.failure, isError: quitOutcome.isError }).toEqual({
        failure: "interrupted",
        isError: true
      })
      expect(yield* Fiber.join(died)).toEqual({
        content: "tool \"dies_later\" failed: kaput",
        isError: true,
        failure: "tool_error"
      })
    }))

  it.effect("a tool that interrupts itself yields an interrupted result", () =>
    Effect.gen(function*() {
      const r = ToolRegistry.make([tool("quit", () => Effect.interrupt)])
      const outcome = yield* r.call("quit", "{}", ctx)
      expect(outcome.failure).toBe("interrupted")
      expect(outcome.isError).toBe(true)
    }))

  describe("job tools", () => {
    it.effect("adds job tools to a new registry and leaves the original untouched", () =>
      Effect.gen(function*() {
        const job = yield* registry.withJobTools([tool("fetch_logs", () => Effect.succeed("logs"))])
        expect((yield* job.list(ctx)).map((t) => [t.name, t.source])).toEqual([
          ["alpha", "core"],
          ["fetch_logs", "job"],
          ["search", "core"],
          ["zeta", "core"]
        ])
        expect((yield* job.call("fetch_logs", "{}", ctx)).content).toBe("logs")
        expect(registry.has("fetch_logs")).toBe(false)
        expect((yield* registry.call("fetch_logs", "{}", ctx)).failure).toBe("unknown_tool")
      }))

    it.effect("refuses a job tool with a core name", () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(registry.withJobTools([tool("search", () => Effect.succeed("shadow"))]))
        expect(error).toBeInstanceOf(ToolRegistry.ToolNameTaken)
        expect(error._tag).toBe("ToolNameTaken")
        expect(error.message).toBe("tool \"search\" is a core tool and cannot be replaced or shadowed")
        if (error._tag === "ToolNameTaken") expect(error.tool).toBe("search")
      }))

    it.effect("refuses two job tools with one name, and a schema that does not compile", () =>
      Effect.gen(function*() {
        const twice = yield* Effect.flip(
          registry.withJobTools([tool("x", () => Effect.succeed("")), tool("x", () => Effect.succeed(""))])
        )
        expect(twice).toMatchObject({ _tag: "ToolNameTaken", tool: "x", takenBy: "job" })
        const bad = ToolRegistry.define({
          name: "bad",
          description: "",
          parameters: { type: 12 },
          run: () => Effect.succeed("")
        })
        expect(yield* Effect.flip(registry.withJobTools([bad]))).toMatchObject({
          _tag: "InvalidToolSchema",
          tool: "bad"
        })
      }))

    it("throws at construction for a duplicated core name", () => {
      expect(() => ToolRegistry.make([search, search])).toThrow(ToolRegistry.ToolNameTaken)
    })
  })

  describe("layered", () => {
    const shared = ToolRegistry.make([search, tool("zeta", () => Effect.succeed("shared zeta"))])
    const session = ToolRegistry.make([
      tool("zeta", () => Effect.succeed("session zeta")),
      tool("notes", () => Effect.succeed("notes"))
    ], {
      source: "session"
    })

    it.effect("session tools shadow shared ones; the list is merged and sorted", () =>
      Effect.gen(function*() {
        const stack = ToolRegistry.layered(session, shared)
        expect((yield* stack.list(ctx)).map((t) => [t.name, t.source])).toEqual([
          ["notes", "session"],
          ["search", "core"],
          ["zeta", "session"]
        ])
        expect((yield* stack.call("zeta", "{}", ctx)).content).toBe("session zeta")
        expect((yield* stack.call("search", `{"q":"x"}`, ctx)).content).toBe("results for x (10)")
        expect((yield* stack.call("nope", "{}", ctx)).content).toBe(
          "unknown tool \"nope\". Available tools: notes, search, zeta. Call one of them by its exact name."
        )
      }))

    it.effect("works over executors that are not registries", () =>
      Effect.gen(function*() {
        const dynamicSession = { list: session.list, call: session.call }
        const dynamicShared = { list: shared.list, call: shared.call }
        const stack = ToolRegistry.layered(dynamicSession, dynamicShared)
        expect((yield* stack.list(ctx)).map((t) => t.name)).toEqual(["notes", "search", "zeta"])
        expect((yield* stack.call("zeta", "{}", ctx)).content).toBe("session zeta")
        expect((yield* stack.call("search", `{"q":"y"}`, ctx)).content).toBe("results for y (10)")
        expect((yield* stack.call("nope", "{}", ctx)).failure).toBe("unknown_tool")
      }))
  })

  it.effect("layer provides the registry as the ToolExecutor", () =>
    Effect.gen(function*() {
      const executor = yield* ToolExecutor
      expect((yield* executor.list(ctx)).map((t) => t.name)).toEqual(["search"])
    }).pipe(Effect.provide(ToolRegistry.layer([search]))))
})
