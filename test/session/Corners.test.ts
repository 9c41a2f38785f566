/**
 * The untested corners of the loop and the actor (issue 15): each test fails without the code it covers.
 *
 * - Counters: no request reaches a provider without both model-call counters moving (ModelCall's gate).
 * - Active time: idle time between bursts and an hour-long approval wait are not charged to the deadline.
 * - Turn cap: the surplus of a turn with more than 8 calls is answered "not executed", paired, and never charged.
 * - `tool_start`: published before the tool runs, and never persisted (a replay from the store has none).
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Layer, Stream, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import type { Turn } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { SessionEvents } from "../../src/events/SessionEvents.js"
import type { ModelProvider, ModelRequest } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Approvals from "../../src/tools/Approvals.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const spec = (fields: Parameters<typeof Harness.agent>[0] = {}) => Harness.agent({ tools: Tools.names, ...fields })

const logs = Scripted.toolCalls([{ name: "logs", arguments: { q: "api" } }])

/** Pairing: every call of an assistant turn has exactly one result, in order, in the next turn. */
const expectPaired = (turns: ReadonlyArray<Turn>) =>
  turns.forEach((turn, i) => {
    if (turn.entry.kind !== "assistant" || turn.entry.toolCalls.length === 0) return
    const next = turns[i + 1]?.entry
    expect(next?.kind).toBe("tool_results")
    if (next?.kind !== "tool_results") return
    expect(next.results.map((r) => r.callId)).toEqual(turn.entry.toolCalls.map((c) => c.id))
  })

/**
 * `provider` as the network would see it: every attempt that reaches it is appended to `wire`. The chain sends the
 * SAME request object on each retry and failover of one logical call, so distinct objects are logical calls.
 */
const onTheWire = (wire: Array<ModelRequest>, provider: ModelProvider): ModelProvider => ({
  ...provider,
  complete: (request) => Effect.suspend(() => (wire.push(request), provider.complete(request)))
})

describe("Corners: the counters", () => {
  it.effect("no request reaches a provider without both counters moving: retries and failover are attempts of one call, the prune retry is a call", () =>
    Effect.gen(function*() {
      const wire: Array<ModelRequest> = []
      const a = onTheWire(
        wire,
        Scripted.make({ name: "a", script: [Scripted.fault("server"), Scripted.fault("auth")] })
      )
      const b = onTheWire(
        wire,
        Scripted.make({
          name: "b",
          script: [logs, logs, Scripted.fault("context_overflow"), Scripted.text("done"), Scripted.text("again")]
        })
      )
      const s = spec()
      const [first, second] = yield* Harness.drive(
        Harness.runBurst({ spec: s }).pipe(
          Effect.flatMap((landed) =>
            Effect.map(
              Harness.runBurst({ spec: s, session: landed.session, history: landed.messages, prompt: "and now?" }),
              (second) => [landed, second] as const
            )
          ),
          Effect.provide(Harness.layer({ providers: [a, b], tools: Tools.all }))
        )
      )
      expect(first.reason).toBe<ExitReason>("completed")
      expect(second.reason).toBe<ExitReason>("completed")

      // Attempts (what reached a provider) are the trajectory's `modelCalls`, one record per request on the wire:
      // call 1 = a (server, retried) + a (auth, failed over) + b; call 2 = b; call 3 = b (overflow); call 4 = the
      // retry after the prune, b; call 5 = finalize; then the follow-up's answer and its finalize.
      const attempts = [...first.trajectory.modelCalls, ...second.trajectory.modelCalls]
      expect(attempts.map((m) => `${m.provider}:${m.error?.kind ?? "reply"}`)).toEqual([
        "a:server",
        "a:auth",
        "b:reply",
        "b:reply",
        "b:context_overflow",
        "b:reply",
        "b:reply",
        "b:reply",
        "b:reply"
      ])
      expect(wire).toHaveLength(attempts.length)

      // Logical calls (distinct requests on the wire) are the counter increments: one `budgets` snapshot each,
      // taken after BOTH counters moved, and the session state's `modelCalls`.
      const logical = new Set(wire).size
      expect(logical).toBe(7)
      const snapshots = [...first.trajectory.budgets, ...second.trajectory.budgets]
      expect(snapshots.map((s) => [s.modelCallsBurst, s.modelCallsSession])).toEqual([
        [1, 1],
        [2, 2],
        [3, 3],
        [4, 4],
        [5, 5],
        [1, 6],
        [2, 7]
      ])
      expect(first.state.modelCalls).toBe(5)
      expect(second.state.modelCalls).toBe(logical)
      // The prune retry is a logical call of its own: the request after the overflow carries the pruned results.
      const retry = wire[5]?.messages.find((m) => m.kind === "tool_results")
      expect(retry?.kind === "tool_results" && retry.results[0]?.content).toContain("pruned")
    }))
})

