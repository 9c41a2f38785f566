/**
 * An org's daily budget, in one process: its sessions stop on money (the running burst at its next call, a new burst
 * refused with 429's error and the reset time), many sessions at once never jointly pass it, another org is not
 * touched, and the next UTC day starts afresh. Every session here is replayed after the file
 * (test/support/replayEverySession), so the org's grants replay too.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import { utcDay } from "../../src/domain/Usage.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as OrgBudget from "../../src/rails/OrgBudget.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import { spendingModel } from "../support/spendModel.js"
import * as Tools from "../support/tools.js"

const acme = new Principal({ orgId: "acme", userId: "ann" })
const beta = new Principal({ orgId: "beta", userId: "bob" })
const agent = { id: "triage", version: 1, name: "Triage", instructions: "Investigate, then answer.", tools: ["echo"] }

const withCorral = <A, E>(
  providers: ReadonlyArray<ModelProvider>,
  orgBudgets: OrgBudget.Settings,
  body: (c: Corral["Type"], store: SessionStore["Type"]) => Effect.Effect<A, E>
) =>
  Effect.gen(function*() {
    const c = yield* Corral
    yield* c.publishAgent(acme, agent)
    yield* c.publishAgent(beta, agent)
    return yield* body(c, yield* SessionStore)
  }).pipe(Effect.provide(
    Corral.layer({}).pipe(
      Layer.provide(Layer.mergeAll(
        LiveEvents.layer,
        ToolRegistry.layer(Tools.all),
        Layer.succeed(Providers, Providers.fromRoutes({ default: providers }))
      )),
      Layer.provideMerge(MemoryStore.layerMemory),
      Layer.provide(Layer.succeed(OrgBudget.OrgBudgets, orgBudgets))
    )
  ))

/** What an org's sessions cost, from their views. */
const spentBy = (views: ReadonlyArray<{ readonly costMicros: number }>) =>
  views.reduce((sum, v) => sum + v.costMicros, 0)

