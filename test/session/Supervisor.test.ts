import { describe, expect, it } from "@effect/vitest"
import { Context, Deferred, Effect, Fiber, Layer, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const agent = { id: "triage", version: 1, name: "Triage", instructions: "Find the cause.", tools: [] }

describe("Supervisor: loading a session", () => {
  it.scoped("a load whose caller is interrupted part-way still ends: the next message loads the session and runs", () =>
    Effect.gen(function*() {
      // A store whose agent read (made only by a session's load here) can be held until released.
      const inner = yield* MemoryStore.makeMemory
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      let hold = false
      const store: typeof inner = {
        ...inner,
        getAgent: (orgId, agentId, version) =>
          hold
            ? Deferred.succeed(entered, undefined).pipe(
              Effect.zipRight(Deferred.await(release)),
              Effect.zipRight(inner.getAgent(orgId, agentId, version))
            )
            : inner.getAgent(orgId, agentId, version)
      }
      const model = Scripted.make({ script: [Scripted.text("first"), Scripted.text("second"), Scripted.text("third")] })
      const built = yield* Layer.build(
        Corral.layer({ idleTimeout: "1 second" }).pipe(
          Layer.provideMerge(
            Layer.mergeAll(
              LiveEvents.layer,
              ToolRegistry.layer([]),
              Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
            )
          ),
          Layer.provideMerge(Layer.succeed(SessionStore, store))
        )
      )
      const c = Context.get(built, Corral)
      yield* c.publishAgent(alice, agent)
      const first = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
      // Idle past its idle time: the actor passivates, and the next message loads the session from the store.
      yield* TestClock.adjust("2 seconds")
      hold = true
      const interrupted = yield* Effect.fork(c.continue(alice, first.id, "more?"))
      yield* Deferred.await(entered)
      yield* Fiber.interrupt(interrupted)
      hold = false
      yield* Deferred.succeed(release, undefined)
      const next = yield* Effect.fork(c.continue(alice, first.id, "anything else?"))
      yield* TestClock.adjust("1 second")
      const answered = yield* Fiber.poll(next)
      expect(answered._tag).toBe("Some")
      const view = yield* Fiber.join(next)
      expect(view.status).toBe("idle")
      const turns = yield* c.turns(alice, first.id)
      expect(turns.flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : [])).toContain("anything else?")
    }))
})
