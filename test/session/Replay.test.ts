import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
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
