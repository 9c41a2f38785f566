import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Stream, TestClock } from "effect"
import { Corral } from "../src/Corral.js"
import type { AgentSpecInput } from "../src/domain/AgentSpec.js"
import { Principal } from "../src/domain/Principal.js"
import { Usage } from "../src/domain/Usage.js"
import type { ModelProvider } from "../src/model/ModelProvider.js"
import * as Scripted from "../src/model/Scripted.js"
import * as Tools from "./support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const mallory = new Principal({ orgId: "org_b", userId: "mallory" })

const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: ["echo", "restart"]
}

const corral = (
  providers: ReadonlyArray<ModelProvider>,
  extra: Partial<Parameters<typeof Corral.layerMemory>[0]> = {}
) => Corral.layerMemory({ providers, tools: Tools.all, ...extra })

const withCorral = <A, E>(
  providers: ReadonlyArray<ModelProvider>,
  body: (c: Corral["Type"]) => Effect.Effect<A, E>,
  extra: Partial<Parameters<typeof Corral.layerMemory>[0]> = {}
) =>
  Effect.gen(function*() {
    const c = yield* Corral
    yield* c.publishAgent(alice, agent)
    return yield* body(c)
  }).pipe(Effect.provide(corral(providers, extra)))

describe("Corral.publishAgent", () => {
  it.effect("names every invalid field: unknown tool, unknown tier, loosened limit, bad schema", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      const error = yield* Effect.flip(c.publishAgent(alice, {
        ...agent,
        tier: "premium",
        tools: ["echo", "rm_rf"],
        limits: { modelCallsPerBurst: 100 },
        reportSchema: { type: "nonsense" }
      }))
      expect(error._tag).toBe("InvalidRequest")
      if (error._tag !== "InvalidRequest") return
      const paths = error.issues.map((i) => i.path)
      expect(paths).toEqual(expect.arrayContaining(["tools.1", "tier", "limits.modelCallsPerBurst", "reportSchema"]))
      expect(error.issues.find((i) => i.path === "tools.1")?.message).toContain("rm_rf")
    }).pipe(Effect.provide(corral([]))))

  it.effect("rejects a malformed spec with the path of each problem", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      const error = yield* Effect.flip(
        c.publishAgent(alice, { id: "Bad Id", version: 0, extra: true } as unknown as AgentSpecInput)
      )
      if (error._tag !== "InvalidRequest") throw new Error("expected InvalidRequest")
      const paths = error.issues.map((i) => i.path)
      expect(paths).toEqual(expect.arrayContaining(["id", "version", "name", "instructions", "extra"]))
    }).pipe(Effect.provide(corral([]))))

  it.effect("refuses a cost budget over a tier whose provider has no prices, naming it", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      const error = yield* Effect.flip(c.publishAgent(alice, { ...agent, limits: { costPerSession: 50_000 } }))
      if (error._tag !== "InvalidRequest") throw new Error("expected InvalidRequest")
      expect(error.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
        "limits.costPerSession: a cost budget applies, but provider \"free\" of tier \"default\" has no prices: give " +
        "it \"pricing\" in the configuration"
      ])
    }).pipe(Effect.provide(corral([
      Scripted.make({ name: "priced", script: [], pricing: { inputPerMTok: 3, outputPerMTok: 15 } }),
      Scripted.make({ name: "free", script: [] })
    ]))))

  it.effect("tightening limits is accepted and versions are kept apart", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, { ...agent, limits: { modelCallsPerBurst: 5 } })
      yield* c.publishAgent(alice, { ...agent, version: 2, name: "Triage v2" })
      expect((yield* c.getAgent(alice, "triage")).version).toBe(2)
      expect((yield* c.getAgent(alice, "triage", 1)).limits?.modelCallsPerBurst).toBe(5)
      expect(yield* c.listAgents(mallory)).toEqual([])
    }).pipe(Effect.provide(corral([]))))
})