const alice = new Principal({ orgId: "org_a", userId: "alice" })

/** A minute of active time; the report is written from the transcript (no finalize call, no clock concerns). */
const timed = {
  id: "timed",
  version: 1,
  name: "Timed",
  instructions: "Find the cause.",
  tools: ["echo", "restart"],
  finalize: "transcript" as const,
  limits: { activeTimeMs: 60_000 }
}

/** Corral in memory over `model`; approval tokens live two hours (so an hour's wait is still decidable). */
const corral = (model: ModelProvider) =>
  Corral.layerMemory({ providers: [model], tools: Tools.all }).pipe(
    Layer.provide(Layer.succeed(Approvals.ApprovalSettings, { ttlMs: 2 * 60 * 60_000 }))
  )

const step = { step: "1 second" } as const

describe("Corners: active time", () => {
  it.effect("an hour idle between bursts is not charged: the follow-up gets exactly the active time left", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [Scripted.delay(50_000, Scripted.text("first")), Scripted.delay(20_000, Scripted.text("too late"))]
      })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, timed)
        const v1 = yield* Harness.drive(c.run(alice, { agentId: "timed", scope: "s", prompt: "go" }), step)
        expect(v1.exitReason).toBe<ExitReason>("completed")
        expect(v1.activeMs).toBe(50_000)
        yield* TestClock.adjust("1 hour")

        const v2 = yield* Harness.drive(c.continue(alice, v1.id, "more"), step)
        // Charged with the idle hour, the follow-up would end before any model call; with a fresh minute it would
        // complete. It reached the model and was cut after exactly the 10 s left.
        expect(v2.exitReason).toBe<ExitReason>("deadline")
        expect(model.requests).toHaveLength(2)
        expect(v2.activeMs).toBe(60_000)
        const [, burst] = yield* c.trajectories(alice, v1.id)
        expect((burst?.endedAt ?? 0) - (burst?.startedAt ?? 0)).toBe(10_000)
      }).pipe(Effect.provide(corral(model)))
    }))

  it.effect("a write waiting an hour for approval is not charged: the burst after the decision gets the time left", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [
          Scripted.delay(50_000, Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }])),
          Scripted.delay(20_000, Scripted.text("too late"))
        ]
      })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, timed)
        const v1 = yield* Harness.drive(c.run(alice, { agentId: "timed", scope: "s", prompt: "fix it" }), step)
        expect(v1.exitReason).toBe<ExitReason>("confirmation_pending")
        expect(v1.activeMs).toBe(50_000)
        yield* TestClock.adjust("1 hour")

        const v2 = yield* Harness.drive(c.approve(alice, v1.id, v1.pending[0]?.token ?? ""), step)
        expect(v2.exitReason).toBe<ExitReason>("deadline")
        expect(model.requests).toHaveLength(2)
        expect(v2.activeMs).toBe(60_000)
        const [, burst] = yield* c.trajectories(alice, v1.id)
        expect(burst?.toolCalls.map((t) => [t.origin, t.name, t.status])).toEqual([["handler", "restart", "ok"]])
        expect((burst?.endedAt ?? 0) - (burst?.startedAt ?? 0)).toBe(10_000)
      }).pipe(Effect.provide(corral(model)))
    }))
})

