/**
 * The span tree of a burst, as an operator reads it in a tracing backend: `invoke_agent` > `chat` > `chat.attempt`,
 * `execute_tool` per tool call, the landing's finalize inside the burst, every rail decision as an event with its
 * numbers, and the counts on the failure path too. Captured in memory (a fresh exporter per test).
 */
import { describe, expect, it } from "@effect/vitest"
import type { ReadableSpan, Sampler } from "@opentelemetry/sdk-trace-base"
import { SamplingDecision } from "@opentelemetry/sdk-trace-base"
import { Effect } from "effect"
import * as Scripted from "../../src/model/Scripted.js"
import * as Harness from "../../src/testing/Harness.js"
import * as InMemoryTracing from "../support/InMemoryTracing.js"
import * as Tools from "../support/tools.js"

const named = (spans: ReadonlyArray<ReadableSpan>, prefix: string) => spans.filter((s) => s.name.startsWith(prefix))

/** Runs `body` with a fresh in-memory exporter, asserting inside the exporter's scope (closing it clears it). */
const traced = <A, E>(
  body: (tracing: ReturnType<typeof InMemoryTracing.make>) => Effect.Effect<A, E>,
  options: { readonly captureContent?: boolean; readonly spansOn?: boolean; readonly sampler?: Sampler } = {}
) => {
  const tracing = InMemoryTracing.make(options)
  return options.spansOn === false
    ? Effect.provide(body(tracing), tracing.sdk)
    : Effect.provide(body(tracing), tracing.layer)
}

/** A sampler that drops everything and keeps the names it was asked about. */
const asked: Array<string> = []
const counting: Sampler = {
  shouldSample: (_context, _traceId, name) => {
    asked.push(name)
    return { decision: SamplingDecision.NOT_RECORD }
  },
  toString: () => "counting always_off"
}

const status = Scripted.toolCalls([{ name: "status", arguments: { q: "db" } }])

