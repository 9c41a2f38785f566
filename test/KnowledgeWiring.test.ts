import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Corral } from "../src/Corral.js"
import { Principal } from "../src/domain/Principal.js"
import * as MemoryRetriever from "../src/knowledge/MemoryRetriever.js"
import { RetrievalFailed, Retriever } from "../src/knowledge/Retriever.js"
import * as Scripted from "../src/model/Scripted.js"
import * as Prompt from "../src/session/Prompt.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const bob = new Principal({ orgId: "org_b", userId: "bob" })
const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Answer from the runbooks.",
  knowledgeSources: ["runbooks"]
}

describe("knowledge in a session", () => {
  it.effect("retrieved text enters the first user turn as context (the caller's org and the spec's sources only)", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.text("Restart the pool.")] })
      yield* Effect.gen(function*() {
        const retriever = yield* Retriever
        yield* retriever.ingest(alice, [
          { id: "rb1", source: "runbooks", title: "Checkout pool exhausted", body: "Restart the checkout pool." },
          { id: "wiki", source: "wiki", title: "Checkout pool trivia", body: "Checkout pool history." }
        ])
        yield* retriever.ingest(bob, [
          { id: "secret", source: "runbooks", title: "Checkout pool at org b", body: "Org b only." }
        ])
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "checkout pool" })
        const opening = (yield* c.turns(alice, v.id))[0]?.entry
        if (opening?.kind !== "user") throw new Error("expected the user turn")
        expect(opening.text).toBe("checkout pool")
        expect(opening.context).toContain("Restart the checkout pool.")
        expect(opening.context).not.toContain("Org b only.")
        expect(opening.context).not.toContain("history")
        const request = model.requests[0]!
        expect(request.system).toBe(Prompt.system(yield* c.getAgent(alice, "triage")))
        expect(request.system).not.toContain("Restart the checkout pool.")
      }).pipe(
        Effect.provide(
          Corral.layerMemory({ providers: [model] }).pipe(Layer.provideMerge(MemoryRetriever.layer))
        )
      )
    }))

  it.effect("a failed retrieval degrades the run (recorded in the trajectory), it does not end it", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(alice, agent)
      const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "checkout pool" })
      expect(v.exitReason).toBe("completed")
      const [trajectory] = yield* c.trajectories(alice, v.id)
      expect(trajectory?.errors.map((e) => e.code)).toContain("knowledge.retrieve")
    }).pipe(
      Effect.provide(
        Corral.layerMemory({ providers: [Scripted.make({ script: [Scripted.text("answer")] })] }).pipe(
          Layer.provide(Layer.succeed(Retriever, {
            retrieve: () => Effect.fail(new RetrievalFailed({ operation: "retrieve", message: "database is down" })),
            ingest: () => Effect.void
          }))
        )
      )
    ))
})
