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
  costBurst: 0,
  costSession: 0,
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

  it("each built-in check fires at its bound, with the reason and the notice the trajectory keeps", () => {
    const turn = (fields: Partial<ExitPolicy.TurnFacts>): ExitPolicy.TurnFacts => ({
      calls: 1,
      repeats: 0,
      pending: 0,
      budgetRefused: 0,
      ...fields
    })
    const cases: ReadonlyArray<
      readonly [ExitPolicy.Check, Partial<ExitPolicy.Facts>, Partial<ExitPolicy.Facts>, string]
    > = [
      [
        ExitPolicy.deadline,
        { activeMs: 299_999 },
        { activeMs: 300_000 },
        "the session's active time reached activeTimeMs 300000"
      ],
      [ExitPolicy.noRoute, { providers: 1 }, { providers: 0 }, "the agent's tier routes to no provider on this host"],
      [ExitPolicy.providerExhausted, {}, { exhausted: true }, "every provider of the route is spent"],
      [
        ExitPolicy.burstLimit,
        { modelCallsBurst: 19 },
        { modelCallsBurst: 20 },
        "20 model calls in this burst reached modelCallsPerBurst 20"
      ],
      [
        ExitPolicy.sessionLimit,
        { modelCallsSession: 59 },
        { modelCallsSession: 60 },
        "60 model calls in this session reached modelCallsPerSession 60"
      ],
      [
        ExitPolicy.tokenBudget,
        { tokensSession: 1_999_999 },
        { tokensSession: 2_000_000 },
        "2000000 tokens reached the token budget 2000000"
      ],
      [
        ExitPolicy.costBudget,
        { limits: { ...Limits.defaults, costPerSession: 5_000 }, costSession: 4_999 },
        { limits: { ...Limits.defaults, costPerSession: 5_000 }, costSession: 5_000 },
        "5000 micro-dollars spent in this session reached costPerSession 5000"
      ],
      [
        ExitPolicy.repeatHalt,
        { turn: turn({ repeats: 3 }) },
        { turn: turn({ repeats: 4 }) },
        "an identical call returned the same result 4 times (repeatHaltAt 4)"
      ],
      [ExitPolicy.badToolUse, { strikes: 2 }, { strikes: 3 }, "3 strikes of bad tool use reached strikes 3"],
      [
        ExitPolicy.confirmationPending,
        { turn: turn({ pending: 0 }) },
        { turn: turn({ pending: 2 }) },
        "2 write(s) wait for a person's decision"
      ],
      [
        ExitPolicy.toolBudget,
        { turn: turn({ budgetRefused: 0 }) },
        { turn: turn({ budgetRefused: 1 }) },
        "the tool-call budget of 50 calls is spent"
      ]
    ]
    expect(cases.map(([check]) => check.name)).toEqual(ExitPolicy.names(ExitPolicy.defaults))
    expect(cases.map(([check]) => `${check.at} ${check.reason}`)).toEqual([
      "before_model deadline",
      "before_model provider_failed",
      "before_model provider_failed",
      "before_model burst_limit",
      "before_model session_limit",
      "before_model token_budget",
      "before_model cost_budget",
      "after_tools repeat_call_halt",
      "after_tools bad_tool_use",
      "after_tools confirmation_pending",
      "after_tools tool_budget"
    ])
    for (const [check, below, at, notice] of cases) {
      expect([check.name, check.fires(facts(below))]).toEqual([check.name, false])
      expect([check.name, check.fires(facts(at))]).toEqual([check.name, true])
      expect(ExitPolicy.decide(ExitPolicy.defaults, check.at, facts(at))).toEqual(
        Option.some({ check: check.name, reason: check.reason, notice })
      )
    }
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
    expect(issues(ExitPolicy.make([...ExitPolicy.builtins, completes]))).toEqual([
      `the check "done" ends with "completed": an own check ends with a halt (burst_limit, session_limit, ` +
      `tool_budget, token_budget, cost_budget, deadline, repeat_call_halt, bad_tool_use)`
    ])
    const refused = ExitPolicy.make([])
    expect(Either.isLeft(refused) && refused.left.message).toBe("the exit policy is not valid")
    expect(issues(ExitPolicy.reorder(ExitPolicy.defaults, ["nope"]))[0]).toMatch(/no check named "nope"/)
  })

  it("adds a check before a named one, and names what is wrong with an addition or an order", () => {
    const own = ExitPolicy.check({
      name: "mine",
      at: "before_model",
      reason: "burst_limit",
      fires: () => true,
      notice: "x"
    })
    const first = Either.getOrThrow(ExitPolicy.add(ExitPolicy.defaults, own, { before: "deadline" }))
    expect(ExitPolicy.names(first).slice(0, 2)).toEqual(["mine", "deadline"])
    const added = Either.getOrThrow(ExitPolicy.add(ExitPolicy.defaults, own, { before: "burst_limit" }))
    expect(ExitPolicy.names(added).slice(2, 5)).toEqual(["provider_exhausted", "mine", "burst_limit"])
    expect(ExitPolicy.decide(added, "before_model", facts())).toEqual(
      Option.some({ check: "mine", reason: "burst_limit", notice: "x" })
    )
    const issues = (result: Either.Either<ExitPolicy.ExitPolicy, { readonly issues: ReadonlyArray<unknown> }>) =>
      Either.isLeft(result) ? result.left.issues.map((i) => ({ ...(i as object) })) : []
    expect(issues(ExitPolicy.add(ExitPolicy.defaults, own, { before: "nope" }))).toEqual([
      { path: "before", message: `no check named "nope"` }
    ])
    expect(issues(ExitPolicy.make([...ExitPolicy.builtins, { ...own, builtin: true }]))).toEqual([
      { path: "exitPolicy.checks", message: `"mine" is not a built-in check` }
    ])
    expect(issues(ExitPolicy.reorder(ExitPolicy.defaults, ["deadline", "deadline"]))).toEqual([
      { path: "exitPolicy.order", message: "a check is named twice" }
    ])
    expect(issues(ExitPolicy.reorder(ExitPolicy.defaults, ["deadline", "nope"], "o"))).toEqual([
      { path: "o[1]", message: `no check named "nope"; known: ${ExitPolicy.names(ExitPolicy.defaults).join(", ")}` }
    ])
    // A reorder moves the named checks first and keeps the others in their order.
    expect(ExitPolicy.names(Either.getOrThrow(ExitPolicy.reorder(ExitPolicy.defaults, ["tool_budget", "no_route"]))))
      .toEqual([
        "tool_budget",
        "no_route",
        ...ExitPolicy.names(ExitPolicy.defaults).filter((n) => n !== "tool_budget" && n !== "no_route")
      ])
  })

  it("reads an agent's checks and order from its spec; a turn metric asked before a model call is refused", () => {
    expect(ExitPolicy.forSpec(ExitPolicy.defaults, undefined)).toEqual(Either.right(ExitPolicy.defaults))
    const ordered = ExitPolicy.forSpec(ExitPolicy.defaults, { order: ["tool_budget"] })
    expect(Either.map(ordered, (p) => ExitPolicy.names(p)[0])).toEqual(Either.right("tool_budget"))
    const early = ExitPolicy.forSpec(ExitPolicy.defaults, {
      checks: [{ name: "wide", at: "before_model", metric: "turnCalls", atLeast: 5, reason: "tool_budget" }]
    })
    expect(Either.isLeft(early) ? early.left.issues.map((i) => [i.path, i.message]) : []).toEqual([
      ["exitPolicy.checks[0].at", `the metric "turnCalls" exists only after a tool turn: use "after_tools"`]
    ])
    const repeatsEarly = ExitPolicy.forSpec(ExitPolicy.defaults, {
      checks: [{ name: "r", at: "before_model", metric: "repeats", atLeast: 2, reason: "repeat_call_halt" }]
    })
    expect(Either.isLeft(repeatsEarly)).toBe(true)
    const spec = {
      checks: [
        {
          name: "slow",
          at: "before_model" as const,
          metric: "burstMs" as const,
          atLeast: 1_000,
          reason: "deadline" as const
        },
        {
          name: "wide",
          at: "after_tools" as const,
          metric: "turnCalls" as const,
          atLeast: 3,
          reason: "tool_budget" as const,
          notice: "three calls in one turn"
        }
      ],
      order: ["slow"]
    }
    const policy = Either.getOrThrow(ExitPolicy.forSpec(ExitPolicy.defaults, spec))
    expect(ExitPolicy.names(policy)[0]).toBe("slow")
    expect(ExitPolicy.names(policy).at(-1)).toBe("wide")
    // A time is not quoted in the notice (a replay reads it on another clock); a count is.
    expect(ExitPolicy.decide(policy, "before_model", facts({ burstMs: 1_000 }))).toEqual(
      Option.some({
        check: "slow",
        reason: "deadline",
        notice: `burstMs reached the agent's check "slow" (at least 1000)`
      })
    )
    expect(ExitPolicy.decide(policy, "before_model", facts({ burstMs: 999 }))).toEqual(Option.none())
    const turn = { calls: 3, repeats: 0, pending: 0, budgetRefused: 0 }
    expect(ExitPolicy.decide(policy, "after_tools", facts({ turn }))).toEqual(
      Option.some({ check: "wide", reason: "tool_budget", notice: "three calls in one turn" })
    )
    const active = ExitPolicy.threshold({
      name: "busy",
      at: "before_model",
      metric: "activeMs",
      atLeast: 5,
      reason: "deadline"
    })
    expect(active.notice(facts({ activeMs: 7 }))).toBe(`activeMs reached the agent's check "busy" (at least 5)`)
    const counted = ExitPolicy.threshold({
      name: "calls",
      at: "before_model",
      metric: "modelCallsBurst",
      atLeast: 2,
      reason: "burst_limit"
    })
    expect(counted.notice(facts({ modelCallsBurst: 2 }))).toBe(
      `modelCallsBurst 2 reached the agent's check "calls" (at least 2)`
    )
    expect(ExitPolicy.metric(facts(), "turnCalls")).toBe(0)
    expect(ExitPolicy.metric(facts(), "repeats")).toBe(0)
    expect(ExitPolicy.metric(facts({ turn: { ...turn, repeats: 2 } }), "repeats")).toBe(2)
    expect(ExitPolicy.metric(facts({ strikes: 2 }), "strikes")).toBe(2)
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
