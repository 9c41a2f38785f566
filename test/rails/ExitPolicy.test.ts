import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import * as Scripted from "../../src/model/Scripted.js"
import * as ExitPolicy from "../../src/rails/ExitPolicy.js"
import * as Limits from "../../src/rails/Limits.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Tools from "../support/tools.js"

const facts = (fields: Partial<ExitPolicy.Facts> = {}): ExitPolicy.Facts => ({
  limits: Limits.defaults,
  modelCallsBurst: 0,
  modelCallsSession: 0,
  toolCallsBurst: 0,
  toolCallsSession: 0,
  tokensBurst: 0,
  tokensSession: 0,
  activeMs: 0,
  burstMs: 0,
  strikes: 0,
  exhausted: false,
  providers: 1,
  ...fields
})

const echo = (q: string) => Scripted.toolCalls([{ name: "echo", arguments: { q } }])
const status = Scripted.toolCalls([{ name: "status", arguments: { q: "s" } }])

const run = (
  script: ReadonlyArray<Scripted.Step>,
  fields: Parameters<typeof Harness.agent>[0] = {},
  policy: ExitPolicy.ExitPolicy = ExitPolicy.defaults
) =>
  Harness.drive(
    Harness.runBurst({ spec: Harness.agent({ tools: Tools.names, ...fields }) }).pipe(
      Effect.provide(Harness.layer({ providers: [Scripted.make({ script })], tools: Tools.all })),
      Effect.provide(ExitPolicy.layer(policy))
    )
  )

const exitOf = (landed: Harness.BurstRun) => landed.trajectory.decisions?.find((d) => d._tag === "exit")

