import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Admission from "../../src/session/Admission.js"
import { Supervisor } from "../../src/session/Supervisor.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const agent = { id: "triage", version: 1, name: "Triage", instructions: "Find the cause.", tools: [] }

describe("Admission", () => {
  it.effect("runs at most `max` bursts at once, the others in order of arrival as places free up", () =>
    Effect.gen(function*() {
      const gate = Admission.make(2)
      const order: Array<string> = []
      const burst = (name: string) =>
        Effect.gen(function*() {
          order.push(`start ${name}`)
          yield* Effect.sleep("1 second")
          order.push(`end ${name}`)
        })
      const never = yield* Deferred.make<void>()
      const fibers = yield* Effect.forEach(
        ["a", "b", "c", "d"],
        (name) => Effect.fork(gate.admit(burst(name), never))
      )
      yield* Effect.yieldNow()
      expect(order).toEqual(["start a", "start b"])
      expect([gate.running(), gate.waiting()]).toEqual([2, 2])
      yield* TestClock.adjust("1 second")
      yield* Effect.yieldNow()
      expect([...order.slice(2)].sort()).toEqual(["end a", "end b", "start c", "start d"])
      // c was first in line: it starts before d.
      expect(order.indexOf("start c")).toBeLessThan(order.indexOf("start d"))
      yield* TestClock.adjust("1 second")
      yield* Fiber.joinAll(fibers)
      expect([gate.running(), gate.waiting()]).toEqual([0, 0])
    }))

  it.effect("gives the place back when a burst fails or is interrupted, and a waiter leaves the queue when interrupted", () =>
    Effect.gen(function*() {
      const gate = Admission.make(1)
      const never = yield* Deferred.make<void>()
      expect(yield* Effect.flip(gate.admit(Effect.fail("boom"), never))).toBe("boom")
      expect(gate.running()).toBe(0)
      const holder = yield* Effect.fork(gate.admit(Effect.never, never))
      const waiter = yield* Effect.fork(gate.admit(Effect.void, never))
      yield* Effect.yieldNow()
      expect([gate.running(), gate.waiting()]).toEqual([1, 1])
      yield* Fiber.interrupt(waiter)
      expect([gate.running(), gate.waiting()]).toEqual([1, 0])
      yield* Fiber.interrupt(holder)
      expect([gate.running(), gate.waiting()]).toEqual([0, 0])
      // Still usable.
      expect(yield* gate.admit(Effect.succeed(42), never)).toBe(42)
    }))

  it.effect("a burst cancelled while it waits runs at once, without taking a place", () =>
    Effect.gen(function*() {
      const gate = Admission.make(1)
      const never = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(gate.admit(Effect.never, never))
      const cancel = yield* Deferred.make<void>()
      const waiter = yield* Effect.fork(gate.admit(Effect.succeed("landed cancelled"), cancel))
      yield* Effect.yieldNow()
      expect(gate.waiting()).toBe(1)
      yield* Deferred.succeed(cancel, undefined)
      gate.cancelled(cancel)
      expect(yield* Fiber.join(waiter)).toBe("landed cancelled")
      expect([gate.running(), gate.waiting()]).toEqual([1, 0])
      yield* Fiber.interrupt(holder)
      expect(gate.running()).toBe(0)
    }))

  it.effect("a burst cancelled before it comes to wait runs at once; the next in line keeps its turn", () =>
    Effect.gen(function*() {
      const gate = Admission.make(1)
      const never = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(gate.admit(Effect.never, never))
      const next = yield* Effect.fork(gate.admit(Effect.succeed("next"), never))
      yield* Effect.yieldNow()
      expect([gate.running(), gate.waiting()]).toEqual([1, 1])
      const cancel = yield* Deferred.make<void>()
      yield* Deferred.succeed(cancel, undefined)
      gate.cancelled(cancel)
      expect(yield* gate.admit(Effect.succeed("landed cancelled"), cancel)).toBe("landed cancelled")
      expect([gate.running(), gate.waiting()]).toEqual([1, 1])
      yield* Fiber.interrupt(holder)
      expect(yield* Fiber.join(next)).toBe("next")
      expect([gate.running(), gate.waiting()]).toEqual([0, 0])
    }))

  it.effect("0 means no cap", () =>
    Effect.gen(function*() {
      const gate = Admission.make(0)
      const never = yield* Deferred.make<void>()
      const fibers = yield* Effect.forEach([1, 2, 3], () => Effect.fork(gate.admit(Effect.sleep("1 second"), never)))
      yield* Effect.yieldNow()
      // Every burst runs at once; the gate counts nothing (what `/metrics` shows as running and waiting).
      expect([gate.running(), gate.waiting()]).toEqual([0, 0])
      yield* TestClock.adjust("1 second")
      yield* Fiber.joinAll(fibers)
    }))

  /**
   * One place; the burst holding it forks `b` and `c`, which wait, and then `beforeRelease` runs; the place is freed
   * as the burst ends (handed to `b`), and `afterRelease` runs. Returns who ran and the gate's counts at the end.
   */
  const handOver = (
    hooks: {
      readonly beforeRelease: (b: Fiber.RuntimeFiber<void>) => Effect.Effect<void>
      readonly afterRelease: (b: Fiber.RuntimeFiber<void>) => Effect.Effect<void>
    }
  ) =>
    Effect.gen(function*() {
      const gate = Admission.make(1)
      const never = yield* Deferred.make<void>()
      const ran: Array<string> = []
      const waiter = (name: string) => Effect.fork(gate.admit(Effect.sync(() => void ran.push(name)), never))
      let b: Fiber.RuntimeFiber<void> | undefined
      let c: Fiber.RuntimeFiber<void> | undefined
      yield* gate.admit(
        Effect.gen(function*() {
          b = yield* waiter("b")
          c = yield* waiter("c")
          yield* Effect.yieldNow()
          expect(gate.waiting()).toBe(2)
          yield* hooks.beforeRelease(b)
        }),
        never
      )
      yield* hooks.afterRelease(b!)
      yield* Fiber.join(c!)
      return { ran, running: gate.running(), waiting: gate.waiting() }
    })

  it.effect("a waiter interrupted just as a place is handed to it gives the place on: the next in line runs", () =>
    Effect.gen(function*() {
      // The interruption reaches the waiter before the grant does: it leaves holding a place it never used.
      const { ran, running, waiting } = yield* handOver({
        beforeRelease: (b) => Effect.asVoid(Fiber.interruptFork(b)),
        afterRelease: (b) => Effect.asVoid(Fiber.await(b))
      })
      expect(ran).toEqual(["c"])
      expect([running, waiting]).toEqual([0, 0])
    }))

  it.effect("a waiter interrupted right after a place is handed to it, before its burst starts, gives the place back", () =>
    Effect.gen(function*() {
      // The grant reaches the waiter first, the interruption right after: the burst never runs, the place is freed.
      const { ran, running, waiting } = yield* handOver({
        beforeRelease: () => Effect.void,
        afterRelease: (b) => Effect.asVoid(Fiber.interrupt(b))
      })
      expect(ran.at(-1)).toBe("c")
      expect([running, waiting]).toEqual([0, 0])
    }))
})

