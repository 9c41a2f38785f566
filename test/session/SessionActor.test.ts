import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import type { ModelReply } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import { Usage } from "../../src/domain/Usage.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import type { ModelProvider, ModelRequest } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import { Supervisor } from "../../src/session/Supervisor.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { ToolExecutor } from "../../src/tools/ToolExecutor.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const agent = { id: "triage", version: 1, name: "Triage", instructions: "Find the cause.", tools: ["echo", "slow"] }

/** A tool that takes a minute (to cancel during a tool call). */
const slow = ToolRegistry.define<{ q: string }>({
  name: "slow",
  description: "Takes a minute.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  run: (args) => Effect.as(Effect.sleep("60 seconds"), `slow:${args.q}`)
})

const reply = (fields: Partial<ModelReply>): ModelReply => ({
  text: "",
  toolCalls: [],
  finishReason: "stop",
  usage: new Usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 }),
  model: "fn",
  ...fields
})

/** Stateless: one echo call, then an answer naming the session's first prompt. */
const echoThenAnswer = Scripted.fromFunction({
  reply: (request: ModelRequest) => {
    const results = request.messages.filter((m) => m.kind === "tool_results").length
    const first = request.messages[0]
    const prompt = first?.kind === "user" ? first.text : "?"
    return results === 0
      ? reply({
        finishReason: "tool_calls",
        toolCalls: [{ id: `c_${prompt}`, name: "echo", arguments: "{\"q\":\"x\"}" }]
      })
      : reply({ text: `answer:${prompt}` })
  }
})

const layer = (providers: ReadonlyArray<ModelProvider>, tiers: Record<string, ReadonlyArray<ModelProvider>> = {}) =>
  Corral.layerMemory({ providers, tiers, tools: [...Tools.all, slow], idleTimeout: "1 minute" })

const publish = Effect.flatMap(Corral, (c) => c.publishAgent(alice, agent))