describe("Corral sessions", () => {
  it.effect("run lands a completed session with a report, usage and counters", () =>
    withCorral([
      Scripted.make({ script: [Scripted.toolCalls([{ name: "echo", arguments: { q: "x" } }]), Scripted.text("done")] })
    ], (c) =>
      Effect.gen(function*() {
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
        expect(v).toMatchObject({ status: "idle", exitReason: "completed", modelCalls: 3, toolCalls: 1 })
        expect(v.report?.exitReason).toBe("completed")
        expect(v.usage.total).toBeGreaterThan(0)
        const turns = yield* c.turns(alice, v.id)
        expect(turns.map((t) => t.entry.kind)).toEqual(["user", "assistant", "tool_results", "assistant"])
        expect(yield* c.trajectories(alice, v.id)).toHaveLength(1)
      })))

  it.effect("start returns at once; continue runs a second burst after the first", () =>
    withCorral(
      [Scripted.make({ script: [Scripted.delay(1_000, Scripted.text("first")), Scripted.text("second")] })],
      (c) =>
        Effect.gen(function*() {
          const started = yield* c.start(alice, { agentId: "triage", scope: "incident:1", prompt: "go" })
          expect(started.status).toBe("running")
          const follow = yield* Effect.fork(c.continue(alice, started.id, "and then?"))
          yield* TestClock.adjust("1 second")
          const v = yield* Fiber.join(follow)
          expect(v.bursts).toBe(2)
          const texts = (yield* c.turns(alice, v.id)).map((t) =>
            t.entry.kind === "assistant" ? t.entry.text : t.entry.kind
          )
          expect(texts).toEqual(["user", "first", "user", "second"])
        })
    ))

  it.effect("another org sees nothing: get, turns, continue, cancel and events are all not found", () =>
    withCorral([Scripted.make({ script: [Scripted.text("done")] })], (c) =>
      Effect.gen(function*() {
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
        for (
          const attempt of [
            c.get(mallory, v.id),
            c.turns(mallory, v.id),
            c.continue(mallory, v.id, "hi"),
            c.cancel(mallory, v.id),
            c.approve(mallory, v.id, "tok"),
            Stream.runCollect(c.events(mallory, v.id))
          ]
        ) {
          const error = yield* Effect.flip(attempt as Effect.Effect<unknown, { readonly _tag: string }>)
          expect(error._tag).toBe("SessionNotFound")
        }
        const agentError = yield* Effect.flip(c.run(mallory, { agentId: "triage", scope: "incident:1", prompt: "x" }))
        expect(agentError._tag).toBe("AgentNotFound")
      })))

  it.effect("scope boundary: another scope's artifact or session is refused before any prompt", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.text("one"), Scripted.text("two")] })
      yield* withCorral([model], (c) =>
        Effect.gen(function*() {
          const first = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
          const requestsBefore = model.requests.length
          const cross = yield* Effect.flip(
            c.run(alice, { agentId: "triage", scope: "incident:2", prompt: "x", inheritedArtifacts: [first.id] })
          )
          expect(cross._tag).toBe("ScopeMismatch")
          const rebind = yield* Effect.flip(
            c.run(alice, { agentId: "triage", scope: "incident:2", prompt: "x", sessionId: first.id })
          )
          expect(rebind._tag).toBe("ScopeMismatch")
          const wrongScope = yield* Effect.flip(c.continue(alice, first.id, "more", { scope: "incident:2" }))
          expect(wrongScope._tag).toBe("ScopeMismatch")
          expect(model.requests.length).toBe(requestsBefore)
          // Same scope: the earlier report is handed over as data, in the first user turn.
          const heir = yield* c.run(alice, {
            agentId: "triage",
            scope: "incident:1",
            prompt: "continue the analysis",
            inheritedArtifacts: [first.id]
          })
          const opening = (yield* c.turns(alice, heir.id))[0]?.entry
          expect(opening?.kind === "user" && opening.context).toContain(`Report of earlier session ${first.id}`)
        }))
    }))

  it.effect("a bad start request names the field", () =>
    withCorral([], (c) =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(c.run(alice, { agentId: "triage", scope: "", prompt: "" }))
        if (error._tag !== "InvalidRequest") throw new Error(`expected InvalidRequest, got ${error._tag}`)
        expect(error.issues.map((i) => i.path)).toEqual(expect.arrayContaining(["scope", "prompt"]))
      })))

  it.effect("approve runs exactly the shown write first, then the model reports it", () =>
    Effect.gen(function*() {
      const ran: Array<unknown> = []
      const restart = { ...Tools.restart, run: (args: unknown) => Effect.sync(() => (ran.push(args), "restarted db")) }
      const model = Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }, {
            name: "echo",
            arguments: { q: "s" }
          }]),
          Scripted.text("The restart worked.")
        ]
      })
      yield* withCorral([model], (c) =>
        Effect.gen(function*() {
          const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
          expect(v.exitReason).toBe("confirmation_pending")
          expect(v.status).toBe("awaiting_confirmation")
          expect(v.pending).toEqual([{
            callId: expect.any(String),
            tool: "restart",
            arguments: "{\"service\":\"db\"}",
            token: expect.any(String),
            expiresAt: expect.any(Number)
          }])
          const token = v.pending[0]?.token ?? ""
          expect(ran).toEqual([])
          const refused = yield* Effect.flip(c.continue(alice, v.id, "hurry"))
          expect(refused._tag).toBe("InvalidSessionState")
          const forged = yield* Effect.flip(c.approve(alice, v.id, "forged-token"))
          expect(forged._tag).toBe("InvalidSessionState")
          const done = yield* c.approve(alice, v.id, token)
          expect(ran).toEqual([{ service: "db" }])
          expect(done.exitReason).toBe("completed")
          const opening = (yield* c.turns(alice, v.id)).find((t, i) => i > 0 && t.entry.kind === "user")?.entry
          expect(opening?.kind === "user" && opening.context).toContain("restarted db")
          // Approving twice is refused as already decided and does not run the write again.
          expect((yield* Effect.flip(c.approve(alice, v.id, token)))._tag).toBe("AlreadyDecided")
          expect(ran).toHaveLength(1)
        }), { tools: [...Tools.all.filter((t) => t.name !== "restart"), restart] })
    }))

  it.effect("reject tells the model the write was declined", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }]),
          Scripted.text("ok, not restarting")
        ]
      })
      yield* withCorral([model], (c) =>
        Effect.gen(function*() {
          const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
          const done = yield* c.approve(alice, v.id, v.pending[0]?.token ?? "", "reject")
          expect(done.exitReason).toBe("completed")
          const last = model.requests.at(-2)?.messages.at(-1)
          expect(last?.kind === "user" && last.context).toContain("DECLINED")
        }))
    }))

  it.effect("events replay the transcript and then follow live", () =>
    withCorral(
      [Scripted.make({ script: [Scripted.text("one"), Scripted.delay(500, Scripted.text("two"))] })],
      (c) =>
        Effect.gen(function*() {
          const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
          const collected = yield* Effect.fork(
            c.events(alice, v.id, 0).pipe(Stream.filter((e) => e._tag === "turn"), Stream.take(4), Stream.runCollect)
          )
          yield* Effect.fork(c.continue(alice, v.id, "more"))
          yield* TestClock.adjust("1 second")
          const turns = Chunk.toReadonlyArray(yield* Fiber.join(collected))
          expect(turns.map((e) => e.seq)).toEqual([1, 2, 3, 4])
        })
    ))

  it.effect("streamed text reaches subscribers as delta events; the assembled reply is what gets persisted", () =>
    Effect.gen(function*() {
      const streaming: ModelProvider = {
        name: "streaming",
        model: "m",
        timeoutMs: 1_000,
        maxAttempts: 1,
        complete: (request) =>
          Effect.sync(() => {
            request.onDelta?.("The data")
            request.onDelta?.("base is down.")
            return {
              text: "The database is down.",
              toolCalls: [],
              finishReason: "stop" as const,
              usage: new Usage({ inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 }),
              model: "m"
            }
          })
      }
      yield* withCorral([streaming], (c) =>
        Effect.gen(function*() {
          const first = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
          const watching = yield* Effect.fork(
            c.events(alice, first.id, (yield* c.turns(alice, first.id)).length).pipe(
              Stream.takeUntil((e) => e._tag === "exit"),
              Stream.runCollect
            )
          )
          yield* Effect.yieldNow()
          yield* c.continue(alice, first.id, "and?")
          const seen = Chunk.toReadonlyArray(yield* Fiber.join(watching))
          const deltas = seen.flatMap((e) => e._tag === "delta" ? [e.text] : [])
          // The reply streams; the finalize call (the report) does not.
          expect(deltas).toEqual(["The data", "base is down."])
          const persisted = seen.flatMap((e) => e._tag === "turn" ? [e.turn.entry] : [])
          expect(persisted.at(-1)).toMatchObject({ kind: "assistant", text: "The database is down." })
        }))
    }))

  it.effect("host limits tighten every agent; loosening them is refused", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(
        Effect.provide(Corral, Corral.layerMemory({ providers: [], limits: { modelCallsPerBurst: 1_000 } }))
      )
      expect(error._tag).toBe("InvalidRequest")
      const model = Scripted.make({
        script: Array.from({ length: 5 }, (_, i) => Scripted.toolCalls([{ name: "echo", arguments: { q: `${i}` } }]))
      })
      const v = yield* withCorral(
        [model],
        (c) => c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "go" }),
        { limits: { modelCallsPerBurst: 2 } }
      )
      expect(v.exitReason).toBe("burst_limit")
      expect(v.modelCalls).toBe(2)
    }))
})
