import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Replay from "../../src/session/Replay.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as Harness from "../../src/testing/Harness.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const spec = (fields: Parameters<typeof Harness.agent>[0] = {}) => Harness.agent({ tools: Tools.names, ...fields })

const recordAndReplay = (
  providers: ReadonlyArray<ModelProvider>,
  agent = spec()
) =>
  Effect.gen(function*() {
    const landed = yield* Harness.drive(
      Harness.runBurst({ spec: agent }).pipe(Effect.provide(Harness.layer({ providers, tools: Tools.all })))
    )
    const result = yield* Replay.verifyBurst({
      spec: agent,
      session: landed.session,
      turns: landed.turns,
      trajectory: landed.trajectory,
      last: true
    })
    return { landed, result }
  })

const echo = (q: string) => Scripted.toolCalls([{ name: "echo", arguments: { q } }])

describe("Replay", () => {
  it.effect("verifies a burst with tools, a retry and a failover", () =>
    Effect.gen(function*() {
      const a = Scripted.make({
        name: "a",
        script: [echo("x"), Scripted.fault("rate_limit"), Scripted.fault("server"), Scripted.fault("server")]
      })
      const b = Scripted.make({ name: "b", script: [Scripted.text("done")] })
      const { landed, result } = yield* recordAndReplay([a, b])
      expect(landed.trajectory.decisions?.map((d) => d._tag)).toContain("failover")
      expect(result).toMatchObject({ _tag: "Verified", exitReason: "completed", prefix: false })
    }))

  it.effect("verifies truncation and a repeat halt", () =>
    Effect.gen(function*() {
      const status = Scripted.toolCalls([{ name: "status", arguments: { q: "a" } }])
      const model = Scripted.make({
        script: [Scripted.toolCalls([{ name: "logs", arguments: { q: "api" } }]), status, status, status, status]
      })
      const { landed, result } = yield* recordAndReplay([model])
      expect(landed.reason).toBe("repeat_call_halt")
      expect(result).toMatchObject({ _tag: "Verified", exitReason: "repeat_call_halt" })
    }))

  it.effect("a changed rail diverges with the path of the first difference", () =>
    Effect.gen(function*() {
      const status = Scripted.toolCalls([{ name: "status", arguments: { q: "a" } }])
      const model = Scripted.make({ script: [status, status, status, status] })
      const agent = spec()
      const { landed } = yield* recordAndReplay([model], agent)
      const record = landed.trajectory.replay!
      const changed = { ...landed.trajectory, replay: { ...record, limits: { ...record.limits, repeatWarnAt: 3 } } }
      const result = yield* Replay.verifyBurst({
        spec: agent,
        session: landed.session,
        turns: landed.turns,
        trajectory: changed
      })
      expect(result._tag).toBe("Diverged")
      if (result._tag !== "Diverged") return
      expect(result.divergence.path).toMatch(/^turns\[/)
    }))
})

describe("Replay's time slack", () => {
  /**
   * The memory store, each turn's write taking `ms` on the clock — a recording on a real clock, where the database's
   * writes take time the replay (an in-memory store) does not spend.
   */
  const slowTurnWrites = (ms: number) =>
    Layer.effect(
      SessionStore,
      Effect.map(MemoryStore.makeMemory, (base): SessionStore["Type"] => ({
        ...base,
        appendTurn: (...args) => Effect.zipRight(Effect.sleep(ms), base.appendTurn(...args))
      }))
    )

  it.effect("a recording whose times run later than the replay's (slow store writes) verifies, whatever the slack", () =>
    Effect.gen(function*() {
      const agent = spec()
      const model = Scripted.make({
        script: [echo("a"), Scripted.fault("server"), echo("b"), Scripted.text("done")]
      })
      const landed = yield* Harness.drive(
        Harness.runBurst({ spec: agent }).pipe(
          Effect.provide(
            Layer.mergeAll(
              LiveEvents.layer,
              ToolRegistry.layer(Tools.all),
              Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
            ).pipe(Layer.provideMerge(slowTurnWrites(1_500)))
          )
        ),
        { step: "100 millis" }
      )
      expect(landed.reason).toBe("completed")
      // The store's writes are in the record: the first attempt started after the user turn's write, 1.5 s in,
      // where the replay (nothing to wait for) starts it at once. Later times drift further, past the 1 s slack.
      const t = landed.trajectory
      expect(t.modelCalls[0]!.startedAt - t.startedAt).toBe(1_500)
      expect(t.toolCalls.at(-1)!.startedAt! - t.startedAt).toBeGreaterThan(3 * 1_500)
      const replay = (timeSlackMs: number) =>
        Replay.verifyBurst({ spec: agent, session: landed.session, turns: landed.turns, trajectory: t, last: true }, {
          timeSlackMs
        })
      // A replayed time may be earlier than the recorded one by any amount: the default slack and none at all.
      expect(yield* replay(1_000)).toMatchObject({ _tag: "Verified", exitReason: "completed", attempts: 5 })
      expect(yield* replay(0)).toMatchObject({ _tag: "Verified", exitReason: "completed" })
    }))

  it("compares clock readings one way: a replayed time may be earlier by any amount, later by at most the slack", () => {
    const at = (ms: number) => ({ decisions: [{ _tag: "retry", at: ms }] })
    expect(Replay.firstDifference(at(10_000), at(2_000), "", 1_000)).toEqual(Option.none())
    expect(Replay.firstDifference(at(10_000), at(11_000), "", 1_000)).toEqual(Option.none())
    expect(Replay.firstDifference(at(10_000), at(11_001), "", 1_000)).toEqual(
      Option.some({ path: "decisions[0].at", recorded: 10_000, replayed: 11_001 })
    )
    // A duration alone compares within the slack both ways; next to its start, as its end.
    expect(Replay.firstDifference({ durationMs: 500 }, { durationMs: 1_501 }, "", 1_000)).toEqual(
      Option.some({ path: "durationMs", recorded: 500, replayed: 1_501 })
    )
    expect(Replay.firstDifference({ durationMs: 2_000 }, { durationMs: 999 }, "", 1_000)).toEqual(
      Option.some({ path: "durationMs", recorded: 2_000, replayed: 999 })
    )
    const sameEnd = { startedAt: 1_000, durationMs: 9_000 }
    expect(Replay.firstDifference({ startedAt: 9_000, durationMs: 1_000 }, sameEnd, "", 0)).toEqual(Option.none())
    // Numbers a rail decided on compare exactly, whatever the slack.
    expect(Replay.firstDifference({ delayMs: 500 }, { delayMs: 501 }, "", 1_000)).toEqual(
      Option.some({ path: "delayMs", recorded: 500, replayed: 501 })
    )
  })
})

describe("Replay's divergence report", () => {
  it("reports arrays of different lengths at their length, after the common part compares equal", () => {
    expect(Replay.firstDifference({ turns: [1, 2] }, { turns: [1, 2, 3] }, "", 0)).toEqual(
      Option.some({ path: "turns.length", recorded: 2, replayed: 3 })
    )
    expect(Replay.firstDifference([1, 2, 3], [1, 2], "modelCalls", 0)).toEqual(
      Option.some({ path: "modelCalls.length", recorded: 3, replayed: 2 })
    )
    // A difference inside the common part comes first.
    expect(Replay.firstDifference([1, 9], [1, 2, 3], "x", 0)).toEqual(
      Option.some({ path: "x[1]", recorded: 9, replayed: 2 })
    )
    expect(Replay.firstDifference([], [], "x", 0)).toEqual(Option.none())
  })
})

describe("Replay of whole sessions through the Corral service", () => {
  const alice = new Principal({ orgId: "org_a", userId: "alice" })
  const agent = {
    id: "triage",
    version: 1,
    name: "Triage",
    instructions: "Find the cause of the incident.",
    tools: ["echo", "restart", "logs"]
  }
  const withCorral = <A, E>(model: Scripted.Scripted, body: (c: Corral["Type"]) => Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const store = yield* MemoryStore.makeMemory
      const verify = (id: string) =>
        Effect.flatMap(
          Replay.load("org_a", id).pipe(Effect.provideService(SessionStore, store)),
          (recorded) => Replay.verifySession(recorded)
        )
      const result = yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        // Time moves on by itself while a burst sleeps (the retry's backoff).
        return yield* Harness.drive(body(c), { step: "100 millis" })
      }).pipe(
        Effect.provide(
          Corral.layer().pipe(
            Layer.provide(Layer.mergeAll(
              LiveEvents.layer,
              ToolRegistry.layer(Tools.all),
              Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
            )),
            Layer.provide(Layer.succeed(SessionStore, store))
          )
        )
      )
      return { result, verify }
    })

  it.effect("a write decided by a person, then a follow-up: every burst replays to the same decisions", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [
          Scripted.fault("overloaded"),
          Scripted.toolCalls([{ name: "logs", arguments: { q: "db" } }, {
            name: "restart",
            arguments: { service: "db" }
          }]),
          Scripted.text("Restarted the database."),
          echo("after"),
          Scripted.text("All good now.")
        ]
      })
      const { result: id, verify } = yield* withCorral(model, (c) =>
        Effect.gen(function*() {
          const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix checkout" })
          expect(v.exitReason).toBe("confirmation_pending")
          const decided = yield* c.approve(alice, v.id, v.pending[0]!.token!)
          expect(decided.exitReason).toBe("completed")
          const next = yield* c.continue(alice, v.id, "and now?")
          expect(next.exitReason).toBe("completed")
          return v.id
        }))
      const results = yield* verify(id)
      expect(results.map((r) => r._tag)).toEqual(["Verified", "Verified", "Verified"])
      expect(results.map((r) => r._tag === "Verified" ? r.exitReason : r._tag)).toEqual([
        "confirmation_pending",
        "completed",
        "completed"
      ])
    }))
})