describe("ExitPolicy", () => {
  it("asks the checks of a point in order; the first that fires decides", () => {
    const both = facts({ modelCallsBurst: 20, modelCallsSession: 60 })
    expect(ExitPolicy.decide(ExitPolicy.defaults, "before_model", both)).toEqual(
      Option.some({
        check: "burst_limit",
        reason: "burst_limit",
        notice: "20 model calls in this burst reached modelCallsPerBurst 20"
      })
    )
    const sessionFirst = Either.getOrThrow(ExitPolicy.reorder(ExitPolicy.defaults, ["session_limit"]))
    expect(Option.map(ExitPolicy.decide(sessionFirst, "before_model", both), (d) => d.reason)).toEqual(
      Option.some("session_limit")
    )
    // a check is asked only at its own point
    expect(ExitPolicy.decide(ExitPolicy.defaults, "after_tools", both)).toEqual(Option.none())
  })

  it("stops the next model call exactly when the session's tokens reach the token budget", () => {
    const limits = { ...Limits.defaults, tokens: 1000 }
    const gate = (tokens: number) =>
      Option.map(
        ExitPolicy.decide(ExitPolicy.defaults, "before_model", facts({ limits, tokensSession: tokens })),
        (d) => [d.reason, d.notice]
      )
    expect(gate(999)).toEqual(Option.none())
    expect(gate(1000)).toEqual(Option.some(["token_budget", "1000 tokens reached the token budget 1000"]))
    expect(gate(5000)).toEqual(Option.some(["token_budget", "5000 tokens reached the token budget 1000"]))
  })

  it("ends the burst as bad_tool_use once the strikes reach the limit, an agent's tighter one included", () => {
    const after = (strikes: number, limits = Limits.defaults) =>
      Option.map(ExitPolicy.decide(ExitPolicy.defaults, "after_tools", facts({ limits, strikes })), (d) => d.reason)
    expect(after(2)).toEqual(Option.none())
    expect(after(3)).toEqual(Option.some("bad_tool_use"))
    expect(after(1, { ...Limits.defaults, strikes: 1 })).toEqual(Option.some("bad_tool_use"))
  })

  it("refuses a policy without a built-in, a replaced built-in, a name used twice, an own check ending as completed", () => {
    const issues = (
      result: Either.Either<ExitPolicy.ExitPolicy, { readonly issues: ReadonlyArray<{ message: string }> }>
    ) => Either.isLeft(result) ? result.left.issues.map((i) => i.message) : []
    expect(issues(ExitPolicy.make(ExitPolicy.builtins.filter((c) => c.name !== "burst_limit")))).toEqual([
      `the built-in check "burst_limit" cannot be removed`
    ])
    const loose = { ...ExitPolicy.burstLimit, fires: () => false }
    expect(issues(ExitPolicy.make(ExitPolicy.builtins.map((c) => c.name === "burst_limit" ? loose : c)))).toContain(
      `"burst_limit" is a built-in check: it cannot be replaced`
    )
    const own = ExitPolicy.check({
      name: "mine",
      at: "after_tools",
      reason: "tool_budget",
      fires: () => true,
      notice: "x"
    })
    expect(issues(ExitPolicy.make([...ExitPolicy.builtins, own, own]))).toEqual([`the check name "mine" is used twice`])
    const completes = { ...own, name: "done", reason: "completed" as const }
    expect(issues(ExitPolicy.make([...ExitPolicy.builtins, completes]))[0]).toMatch(/ends with "completed"/)
    expect(issues(ExitPolicy.reorder(ExitPolicy.defaults, ["nope"]))[0]).toMatch(/no check named "nope"/)
  })

  it.effect("an agent's own check (spec data) ends the burst earlier, with its reason and notice", () =>
    Effect.gen(function*() {
      const landed = yield* run([echo("a"), echo("b"), echo("c"), Scripted.text("done")], {
        exitPolicy: {
          checks: [{
            name: "two-lookups",
            at: "after_tools",
            metric: "toolCallsBurst",
            atLeast: 2,
            reason: "tool_budget"
          }]
        }
      })
      expect(landed.reason).toBe("tool_budget")
      expect(landed.trajectory.toolCalls).toHaveLength(2)
      expect(exitOf(landed)).toMatchObject({
        check: "two-lookups",
        reason: "tool_budget",
        notice: `toolCallsBurst 2 reached the agent's check "two-lookups" (at least 2)`
      })
      expect(landed.trajectory.replay?.policy.at(-1)).toBe("two-lookups")
    }))

  it.effect("a host's own check (a layer) applies to every agent; the order decides when two fire at once", () =>
    Effect.gen(function*() {
      // The fourth identical status call reaches the repeat halt AND the host's check on the burst's tool calls.
      const host = Either.getOrThrow(
        ExitPolicy.add(
          ExitPolicy.defaults,
          ExitPolicy.check({
            name: "four-calls",
            at: "after_tools",
            reason: "tool_budget",
            fires: (f) => f.toolCallsBurst >= 4,
            notice: "four calls are enough for triage"
          })
        )
      )
      const byDefault = yield* run([status, status, status, status], {}, host)
      expect(byDefault.reason).toBe("repeat_call_halt")
      const hostFirst = Either.getOrThrow(ExitPolicy.reorder(host, ["four-calls"]))
      const reordered = yield* run([status, status, status, status], {}, hostFirst)
      expect(reordered.reason).toBe("tool_budget")
      expect(exitOf(reordered)).toMatchObject({ check: "four-calls", notice: "four calls are enough for triage" })
    }))

  it.effect("an own check cannot keep a burst past a built-in ceiling", () =>
    Effect.gen(function*() {
      const never = ExitPolicy.check({
        name: "never",
        at: "before_model",
        reason: "burst_limit",
        fires: () => false,
        notice: "never"
      })
      const first = Either.getOrThrow(
        ExitPolicy.reorder(Either.getOrThrow(ExitPolicy.add(ExitPolicy.defaults, never)), ["never"])
      )
      const landed = yield* run(Array.from({ length: 30 }, (_, i) => echo(`q${i}`)), {
        limits: { modelCallsPerBurst: 3 }
      }, first)
      expect(landed.reason).toBe("burst_limit")
      expect(landed.trajectory.budgets).toHaveLength(3)
    }))

  it.effect("an agent's order names an unknown check: the host's policy applies and the trajectory says why", () =>
    Effect.gen(function*() {
      const landed = yield* run([Scripted.text("done")], { exitPolicy: { order: ["no-such-check"] } })
      expect(landed.reason).toBe("completed")
      expect(landed.trajectory.errors.map((e) => e.code)).toContain("exit_policy_invalid")
    }))
})