describe("burst spans", () => {
  it.effect("a burst that retries twice, fails over once and ends on repeat_call_halt shows the whole story", () =>
    traced((tracing) =>
      Effect.gen(function*() {
        const primary = {
          ...Scripted.make({
            name: "primary",
            model: "gpt-test",
            maxAttempts: 3,
            script: [Scripted.fault("rate_limit"), Scripted.fault("overloaded"), Scripted.fault("server")]
          }),
          vendor: "openai"
        }
        const secondary = {
          ...Scripted.make({ name: "secondary", model: "claude-test", script: [status, status, status, status] }),
          vendor: "anthropic"
        }
        const spec = Harness.agent({ name: "triage", tools: ["status"] })
        const landed = yield* Harness.drive(Harness.runBurst({ spec })).pipe(
          Effect.provide(Harness.layer({ providers: [primary, secondary], tools: Tools.all }))
        )
        expect(landed.reason).toBe("repeat_call_halt")
        const spans = tracing.exporter.getFinishedSpans()

        // One burst span, the root; every other span of the burst is inside it, finalize included.
        const [burst, ...others] = InMemoryTracing.children(spans, undefined)
        expect(others).toEqual([])
        expect(burst!.name).toBe("invoke_agent triage")
        expect(burst!.attributes).toMatchObject({
          "gen_ai.operation.name": "invoke_agent",
          "gen_ai.agent.id": spec.id,
          "gen_ai.agent.version": String(spec.version),
          "gen_ai.conversation.id": landed.session.id,
          "corral.run.id": landed.trajectory.runId,
          "corral.tier": "default",
          "corral.exit.reason": "repeat_call_halt",
          "corral.exit.check": "repeat_call_halt",
          "error.type": "repeat_call_halt",
          // 4 calls in the loop + the landing's finalize.
          "corral.model_calls.burst": 5,
          "corral.tool_calls": 4
        })
        const top = InMemoryTracing.children(spans, burst).map((s) => s.name)
        expect(top).toEqual([
          "chat gpt-test",
          "execute_tool status",
          "chat claude-test",
          "execute_tool status",
          "chat claude-test",
          "execute_tool status",
          "chat claude-test",
          "execute_tool status",
          // The landing's finalize, inside the burst.
          "chat claude-test"
        ])

        // The first logical call: three attempts on the primary, then the failover's attempt on the secondary.
        const first = named(spans, "chat gpt-test")[0]!
        expect(first.attributes).toMatchObject({
          "gen_ai.operation.name": "chat",
          "gen_ai.provider.name": "anthropic",
          "gen_ai.request.model": "claude-test",
          "gen_ai.response.model": "claude-test",
          "gen_ai.response.finish_reasons": ["tool_calls"],
          "corral.provider": "secondary",
          "corral.attempts": 4,
          "corral.retries": 2,
          "corral.failovers": 1
        })
        expect(first.attributes["error.type"]).toBeUndefined()
        const attempts = InMemoryTracing.children(spans, first)
        expect(attempts.map((s) => [s.name, s.attributes["corral.attempt"], s.attributes["error.type"]])).toEqual([
          ["chat.attempt gpt-test", 1, "rate_limit"],
          ["chat.attempt gpt-test", 2, "overloaded"],
          ["chat.attempt gpt-test", 3, "server"],
          ["chat.attempt claude-test", 1, undefined]
        ])
        expect(attempts.map((s) => s.attributes["gen_ai.provider.name"])).toEqual([
          "openai",
          "openai",
          "openai",
          "anthropic"
        ])

        // In-process tool calls.
        const tool = named(spans, "execute_tool")[0]!
        expect(tool.attributes).toMatchObject({
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "status",
          "gen_ai.tool.type": "function",
          "corral.tool.server": "core",
          "corral.tool.effect": "read",
          "corral.tool.result_bytes": "all systems nominal".length,
          "corral.tool.truncated": false,
          "corral.tool.is_error": false
        })

        // Every rail decision of the trajectory is an event of the burst span, in order, with its numbers.
        const events = burst!.events.map((e) => [e.name, e.attributes])
        expect(events).toEqual(landed.trajectory.decisions!.map((d) => [`corral.rail.${d._tag}`, expect.anything()]))
        expect(events.map(([name]) => name)).toEqual([
          "corral.rail.retry",
          "corral.rail.retry",
          "corral.rail.failover",
          "corral.rail.repeat",
          "corral.rail.repeat",
          "corral.rail.repeat",
          "corral.rail.exit"
        ])
        expect(events[0]![1]).toMatchObject({
          "error.type": "rate_limit",
          "corral.rail.provider": "primary",
          "corral.rail.attempt": 1,
          "corral.rail.delay_ms": expect.any(Number)
        })
        expect(events[2]![1]).toEqual({
          "error.type": "server",
          "corral.rail.from": "primary",
          "corral.rail.to": "secondary"
        })
        expect(events[5]![1]).toMatchObject({ "corral.rail.count": 4, "corral.rail.verdict": "halt" })
        expect(events[6]![1]).toMatchObject({
          "corral.rail.check": "repeat_call_halt",
          "corral.rail.reason": "repeat_call_halt"
        })
        // Prompt and completion content stays out unless asked for.
        expect(spans.some((s) => Object.keys(s.attributes).some((k) => k.startsWith("gen_ai.input")))).toBe(false)
      })
    ))

  it.effect("a logical call whose route is spent carries its attempt and failover counts and the ErrorKind", () =>
    traced((tracing) =>
      Effect.gen(function*() {
        const only = Scripted.make({ name: "only", model: "m1", maxAttempts: 2, script: [Scripted.fault("auth")] })
        const landed = yield* Harness.drive(Harness.runBurst({ spec: Harness.agent() })).pipe(
          Effect.provide(Harness.layer({ providers: [only] }))
        )
        expect(landed.reason).toBe("provider_failed")
        const spans = tracing.exporter.getFinishedSpans()
        const chats = named(spans, "chat m1")
        // The route is spent: the landing's finalize never reaches a model.
        expect(chats).toHaveLength(1)
        expect(chats[0]!.attributes).toMatchObject({
          "gen_ai.provider.name": "_OTHER",
          "corral.attempts": 1,
          "corral.retries": 0,
          "corral.failovers": 1,
          "error.type": "auth"
        })
        expect(chats[0]!.status.code).toBe(2) // ERROR
        const burst = named(spans, "invoke_agent")[0]!
        expect(burst.attributes).toMatchObject({
          "corral.exit.reason": "provider_failed",
          "error.type": "provider_failed"
        })
        expect(burst.events.map((e) => e.name)).toEqual(["corral.rail.failover", "corral.rail.exit"])
      })
    ))

  it.effect("content is recorded only when capture is on", () =>
    traced((tracing) =>
      Effect.gen(function*() {
        const model = Scripted.make({ script: [Scripted.text("the answer is 42")] })
        yield* Harness.drive(Harness.runBurst({ spec: Harness.agent(), prompt: "what is the answer?" })).pipe(
          Effect.provide(Harness.layer({ providers: [model] }))
        )
        const chat = named(tracing.exporter.getFinishedSpans(), "chat ")[0]!
        expect(String(chat.attributes["gen_ai.input.messages"])).toContain("what is the answer?")
        expect(String(chat.attributes["gen_ai.output.messages"])).toContain("the answer is 42")
      }), { captureContent: true }))

  it.effect("with tracing off no span is made", () =>
    traced((tracing) =>
      Effect.gen(function*() {
        const model = Scripted.make({ script: [status, Scripted.text("done")] })
        // (Spans are read while the exporter's layer is open: closing it clears the exporter.)
        // The SDK tracer is installed but Corral's spans are not turned on.
        yield* Harness.drive(Harness.runBurst({ spec: Harness.agent({ tools: ["status"] }) })).pipe(
          Effect.provide(Harness.layer({ providers: [model], tools: Tools.all }))
        )
        expect(tracing.exporter.getFinishedSpans()).toEqual([])
      }), { spansOn: false }))

  it.effect("a burst the sampler drops records nothing, and its model and tool calls make no SDK span", () =>
    traced((tracing) =>
      Effect.gen(function*() {
        const model = Scripted.make({ script: [status, Scripted.text("done")] })
        const landed = yield* Harness.drive(Harness.runBurst({ spec: Harness.agent({ tools: ["status"] }) })).pipe(
          Effect.provide(Harness.layer({ providers: [model], tools: Tools.all }))
        )
        expect(landed.reason).toBe("completed")
        expect(tracing.exporter.getFinishedSpans()).toEqual([])
        // The sampler was asked once: for the burst; its children are the dropped burst span itself.
        expect(asked).toEqual(["invoke_agent Test agent"])
      }), { sampler: counting }))
})