describe("Corners: the per-turn cap", () => {
  it.effect("ten calls in one reply: eight run, two are answered 'not executed', paired, and not charged", () =>
    Effect.gen(function*() {
      const ran: Array<string> = []
      const probe = ToolRegistry.define<{ q: string }>({
        name: "probe",
        description: "Records that it ran.",
        parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
        run: (args) => Effect.sync(() => (ran.push(args.q), `probe:${args.q}`))
      })
      const ten = Scripted.toolCalls(
        Array.from({ length: 10 }, (_, i) => ({ name: "probe", arguments: { q: `${i}` } }))
      )
      const model = Scripted.make({
        script: [ten, Scripted.toolCalls([{ name: "probe", arguments: { q: "later" } }]), Scripted.text("done")]
      })
      // A budget of 9: had the surplus been charged, the call of the next turn would find it spent.
      const landed = yield* Harness.drive(
        Harness.runBurst({ spec: spec({ tools: ["probe"], limits: { toolCalls: 9 } }) }).pipe(
          Effect.provide(Harness.layer({ providers: [model], tools: [probe] }))
        )
      )
      expect(landed.reason).toBe<ExitReason>("completed")
      expect(ran).toEqual(["0", "1", "2", "3", "4", "5", "6", "7", "later"])
      expectPaired(landed.turns)
      const first = landed.turns[2]?.entry
      if (first?.kind !== "tool_results") throw new Error("expected the first turn's results")
      expect(first.results.map((r) => r.status)).toEqual([...Array(8).fill("ok"), "not_executed", "not_executed"])
      expect(first.results[9]).toMatchObject({
        isError: true,
        content: expect.stringContaining("at most 8 tool calls are executed per turn")
      })
      expect(landed.state.toolCalls).toBe(9)
      // One snapshot per model call (the last is the finalize call): the surplus never moved the budget.
      expect(landed.trajectory.budgets.map((b) => b.toolCalls)).toEqual([0, 8, 9, 9])
    }))

  it.effect("a write past the cap is not executed: it never becomes a pending confirmation", () =>
    Effect.gen(function*() {
      const calls = [
        ...Array.from({ length: 8 }, (_, i) => ({ name: "echo", arguments: { q: `${i}` } })),
        { name: "restart", arguments: { service: "db" } }
      ]
      const model = Scripted.make({ script: [Scripted.toolCalls(calls), Scripted.text("done")] })
      const landed = yield* Harness.drive(
        Harness.runBurst({ spec: spec() }).pipe(Effect.provide(Harness.layer({ providers: [model], tools: Tools.all })))
      )
      expect(landed.reason).toBe<ExitReason>("completed")
      expect(landed.state.pending).toEqual([])
      expect(landed.tokens).toEqual([])
      const results = landed.turns[2]?.entry
      expect(results?.kind === "tool_results" && results.results.at(-1)?.status).toBe("not_executed")
      expectPaired(landed.turns)
    }))
})

describe("Corners: tool_start", () => {
  it.effect("tool_start is published before the tool runs, reaches a subscriber, and is never persisted", () =>
    Effect.gen(function*() {
      // One log for what was published and what ran, in the order it happened.
      const log: Array<string> = []
      const probe = ToolRegistry.define<{ q: string }>({
        name: "probe",
        description: "Records the moment it runs.",
        parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
        run: (args, ctx) => Effect.sync(() => (log.push(`ran:${ctx.callId}`), `probe:${args.q}`))
      })
      let hubs: Effect.Effect<number> = Effect.succeed(0)
      const recording = Layer.effect(
        SessionEvents,
        Effect.map(LiveEvents.make, (live) => ({
          ...live,
          ...(hubs = live.liveSessions, {}),
          publish: (event: SessionEvent) =>
            Effect.zipRight(
              Effect.sync(() => {
                if (event._tag === "tool_start") log.push(`tool_start:${event.callId}`)
              }),
              live.publish(event)
            )
        }))
      )
      const model = Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "probe", arguments: { q: "a" } }, { name: "probe", arguments: { q: "b" } }]),
          Scripted.text("done")
        ]
      })
      const s = spec({ tools: ["probe"] })
      const row = Harness.session(s)
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const events = yield* SessionEvents
        yield* store.createSession(row)
        const live = yield* events.subscribe(row.principal.orgId, row.id, 0).pipe(
          Stream.takeUntil((e) => e._tag === "report"),
          Stream.runCollect,
          Effect.fork
        )
        while ((yield* hubs) === 0) yield* Effect.yieldNow()
        const landed = yield* Harness.drive(Harness.runBurst({ spec: s, session: row }))
        expect(landed.reason).toBe<ExitReason>("completed")
        // The turn's calls start together: every call's tool_start goes out before any of them runs.
        expect(log).toEqual(["tool_start:call_1", "tool_start:call_2", "ran:call_1", "ran:call_2"])

        const seen = Chunk.toArray(yield* Fiber.join(live))
        expect(seen.filter((e) => e._tag === "tool_start").map((e) => e._tag === "tool_start" && e.callId)).toEqual(
          ["call_1", "call_2"]
        )

        // Replayed from the store, the same burst is turns only: tool_start was live, never stored.
        const last = landed.turns.at(-1)?.seq ?? 0
        const replayed = Chunk.toArray(
          yield* events.subscribe(row.principal.orgId, row.id, 0).pipe(
            Stream.takeUntil((e) => e._tag === "turn" && e.seq === last),
            Stream.runCollect
          )
        )
        expect(replayed.map((e) => e._tag)).toEqual(landed.turns.map(() => "turn"))
        expect(JSON.stringify(yield* store.turns(row.principal.orgId, row.id))).not.toContain("tool_start")
      }).pipe(
        Effect.provide(
          Layer.mergeAll(
            recording,
            ToolRegistry.layer([probe]),
            Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
          ).pipe(Layer.provideMerge(MemoryStore.layerMemory))
        )
      )
    }))
})
