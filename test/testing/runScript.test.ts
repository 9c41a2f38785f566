/**
 * `runScript` with several messages: one session, run then continued and approved through the real service, so the
 * rails that span bursts (per-session model calls, the tool-call budget, approvals) can be checked — by example and
 * for any script and any order of messages.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import * as Scripted from "../../src/model/Scripted.js"
import * as Arbitraries from "../../src/testing/Arbitraries.js"
import * as Harness from "../../src/testing/Harness.js"
import type { Message } from "../../src/testing/runScript.js"
import { runScript } from "../../src/testing/runScript.js"
import * as Tools from "../support/tools.js"

const echo = (q: string) => Scripted.toolCalls([{ name: "echo", arguments: { q } }])
const restart = Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }])

describe("runScript with several messages", () => {
  it.effect("the per-session model-call ceiling holds across run + continue + continue", () =>
    Effect.gen(function*() {
      const spec = Harness.agent({ tools: ["echo"], limits: { modelCallsPerSession: 7 } })
      const run = yield* runScript({
        spec,
        tools: [Tools.echo],
        script: [echo("a"), Scripted.text("one"), echo("b"), Scripted.text("two"), echo("c"), echo("d"), echo("e")],
        messages: [{ _tag: "Run" }, { _tag: "Continue", text: "and then?" }, { _tag: "Continue", text: "more" }]
      })
      expect(run.bursts.map((b) => b.view.exitReason)).toEqual(["completed", "completed", "session_limit"])
      expect(run.trajectories.map((t) => t.exitReason)).toEqual(["completed", "completed", "session_limit"])
      expect(run.view.modelCalls).toBe(7)
      // Each landing carries the turns its message added, in order.
      expect(run.bursts.map((b) => b.turns[0]?.entry)).toMatchObject([
        { kind: "user", text: "Why is checkout failing?" },
        { kind: "user", text: "and then?" },
        { kind: "user", text: "more" }
      ])
    }))

  it.effect("an approved write runs through the approval path and counts against the tool-call budget", () =>
    Effect.gen(function*() {
      const spec = Harness.agent({ tools: ["echo", "restart"], limits: { toolCalls: 2 } })
      const run = yield* runScript({
        spec,
        tools: [Tools.echo, Tools.restart],
        script: [echo("a"), restart, echo("b"), Scripted.text("done")],
        messages: [
          { _tag: "Run" },
          { _tag: "Continue", text: "restart it already" },
          { _tag: "Approve", decision: "approve" },
          { _tag: "Approve", decision: "approve" }
        ]
      })
      expect(run.outcomes.map((o) => o._tag)).toEqual(["Landed", "Refused", "Landed", "Skipped"])
      const [first, refused, approved] = run.outcomes
      expect(first?._tag === "Landed" && first.view.status).toBe("awaiting_confirmation")
      expect(refused?._tag === "Refused" && refused.error._tag).toBe("InvalidSessionState")
      if (approved?._tag !== "Landed") return expect.fail("the approval did not land")
      expect(approved.trajectory?.toolCalls.map((c) => [c.name, c.origin, c.status])).toEqual([
        ["restart", "handler", "ok"],
        ["echo", "model", "not_executed"]
      ])
      expect(approved.view.toolCalls).toBe(2)
      expect(approved.view.exitReason).toBe("tool_budget")
    }))

  it.effect("a rejected write never runs, and the session goes on", () =>
    Effect.gen(function*() {
      const spec = Harness.agent({ tools: ["echo", "restart"] })
      const run = yield* runScript({
        spec,
        tools: [Tools.echo, Tools.restart],
        script: [restart, Scripted.text("not restarting then")],
        messages: [{ _tag: "Run" }, { _tag: "Approve", decision: "reject" }]
      })
      const decided = run.bursts[1]?.trajectory?.toolCalls[0]
      expect([decided?.name, decided?.origin, decided?.status]).toEqual(["restart", "handler", "not_executed"])
      expect(run.view.exitReason).toBe("completed")
      expect(run.view.pending).toEqual([])
    }))

  const followUps: fc.Arbitrary<ReadonlyArray<Exclude<Message, { _tag: "Run" }>>> = fc.array(
    fc.oneof(
      fc.string({ minLength: 1, maxLength: 10 }).map((t) => ({ _tag: "Continue" as const, text: `more ${t}` })),
      fc.constantFrom("approve" as const, "reject" as const).map((decision) => ({ _tag: "Approve" as const, decision }))
    ),
    { minLength: 2, maxLength: 4 }
  )

  it.effect.prop(
    "over any script and any follow-ups, the per-session ceilings hold and every message is accounted for",
    { script: Arbitraries.script([Tools.echo, Tools.restart]), followUps },
    ({ followUps, script }) =>
      Effect.gen(function*() {
        const limits = { modelCallsPerSession: 6, toolCalls: 4, modelCallsPerBurst: 4 }
        const spec = Harness.agent({ tools: ["echo", "restart"], limits })
        // Counted where it matters: each time a tool body actually runs.
        let ran = 0
        const counted = (tool: typeof Tools.echo) => ({
          ...tool,
          run: (args: unknown, ctx: Parameters<typeof tool.run>[1]) =>
            Effect.suspend(() => (ran++, tool.run(args, ctx)))
        })
        const run = yield* runScript({
          spec,
          tools: [counted(Tools.echo), counted(Tools.restart)],
          script,
          messages: [{ _tag: "Run" }, ...followUps]
        })
        expect(run.outcomes).toHaveLength(1 + followUps.length)
        expect(run.view.modelCalls).toBeLessThanOrEqual(limits.modelCallsPerSession)
        expect(run.view.toolCalls).toBeLessThanOrEqual(limits.toolCalls)
        // Every tool that ran (called by the model, or approved by a person) counted against the budget (so did
        // calls refused for bad arguments: the budget bounds attempts, not only executions).
        expect(ran).toBeLessThanOrEqual(run.view.toolCalls)
        expect(run.trajectories.length).toBe(run.bursts.filter((b) => b.trajectory !== undefined).length)
        for (const burst of run.bursts) {
          expect(burst.trajectory?.exitReason).toBe(burst.view.exitReason)
          expect(burst.trajectory?.budgets.length ?? 0).toBeLessThanOrEqual(limits.modelCallsPerBurst)
        }
      }),
    { fastCheck: { numRuns: 100, seed: 19 }, timeout: 120_000 }
  )
})
