import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Option } from "effect"
import * as TestClock from "effect/TestClock"
import { defaultReportSchema } from "../../src/domain/Report.js"
import { Usage } from "../../src/domain/Usage.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"

const ask = (text: string): ModelRequest => ({
  system: "You are a test.",
  messages: [{ kind: "user", text }],
  tools: []
})
const finalize: ModelRequest = { ...ask("write the report"), responseSchema: defaultReportSchema }

describe("Scripted", () => {
  it.effect("plays its steps in order and records every request", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ model: "m-1", script: [Scripted.text("one"), Scripted.text("two")] })
      expect(model.remaining).toBe(2)
      const first = yield* model.complete(ask("a"))
      const second = yield* model.complete(ask("b"))
      expect([first.text, second.text]).toEqual(["one", "two"])
      expect(model.requests.map((request) => request.messages[0])).toEqual([
        { kind: "user", text: "a" },
        { kind: "user", text: "b" }
      ])
      expect(model.remaining).toBe(0)
    }))

  it.effect("sets model to the provider's model, raw to the step verbatim, and default usage 10/5", () =>
    Effect.gen(function*() {
      const step = Scripted.text("hello")
      const model = Scripted.make({ model: "m-2", script: [step, Scripted.text("big", { input: 100 })] })
      const reply = yield* model.complete(ask("a"))
      expect(reply).toMatchObject({ text: "hello", finishReason: "stop", model: "m-2", toolCalls: [] })
      expect(reply.raw).toBe(step)
      expect([reply.usage.inputTokens, reply.usage.outputTokens]).toEqual([10, 5])
      const big = yield* model.complete(ask("b"))
      expect([big.usage.inputTokens, big.usage.outputTokens]).toEqual([100, 5])
    }))

  it.effect("answers with whenDone once the script is exhausted", () =>
    Effect.gen(function*() {
      const plain = Scripted.make({ script: [] })
      expect((yield* plain.complete(ask("a"))).text).toBe("(the script has ended)")
      const custom = Scripted.make({ script: [Scripted.text("only")], whenDone: Scripted.fault("server") })
      yield* custom.complete(ask("a"))
      const after = yield* Effect.flip(custom.complete(ask("b")))
      expect(after.kind).toBe("server")
      expect(custom.remaining).toBe(0)
    }))

  it.effect("stringifies object arguments and numbers tool call ids per provider", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "search", arguments: { q: "disk" } }, { name: "read", arguments: "{\"id\":" }]),
          Scripted.toolCalls([{ name: "search", arguments: {}, id: "mine" }, { name: "read", arguments: {} }], "why")
        ]
      })
      const first = yield* model.complete(ask("a"))
      expect(first.finishReason).toBe("tool_calls")
      expect(first.toolCalls).toEqual([
        { id: "call_1", name: "search", arguments: "{\"q\":\"disk\"}" },
        { id: "call_2", name: "read", arguments: "{\"id\":" }
      ])
      const second = yield* model.complete(ask("b"))
      expect(second.text).toBe("why")
      expect(second.toolCalls.map((call) => call.id)).toEqual(["mine", "call_3"])
      // A second provider counts on its own.
      const other = Scripted.make({ script: [Scripted.toolCalls([{ name: "x", arguments: {} }])] })
      expect((yield* other.complete(ask("a"))).toolCalls[0]?.id).toBe("call_1")
    }))

  it.effect("gives each reply constructor its finish reason", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [
          Scripted.empty(),
          Scripted.length([{ name: "write", arguments: "{\"text\": \"cut" }]),
          Scripted.filtered(),
          Scripted.refused()
        ]
      })
      const replies = yield* Effect.forEach([1, 2, 3, 4], () => model.complete(ask("x")))
      expect(replies.map((reply) => reply.finishReason)).toEqual(["stop", "length", "filtered", "refused"])
      expect(replies[0]).toMatchObject({ text: "", toolCalls: [] })
      expect(replies[1]?.toolCalls).toHaveLength(1)
    }))

  it.effect("fails a fault step with its ProviderError, stamped with the provider name", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        name: "alpha",
        script: [
          Scripted.fault("rate_limit", { retryAfterMs: 7_000 }),
          Scripted.fault("quota", { usage: { input: 3 } })
        ]
      })
      const limited = yield* Effect.flip(model.complete(ask("a")))
      expect(limited).toMatchObject({
        _tag: "ProviderError",
        kind: "rate_limit",
        status: 429,
        retryAfterMs: 7_000,
        provider: "alpha"
      })
      const quota = yield* Effect.flip(model.complete(ask("b")))
      expect(quota.usage?.inputTokens).toBe(3)
    }))

  it.effect("delays on the Effect clock before playing the wrapped step", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.delay(1_000, Scripted.text("late"))] })
      const fiber = yield* Effect.fork(model.complete(ask("a")))
      yield* TestClock.adjust(999)
      expect(Option.isNone(yield* Fiber.poll(fiber))).toBe(true)
      yield* TestClock.adjust(1)
      const reply = yield* Fiber.join(fiber)
      expect(reply.text).toBe("late")
      expect(reply.raw).toEqual(Scripted.delay(1_000, Scripted.text("late")))
    }))

  it.effect("dies on a defect step", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.defect("boom")] })
      const exit = yield* Effect.exit(model.complete(ask("a")))
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
    }))

  it.effect("answers finalize calls with the report without consuming the script", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.text("burst")] })
      const report = yield* model.complete(finalize)
      expect(JSON.parse(report.text)).toEqual({
        summary: expect.any(String),
        findings: [],
        confidence: "low",
        nextSteps: []
      })
      expect(model.remaining).toBe(1)
      expect((yield* model.complete(ask("a"))).text).toBe("burst")
      expect(model.requests).toHaveLength(2)

      const custom = Scripted.make({
        script: [],
        report: (request) => Scripted.text(JSON.stringify({ asked: request.messages.length }))
      })
      expect(JSON.parse((yield* custom.complete(finalize)).text)).toEqual({ asked: 1 })
    }))

  it.effect("keeps no request log when record is false", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.text("a")], record: false })
      yield* model.complete(ask("a"))
      expect(model.requests).toHaveLength(0)
      expect(model.remaining).toBe(0)
    }))
})

describe("Scripted.fromFunction", () => {
  it("answers synchronously from the function", () => {
    const model = Scripted.fromFunction({
      model: "fast",
      reply: (request) => ({
        text: `seen ${request.messages.length}`,
        toolCalls: [],
        finishReason: "stop",
        usage: Usage.zero,
        model: "fast"
      })
    })
    expect(Effect.runSync(model.complete(ask("a"))).text).toBe("seen 1")
    expect(model.model).toBe("fast")
  })
})