describe("Admission in the supervisor", () => {
  // Every model call takes 10 s (TestClock), so a burst holds its place until the clock moves.
  const slow = Scripted.make({
    script: [],
    whenDone: Scripted.delay(10_000, Scripted.text("done")),
    report: () => Scripted.text(JSON.stringify({ summary: "s", findings: [], confidence: "low", nextSteps: [] }))
  })
  const layer = Corral.layerMemory({ providers: [slow], maxRunningBursts: 1 })
  /** Model calls of the loop (finalize calls excluded). */
  const modelCalls = () => slow.requests.filter((r) => r.responseSchema === undefined).length

  it.effect("a session over the cap reads running, waits without calling the model, and lands after the first", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      const supervisor = yield* Supervisor
      yield* c.publishAgent(alice, agent)
      const calls = modelCalls()
      yield* c.start(alice, { agentId: "triage", scope: "s", prompt: "first", sessionId: "ses_first" })
      yield* c.start(alice, { agentId: "triage", scope: "s", prompt: "second", sessionId: "ses_second" })
      yield* TestClock.adjust("1 millis")
      expect(supervisor.admission()).toEqual({ running: 1, waiting: 1 })
      expect((yield* c.get(alice, "ses_second")).status).toBe("running")
      expect(modelCalls() - calls).toBe(1)
      const second = yield* Effect.fork(
        c.run(alice, { agentId: "triage", scope: "s", prompt: "x", sessionId: "ses_x" })
      )
      yield* TestClock.adjust("10 seconds")
      // The first landed (its finalize answers at once); the second now holds the place and called the model.
      expect((yield* c.get(alice, "ses_first")).exitReason).toBe("completed")
      expect((yield* c.get(alice, "ses_second")).status).toBe("running")
      yield* TestClock.adjust("10 seconds")
      expect((yield* c.get(alice, "ses_second")).exitReason).toBe("completed")
      yield* TestClock.adjust("10 seconds")
      expect((yield* Fiber.join(second)).exitReason).toBe("completed")
      expect(supervisor.admission()).toEqual({ running: 0, waiting: 0 })
    }).pipe(Effect.provide(layer)))

  it.effect("a waiting session cancelled lands cancelled at once, without a model call, and frees nobody's place", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      const supervisor = yield* Supervisor
      yield* c.publishAgent(alice, agent)
      yield* c.start(alice, { agentId: "triage", scope: "s", prompt: "first", sessionId: "ses_a" })
      yield* c.start(alice, { agentId: "triage", scope: "s", prompt: "second", sessionId: "ses_b" })
      yield* TestClock.adjust("1 millis")
      const calls = modelCalls()
      const cancelled = yield* c.cancel(alice, "ses_b")
      expect(cancelled.exitReason).toBe("cancelled")
      expect(modelCalls()).toBe(calls)
      // Its prompt is in the transcript: the person sees what was cancelled.
      const turns = yield* c.turns(alice, "ses_b")
      expect(turns.map((t) => t.entry.kind === "user" ? t.entry.text : t.entry.kind)).toContain("second")
      expect(supervisor.admission()).toEqual({ running: 1, waiting: 0 })
      expect((yield* c.get(alice, "ses_a")).status).toBe("running")
    }).pipe(Effect.provide(layer)))
})