describe("Org budgets", () => {
  // A minute before UTC midnight (the runtime's periodic timers would tick through a whole day otherwise).
  const lateInTheDay = 86_400_000 - 60_000

  it.effect("a running burst exits cost_budget at its next call; a new one is refused until the next UTC day", () =>
    Effect.zipRight(
      TestClock.setTime(lateInTheDay),
      withCorral([spendingModel(50)], { acme: { perDay: 20_000 } }, (c, store) =>
        Effect.gen(function*() {
          const v = yield* c.run(acme, { agentId: "triage", scope: "incident:1", prompt: "go" })
          expect(v.exitReason).toBe("cost_budget")
          // No call was sent whose worst case did not fit: the org never spends past its budget.
          expect(v.costMicros).toBeLessThanOrEqual(20_000)
          expect(v.costMicros).toBeGreaterThan(15_000)
          const [t] = yield* c.trajectories(acme, v.id)
          const decisions = t?.decisions ?? []
          expect(decisions.some((d) => d._tag === "org_budget")).toBe(true)
          expect(decisions.at(-1)).toMatchObject({ _tag: "exit", check: "OrgBudget", reason: "cost_budget" })
          expect(yield* store.daySpend("acme", utcDay(lateInTheDay))).toBe(v.costMicros)

          // What is left may still buy a small call: a new session gets no more than that, and stops on money too.
          const second = yield* c.run(acme, { agentId: "triage", scope: "incident:2", prompt: "again" })
          expect(second.exitReason).toBe("cost_budget")
          expect(v.costMicros + second.costMicros).toBeLessThanOrEqual(20_000)

          // Another process of the org spends the rest of the day's budget: nothing more starts.
          const spent = yield* store.daySpend("acme", utcDay(lateInTheDay))
          yield* store.settleSpend("acme", utcDay(lateInTheDay), 0, 20_000 - spent)
          const refused = yield* Effect.flip(c.start(acme, { agentId: "triage", scope: "incident:4", prompt: "again" }))
          expect(refused).toMatchObject({
            _tag: "BudgetExhausted",
            orgId: "acme",
            perDayMicros: 20_000,
            spentMicros: 20_000,
            resetsAt: "1970-01-02T00:00:00.000Z"
          })
          expect(refused.message).toContain("resets at 1970-01-02T00:00:00.000Z")
          // A follow-up of the stopped session is refused the same way, and nothing is stored.
          const before = (yield* c.turns(acme, v.id)).length
          const followUp = yield* Effect.flip(c.post(acme, v.id, "more"))
          expect(followUp._tag).toBe("BudgetExhausted")
          expect((yield* c.turns(acme, v.id)).length).toBe(before)

          // Another org is not touched (it has no budget).
          const other = yield* c.run(beta, { agentId: "triage", scope: "incident:1", prompt: "go" })
          expect(other.exitReason).not.toBe("cost_budget")

          // The next UTC day: the budget is whole again.
          yield* TestClock.setTime(86_400_000 + 1_000)
          const next = yield* c.run(acme, { agentId: "triage", scope: "incident:3", prompt: "a new day" })
          expect(next.exitReason).toBe("cost_budget")
          expect(yield* store.daySpend("acme", utcDay(86_400_000))).toBe(next.costMicros)
        }))
    ))

  it.effect("a call whose worst case does not fit what is left is sent with a lower output cap", () =>
    withCorral([spendingModel(50)], { acme: { perDay: 20_000 } }, (c) =>
      Effect.gen(function*() {
        const v = yield* c.run(acme, { agentId: "triage", scope: "incident:1", prompt: "go" })
        const [t] = yield* c.trajectories(acme, v.id)
        const granted = (t?.decisions ?? []).filter((d) => d._tag === "org_budget")
        const first = granted[0]
        expect(first).toBeDefined()
        if (first?._tag !== "org_budget") return
        // The provider's cap (2,000 tokens at $10/M: 20,000 µ$ with the input) does not fit the day's 20,000 µ$ at
        // once: the first call is granted less and goes with a lower cap, not refused.
        expect(first.call).toBe(1)
        expect(first.grantedMicros).toBeLessThan(first.wantMicros)
        expect(first.grantedMicros).toBeGreaterThan(0)
        expect(t?.modelCalls[0]?.reply?.finishReason).not.toBe("length")
      })))

  // Live: each reply takes 5 ms of real time, so the 50 sessions' calls are in flight together.
  it.live("50 sessions of one org at once never jointly pass its budget; the other org runs whole", () =>
    withCorral(
      [spendingModel(3, "spend", 5)],
      { acme: { perDay: 100_000 }, "*": { perDay: 10_000_000 } },
      (c, store) =>
        Effect.gen(function*() {
          const started = yield* Effect.forEach(
            Array.from({ length: 50 }, (_, i) => i),
            (i) => Effect.either(c.run(acme, { agentId: "triage", scope: `incident:${i}`, prompt: `go ${i}` })),
            { concurrency: "unbounded" }
          )
          const others = yield* Effect.forEach(
            [0, 1, 2],
            (i) => c.run(beta, { agentId: "triage", scope: `incident:${i}`, prompt: `go ${i}` }),
            { concurrency: "unbounded" }
          )
          const views = started.flatMap((e) => e._tag === "Right" ? [e.right] : [])
          const spent = spentBy(views)
          expect(spent).toBeLessThanOrEqual(100_000)
          // The budget did its work: some sessions were stopped by it, and most of it was used.
          expect(views.filter((v) => v.exitReason === "cost_budget").length).toBeGreaterThan(0)
          expect(spent).toBeGreaterThan(80_000)
          // Every hold was settled: the day's spend is exactly what the sessions cost.
          expect(yield* store.daySpend("acme", utcDay(Date.now()))).toBe(spent)
          expect(others.map((v) => v.exitReason)).toEqual(["completed", "completed", "completed"])
          const refused = started.flatMap((e) => e._tag === "Left" ? [e.left._tag] : [])
          expect(refused.every((tag) => tag === "BudgetExhausted")).toBe(true)
        })
    ))

  it.effect("publishing an agent of an org with a daily budget needs priced providers", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      const error = yield* Effect.flip(c.publishAgent(acme, agent))
      expect(error._tag).toBe("InvalidRequest")
      expect(JSON.stringify(error)).toContain("the daily budget of org \\\"acme\\\"")
      // An org without a budget publishes as before.
      yield* c.publishAgent(beta, agent)
    }).pipe(Effect.provide(Corral.layerMemory({
      providers: [Scripted.make({ script: [] })],
      tools: Tools.all,
      orgBudgets: { acme: { perDay: 1_000 } }
    }))))
})