describe("SessionActor", () => {
  it.effect("two Continues sent during a burst run one after the other, in order", () =>
    Effect.gen(function*() {
      yield* publish
      const c = yield* Corral
      const first = yield* Effect.fork(
        c.run(alice, { agentId: "triage", scope: "s", prompt: "p0", sessionId: "ses_1" })
      )
      yield* TestClock.adjust("10 millis")
      const second = yield* Effect.fork(c.continue(alice, "ses_1", "p1"))
      yield* Effect.yieldNow()
      const third = yield* Effect.fork(c.continue(alice, "ses_1", "p2"))
      yield* TestClock.adjust("1 second")
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      const last = yield* Fiber.join(third)
      expect(last.bursts).toBe(3)
      const entries = (yield* c.turns(alice, "ses_1")).map((t) => t.entry)
      expect(entries.map((e) => e.kind === "user" ? e.text : e.kind === "assistant" ? e.text : e.kind)).toEqual([
        "p0",
        "a",
        "p1",
        "b",
        "p2",
        "c"
      ])
    }).pipe(
      Effect.provide(layer([
        Scripted.make({ script: [Scripted.delay(1_000, Scripted.text("a")), Scripted.text("b"), Scripted.text("c")] })
      ]))
    ))

  it.effect("cancel during a model call: cancelled, transcript kept, Continue works afterwards", () =>
    Effect.gen(function*() {
      yield* publish
      const c = yield* Corral
      const running = yield* Effect.fork(
        c.run(alice, { agentId: "triage", scope: "s", prompt: "go", sessionId: "ses_c" })
      )
      yield* TestClock.adjust("1 second")
      yield* c.cancel(alice, "ses_c")
      const v = yield* Fiber.join(running)
      expect(v.exitReason).toBe("cancelled")
      expect(v.report?.exitReason).toBe("cancelled")
      const kinds = (yield* c.turns(alice, "ses_c")).map((t) => t.entry.kind)
      expect(kinds).toEqual(["user", "assistant", "tool_results"])
      const after = yield* c.continue(alice, "ses_c", "try again")
      expect(after.exitReason).toBe("completed")
    }).pipe(
      Effect.provide(layer([
        Scripted.make({
          script: [
            Scripted.toolCalls([{ name: "echo", arguments: { q: "1" } }]),
            Scripted.delay(60_000, Scripted.text("late")),
            Scripted.text("done")
          ],
          timeoutMs: 600_000
        })
      ]))
    ))

  it.effect("cancel during a tool call: the stopped call still gets a result, pairing holds", () =>
    Effect.gen(function*() {
      yield* publish
      const c = yield* Corral
      const running = yield* Effect.fork(
        c.run(alice, { agentId: "triage", scope: "s", prompt: "go", sessionId: "ses_t" })
      )
      yield* TestClock.adjust("1 second")
      yield* c.cancel(alice, "ses_t")
      const v = yield* Fiber.join(running)
      expect(v.exitReason).toBe("cancelled")
      const turns = yield* c.turns(alice, "ses_t")
      const results = turns.at(-1)?.entry
      expect(results?.kind).toBe("tool_results")
      if (results?.kind !== "tool_results") return
      expect(results.results.map((r) => [r.name, r.status])).toEqual([["echo", "ok"], ["slow", "error"]])
      expect(results.results[1]?.content).toContain("stopped before it finished")
      const after = yield* c.continue(alice, "ses_t", "go on")
      expect(after.exitReason).toBe("completed")
    }).pipe(
      Effect.provide(layer([
        Scripted.make({
          script: [
            Scripted.toolCalls([{ name: "echo", arguments: { q: "1" } }, { name: "slow", arguments: { q: "2" } }]),
            Scripted.text("done")
          ]
        })
      ]))
    ))

  it.effect("a provider defect crashes only its session: 50 others running at the same time complete", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, agent)
      yield* c.publishAgent(alice, { ...agent, id: "crashy", tier: "crash" })
      const crashed = c.run(alice, { agentId: "crashy", scope: "s", prompt: "boom", sessionId: "ses_crash" })
      const others = Array.from(
        { length: 50 },
        (_, i) => c.run(alice, { agentId: "triage", scope: "s", prompt: `p${i}`, sessionId: `ses_${i}` })
      )
      const [bad, ...good] = yield* Effect.all([crashed, ...others], { concurrency: "unbounded" })
      expect(bad?.exitReason).toBe("crashed")
      expect(bad?.report?.source).toBe("fallback")
      expect(good.map((v) => v.exitReason)).toEqual(Array(50).fill("completed"))
      const again = yield* c.continue(alice, "ses_crash", "still there?")
      expect(again.exitReason).toBe("crashed")
    }).pipe(
      Effect.provide(
        layer([echoThenAnswer], {
          crash: [Scripted.make({ script: [Scripted.defect("bug in a provider")], whenDone: Scripted.defect("again") })]
        })
      )
    ))

  it.effect("a defect in the tool executor lands as crashed, with a report", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, { ...agent, tools: ["echo"] })
      const v = yield* c.run(alice, { agentId: "triage", scope: "s", prompt: "go" })
      expect(v.exitReason).toBe("crashed")
      expect(v.report?.exitReason).toBe("crashed")
    }).pipe(
      Effect.provide(
        Corral.layer().pipe(
          Layer.provide(Layer.mergeAll(
            LiveEvents.layer,
            Layer.succeed(ToolExecutor, {
              list: () => Effect.succeed(Tools.all.filter((t) => t.name === "echo")),
              call: () => Effect.die(new Error("executor bug"))
            }),
            Layer.succeed(Providers, Providers.fromRoutes({ default: [echoThenAnswer] }))
          )),
          Layer.provideMerge(MemoryStore.layerMemory)
        )
      )
    ))

  it.effect("an idle actor passivates; the next Continue rebuilds identical counters and provider state", () =>
    Effect.gen(function*() {
      yield* publish
      const c = yield* Corral
      const supervisor = yield* Supervisor
      const before = yield* c.run(alice, { agentId: "triage", scope: "s", prompt: "go", sessionId: "ses_p" })
      expect(supervisor.live()).toBe(1)
      yield* TestClock.adjust("61 seconds")
      yield* Effect.yieldNow()
      expect(supervisor.live()).toBe(0)
      const rebuilt = yield* c.get(alice, "ses_p")
      expect(rebuilt).toEqual(before)
      const after = yield* c.continue(alice, "ses_p", "more")
      expect(supervisor.live()).toBe(1)
      expect(after.modelCalls).toBe(before.modelCalls + 2)
      expect(after.exitReason).toBe("completed")
    }).pipe(
      Effect.provide(layer([
        Scripted.make({
          name: "a",
          script: [Scripted.fault("auth")],
          whenDone: Scripted.defect("a must not be asked again")
        }),
        Scripted.make({ name: "b", script: [Scripted.text("one"), Scripted.text("two")] })
      ]))
    ))

  it.effect("an actor busy for longer than the idle time is not passivated mid-burst; it goes an idle time later", () =>
    Effect.gen(function*() {
      yield* publish
      const c = yield* Corral
      const supervisor = yield* Supervisor
      const running = yield* Effect.fork(
        c.run(alice, { agentId: "triage", scope: "s", prompt: "go", sessionId: "ses_busy" })
      )
      yield* TestClock.adjust("61 seconds")
      const view = yield* Fiber.join(running)
      expect(view.exitReason).toBe("completed")
      expect(supervisor.live()).toBe(1)
      yield* TestClock.adjust("45 seconds")
      expect(supervisor.live()).toBe(1)
      yield* TestClock.adjust("15 seconds")
      expect(supervisor.live()).toBe(0)
      expect((yield* c.continue(alice, "ses_busy", "again")).exitReason).toBe("completed")
    }).pipe(
      Effect.provide(layer([
        Scripted.make({
          script: [
            Scripted.toolCalls([{ id: "s1", name: "slow", arguments: "{\"q\":\"x\"}" }]),
            Scripted.text("done"),
            Scripted.text("again")
          ]
        })
      ]))
    ))

  it.effect("1,000 concurrent sessions all land with the right exit reasons", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, { ...agent, finalize: "transcript" })
      yield* c.publishAgent(alice, { ...agent, id: "tight", finalize: "transcript", limits: { modelCallsPerBurst: 1 } })
      const views = yield* Effect.all(
        Array.from({ length: 1_000 }, (_, i) =>
          c.run(alice, {
            agentId: i % 2 === 0 ? "triage" : "tight",
            scope: "s",
            prompt: `p${i}`,
            sessionId: `ses_${i}`
          })),
        { concurrency: "unbounded" }
      )
      views.forEach((v, i) => expect(v.exitReason).toBe(i % 2 === 0 ? "completed" : "burst_limit"))
      const sample = yield* c.turns(alice, "ses_998")
      expect(sample.at(-1)?.entry).toMatchObject({ kind: "assistant", text: "answer:p998" })
    }).pipe(Effect.provide(layer([echoThenAnswer]))))
})