describe("accepted messages the store kept from their burst", () => {
  /** The memory store, with `turns` failing while `down` is set (the supervisor's load reads them; accepting does not). */
  let down = false
  const flaky = Layer.effect(
    SessionStore,
    Effect.map(MemoryStore.makeMemory, (store) => ({
      ...store,
      turns: (orgId: string, sessionId: string, afterSeq?: number) =>
        down
          ? Effect.fail(new PersistenceFailed({ operation: "turns", message: "the store did not answer" }))
          : store.turns(orgId, sessionId, afterSeq)
    }))
  )
  const model = Scripted.make({ script: [], whenDone: Scripted.text("done") })
  const layer = Corral.layer({ idleTimeout: "1 minute" }).pipe(
    Layer.provide(Layer.mergeAll(
      LiveEvents.layer,
      ToolRegistry.layer([]),
      Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
    )),
    Layer.provide(flaky)
  )

  it.effect("are delivered again once the store answers, and run once", () =>
    Effect.gen(function*() {
      down = false
      const c = yield* Corral
      yield* c.publishAgent(alice, agent)
      yield* c.run(alice, { agentId: "triage", scope: "s", prompt: "first", sessionId: "ses_r" })
      // The actor passivates; the next message must load the session from the store.
      yield* TestClock.adjust("2 minutes")
      down = true
      const accepted = yield* c.post(alice, "ses_r", "follow-up")
      expect(accepted.status).toBe("running")
      yield* TestClock.adjust("1 second")
      expect((yield* c.get(alice, "ses_r")).bursts).toBe(1)
      down = false
      yield* TestClock.adjust("5 seconds")
      const session = yield* c.get(alice, "ses_r")
      expect(session.bursts).toBe(2)
      expect(session.exitReason).toBe("completed")
      const users = (yield* c.turns(alice, "ses_r")).flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : [])
      expect(users).toEqual(["first", "follow-up"])
    }).pipe(Effect.provide(layer)))
})
