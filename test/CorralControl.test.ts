import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Option, Stream, TestClock } from "effect"
import { Corral } from "../src/Corral.js"
import { Principal } from "../src/domain/Principal.js"
import type { SessionEvent } from "../src/domain/SessionEvent.js"
import type { ModelProvider } from "../src/model/ModelProvider.js"
import * as Scripted from "../src/model/Scripted.js"
import { AuthorPhase } from "../src/session/Landing.js"
import * as Tools from "./support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })

/** A host author hook that takes 40 s: the cancelled burst cannot land before it returns. */
const slowAuthor = Effect.provideService(AuthorPhase, Option.some(() => Effect.sleep("40 seconds")))

const withCorral = <A, E>(providers: ReadonlyArray<ModelProvider>, body: (c: Corral["Type"]) => Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const c = yield* Corral
    yield* c.publishAgent(alice, {
      id: "triage",
      version: 1,
      name: "Triage",
      instructions: "Find the cause.",
      tools: ["echo"],
      finalize: "transcript"
    })
    return yield* body(c)
  }).pipe(Effect.provide(Corral.layerMemory({ providers, tools: Tools.all })))

const start = (c: Corral["Type"], prompt = "go") => c.start(alice, { agentId: "triage", scope: "s", prompt })

/** What a subscriber saw, as short labels: `user`/`assistant`/… for turns, `exit:<reason>`, `report:<reason>`. */
const labels = (events: ReadonlyArray<SessionEvent>) =>
  events.flatMap((e) =>
    e._tag === "turn"
      ? [e.turn.entry.kind]
      : e._tag === "exit"
      ? [`exit:${e.reason}`]
      : e._tag === "report"
      ? [`report:${e.report.exitReason}`]
      : []
  )

describe("Corral.cancel", () => {
  it.effect("resolves once the burst has landed, answering the cancelled view", () =>
    withCorral(
      [Scripted.make({ script: [Scripted.delay(60_000, Scripted.text("late"))], timeoutMs: 600_000 })],
      (c) =>
        Effect.gen(function*() {
          const started = yield* start(c)
          yield* TestClock.adjust("1 second")
          const v = yield* c.cancel(alice, started.id)
          expect(v).toMatchObject({ status: "idle", exitReason: "cancelled", bursts: 1 })
          expect(v.report?.exitReason).toBe("cancelled")
          expect((yield* c.get(alice, started.id)).exitReason).toBe("cancelled")
        })
    ))

  it.effect("of a session with no running burst answers it as it stands, at once", () =>
    withCorral([Scripted.make({ script: [Scripted.text("done")] })], (c) =>
      Effect.gen(function*() {
        const ran = yield* c.run(alice, { agentId: "triage", scope: "s", prompt: "go" })
        const v = yield* c.cancel(alice, ran.id)
        expect(v).toMatchObject({ status: "idle", exitReason: "completed", bursts: 1 })
      })))

  it.effect("never hangs: a burst that cannot land within 25 s answers the session as it stands", () =>
    withCorral(
      [Scripted.make({ script: [Scripted.delay(60_000, Scripted.text("late"))], timeoutMs: 600_000 })],
      (c) =>
        Effect.gen(function*() {
          const started = yield* start(c)
          yield* TestClock.adjust("1 second")
          const cancel = yield* Effect.fork(c.cancel(alice, started.id))
          yield* TestClock.adjust("24 seconds")
          expect(cancel.unsafePoll()).toBeNull()
          yield* TestClock.adjust("1 second")
          const v = yield* Fiber.join(cancel)
          expect(v.status).toBe("running")
          expect(v.exitReason).toBeUndefined()
          // Once the hook returns the burst lands cancelled all the same.
          yield* TestClock.adjust("20 seconds")
          expect((yield* c.get(alice, started.id)).exitReason).toBe("cancelled")
        })
    ).pipe(slowAuthor))
})

describe("Corral.events until landed", () => {
  it.effect("ends after the running burst's exit and report", () =>
    withCorral(
      [Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "echo", arguments: { q: "a" } }]),
          Scripted.delay(5_000, Scripted.text("done"))
        ]
      })],
      (c) =>
        Effect.gen(function*() {
          const started = yield* start(c)
          yield* TestClock.adjust("1 second")
          const following = yield* Effect.fork(Stream.runCollect(c.events(alice, started.id, { until: "landed" })))
          yield* TestClock.adjust("5 seconds")
          const seen = labels(Chunk.toReadonlyArray(yield* Fiber.join(following)))
          expect(seen).toEqual(["user", "assistant", "tool_results", "assistant", "exit:completed", "report:completed"])
        })
    ))

  it.effect("a late subscriber is replayed every earlier burst's exit and report in order, then it ends", () =>
    withCorral(
      [Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "echo", arguments: { q: "a" } }]),
          Scripted.text("one"),
          Scripted.text(
            "two"
          )
        ]
      })],
      (c) =>
        Effect.gen(function*() {
          const ran = yield* c.run(alice, { agentId: "triage", scope: "s", prompt: "go" })
          yield* c.continue(alice, ran.id, "and?")
          const replayed = labels(Chunk.toReadonlyArray(
            yield* Stream.runCollect(c.events(alice, ran.id, { fromSeq: 0, until: "landed" }))
          ))
          expect(replayed).toEqual([
            "user",
            "assistant",
            "tool_results",
            "assistant",
            "exit:completed",
            "report:completed",
            "user",
            "assistant",
            "exit:completed",
            "report:completed"
          ])
          // From a resume point: what came after that turn, the landing right after it included.
          const resumed = yield* Stream.runCollect(c.events(alice, ran.id, { fromSeq: 4, until: "landed" }))
          expect(labels(Chunk.toReadonlyArray(resumed))).toEqual([
            "exit:completed",
            "report:completed",
            "user",
            "assistant",
            "exit:completed",
            "report:completed"
          ])
          const later = yield* Stream.runCollect(c.events(alice, ran.id, { fromSeq: 5, until: "landed" }))
          expect(labels(Chunk.toReadonlyArray(later))).toEqual(["assistant", "exit:completed", "report:completed"])
        })
    ))

  it.effect("a follow-up posted before subscribing is the burst it waits for", () =>
    withCorral(
      [Scripted.make({ script: [Scripted.text("one"), Scripted.delay(2_000, Scripted.text("two"))] })],
      (c) =>
        Effect.gen(function*() {
          const ran = yield* c.run(alice, { agentId: "triage", scope: "s", prompt: "go" })
          const seq = (yield* c.turns(alice, ran.id)).at(-1)!.seq
          yield* c.post(alice, ran.id, "and?")
          const following = yield* Effect.fork(
            Stream.runCollect(c.events(alice, ran.id, { fromSeq: seq, until: "landed" }))
          )
          yield* TestClock.adjust("2 seconds")
          const seen = labels(Chunk.toReadonlyArray(yield* Fiber.join(following)))
          // The first burst's landing (right after turn `seq`) is replayed; the stream ends at the follow-up's.
          expect(seen).toEqual([
            "exit:completed",
            "report:completed",
            "user",
            "assistant",
            "exit:completed",
            "report:completed"
          ])
        })
    ))
})

describe("Corral.start", () => {
  it.effect("answers `running`: its prompt is stored and about to run (a retry answers the same)", () =>
    withCorral(
      [Scripted.make({ script: [Scripted.delay(1_000, Scripted.text("done"))] })],
      (c) =>
        Effect.gen(function*() {
          const request = { agentId: "triage", scope: "s", prompt: "go" }
          const started = yield* c.start(alice, request, { idempotencyKey: "k1" })
          expect(started).toMatchObject({ status: "running", bursts: 0 })
          expect((yield* c.start(alice, request, { idempotencyKey: "k1" })).status).toBe("running")
          yield* TestClock.adjust("1 second")
          const landed = yield* c.cancel(alice, started.id)
          expect(landed).toMatchObject({ status: "idle", exitReason: "completed" })
        })
    ))
})
