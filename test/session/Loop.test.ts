import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, TestClock } from "effect"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import type { Turn } from "../../src/domain/Message.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Run from "../../src/session/Run.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Tools from "../support/tools.js"

const spec = (fields: Parameters<typeof Harness.agent>[0] = {}) => Harness.agent({ tools: Tools.names, ...fields })

const run = (
  providers: ReadonlyArray<ModelProvider>,
  options: { readonly spec?: ReturnType<typeof spec>; readonly prompt?: string } = {}
) =>
  Harness.drive(
    Harness.runBurst({ spec: options.spec ?? spec(), ...(options.prompt ? { prompt: options.prompt } : {}) }).pipe(
      Effect.provide(Harness.layer({ providers, tools: Tools.all }))
    )
  )

const kinds = (turns: ReadonlyArray<Turn>) => turns.map((t) => t.entry.kind)
const calls = (n: number, name = "echo") =>
  Scripted.toolCalls(Array.from({ length: n }, (_, i) => ({ name, arguments: { q: `q${i}` } })))

const logs = Scripted.toolCalls([{ name: "logs", arguments: { q: "api" } }])

/** Pairing invariant: every assistant call has exactly one result in the next tool_results turn. */
const expectPaired = (turns: ReadonlyArray<Turn>) => {
  turns.forEach((turn, i) => {
    if (turn.entry.kind !== "assistant" || turn.entry.toolCalls.length === 0) return
    const next = turns[i + 1]?.entry
    expect(next?.kind).toBe("tool_results")
    if (next?.kind !== "tool_results") return
    expect(next.results.map((r) => r.callId)).toEqual(turn.entry.toolCalls.map((c) => c.id))
  })
}

describe("Loop: one burst reaches each exit reason", () => {
  it.effect("completed: answers after using a tool, and the model's report lands", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [calls(1), Scripted.text("Checkout fails because the DB is down.")] })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("completed")
      expect(kinds(landed.turns)).toEqual(["user", "assistant", "tool_results", "assistant"])
      expect(landed.report.source).toBe("model")
      expect(landed.state.modelCalls).toBe(3) // two loop calls + the finalize call
      expectPaired(landed.turns)
    }))

  it.effect("persists the user turn before the first model call", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.text("done")] })
      const landed = yield* run([model], { prompt: "what broke?" })
      expect(landed.turns[0]?.entry).toEqual({ kind: "user", text: "what broke?" })
      expect(landed.turns[0]?.seq).toBe(1)
      expect(model.requests[0]?.messages[0]).toEqual({ kind: "user", text: "what broke?" })
    }))

  it.effect("confirmation_pending: a write waits for approval while the reads of the same turn run", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [Scripted.toolCalls([
          { name: "restart", arguments: { service: "db" } },
          { name: "echo", arguments: { q: "status" } }
        ])]
      })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("confirmation_pending")
      const results = landed.turns.at(-1)?.entry
      expect(results?.kind).toBe("tool_results")
      if (results?.kind !== "tool_results") return
      expect(results.results.map((r) => r.status)).toEqual(["pending_confirmation", "ok"])
      expect(results.results[1]?.content).toBe("echo:status")
      expect(landed.state.status).toBe("awaiting_confirmation")
      expect(landed.state.pending).toHaveLength(1)
      expect(landed.state.pending[0]).toMatchObject({ tool: "restart", arguments: "{\"service\":\"db\"}" })
    }))

  it.effect("burst_limit: stops at the per-burst ceiling", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: Array.from({ length: 10 }, (_, i) => calls(1 + (i % 3), "echo")) })
      const landed = yield* run([model], { spec: spec({ limits: { modelCallsPerBurst: 3 } }) })
      expect(landed.reason).toBe<ExitReason>("burst_limit")
      expect(model.requests).toHaveLength(3) // no finalize call past the ceiling
      expect(landed.report.source).toBe("fallback")
    }))

  it.effect("session_limit: stops at the per-session ceiling across bursts", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: Array.from({ length: 10 }, (_, i) => Scripted.toolCalls([{ name: "echo", arguments: { q: `${i}` } }])),
        whenDone: Scripted.text("done")
      })
      const s = spec({ limits: { modelCallsPerSession: 4 } })
      const first = yield* Harness.runBurst({ spec: s, session: Harness.session(s) }).pipe(
        Effect.flatMap((landed) =>
          Effect.map(
            Harness.runBurst({ spec: s, session: landed.session, history: landed.messages }),
            (second) => [landed, second] as const
          )
        ),
        Effect.provide(Harness.layer({ providers: [model], tools: Tools.all }))
      )
      expect(first[0].reason).toBe<ExitReason>("session_limit")
      expect(first[0].state.modelCalls).toBe(4)
      expect(first[1].reason).toBe<ExitReason>("session_limit")
      expect(first[1].state.modelCalls).toBe(4)
      expect(model.requests).toHaveLength(4)
    }))

  it.effect("tool_budget: a call past the budget is not executed and the burst ends", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [calls(2), calls(2)] })
      const landed = yield* run([model], { spec: spec({ limits: { toolCalls: 3 } }) })
      expect(landed.reason).toBe<ExitReason>("tool_budget")
      const last = landed.turns.at(-1)?.entry
      if (last?.kind !== "tool_results") throw new Error("expected tool results")
      expect(last.results.map((r) => r.status)).toEqual(["ok", "not_executed"])
      expect(landed.state.toolCalls).toBe(3)
      expectPaired(landed.turns)
    }))

  it.effect("token_budget: stops once the session's tokens are spent, failed responses included", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [Scripted.fault("server", { message: "boom" }), calls(1), calls(1), calls(1)],
        maxAttempts: 3
      })
      const landed = yield* run([model], { spec: spec({ limits: { tokens: 25 } }) })
      expect(landed.reason).toBe<ExitReason>("token_budget")
      expect(landed.state.usage.total).toBeGreaterThanOrEqual(25)
    }))

  it.effect("token_budget: a failed attempt that reports usage is charged to the budget", () =>
    Effect.gen(function*() {
      // The provider bills the failed attempt (80 tokens): with the 15 of the retried reply, 95 reach the budget of
      // 90 before the second model call. Uncharged, the burst would carry on and complete.
      const model = Scripted.make({
        script: [
          Scripted.fault("server", { usage: { input: 80, output: 0 } }),
          calls(1),
          Scripted.text("done")
        ],
        maxAttempts: 3
      })
      const landed = yield* run([model], { spec: spec({ limits: { tokens: 90 } }) })
      expect(landed.reason).toBe<ExitReason>("token_budget")
      expect(model.requests).toHaveLength(2)
      expect(landed.trajectory.decisions?.find((d) => d._tag === "exit")).toMatchObject({
        check: "token_budget",
        notice: "95 tokens reached the token budget 90"
      })
    }))

  it.effect("deadline: a model call that outlives the active time ends the burst", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [calls(1), Scripted.delay(10 * 60_000, Scripted.text("late"))],
        timeoutMs: 15 * 60_000
      })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("deadline")
      expect(landed.state.activeMs).toBe(5 * 60_000)
      expectPaired(landed.turns)
    }))

  it.effect("provider_failed: every provider spent; exhaustion is sticky for the next burst", () =>
    Effect.gen(function*() {
      const a = Scripted.make({ name: "a", script: [Scripted.fault("auth")] })
      const b = Scripted.make({ name: "b", script: [Scripted.fault("quota")] })
      const s = spec()
      const [first, second] = yield* Harness.runBurst({ spec: s }).pipe(
        Effect.flatMap((landed) =>
          Effect.map(
            Harness.runBurst({ spec: s, session: landed.session, history: landed.messages }),
            (second) => [landed, second] as const
          )
        ),
        Effect.provide(Harness.layer({ providers: [a, b], tools: Tools.all }))
      )
      expect(first.reason).toBe<ExitReason>("provider_failed")
      expect(first.state).toMatchObject({ exhausted: true, providerIndex: 1 })
      expect(second.reason).toBe<ExitReason>("provider_failed")
      expect(a.requests.length + b.requests.length).toBe(2) // the second burst made no model call
    }))

  it.effect("provider_failed: a request the provider rejects as malformed ends the burst without spending the route", () =>
    Effect.gen(function*() {
      const landed = yield* run([Scripted.make({ script: [Scripted.fault("bad_request")] })])
      expect(landed.reason).toBe<ExitReason>("provider_failed")
      expect(landed.state.exhausted).toBe(false)
    }))

  it.effect("context_overflow: with nothing to prune, exits without re-sending the same request", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.fault("context_overflow")] })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("context_overflow")
      expect(model.requests).toHaveLength(1)
    }))

  it.effect("context_overflow: prunes old tool results once, retries once, then gives up", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [logs, logs, Scripted.fault("context_overflow"), Scripted.fault("context_overflow")]
      })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("context_overflow")
      const retry = model.requests[3]?.messages ?? []
      const firstResults = retry.find((m) => m.kind === "tool_results")
      if (firstResults?.kind !== "tool_results") throw new Error("expected tool results")
      expect(firstResults.results[0]?.content).toContain("pruned")
      expect(model.requests).toHaveLength(4)
    }))

  it.effect("context_overflow recovered: after one prune the retry can complete", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [logs, logs, Scripted.fault("context_overflow"), Scripted.text("done")]
      })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("completed")
    }))

  it.effect("refused: a model refusal ends the burst", () =>
    Effect.gen(function*() {
      const landed = yield* run([Scripted.make({ script: [Scripted.refused()] })])
      expect(landed.reason).toBe<ExitReason>("refused")
    }))

  it.effect("refused and filtered raised by the provider (a classified error, not a reply) end the burst so", () =>
    Effect.gen(function*() {
      const refused = yield* run([Scripted.make({ script: [Scripted.fault("refused")] })])
      expect(refused.reason).toBe<ExitReason>("refused")
      const filtered = yield* run([Scripted.make({ script: [Scripted.fault("filtered")] })])
      expect(filtered.reason).toBe<ExitReason>("filtered")
      expect(filtered.trajectory.decisions?.find((d) => d._tag === "exit")).toMatchObject({
        check: "ProviderChain",
        notice: "filtered: scripted filtered"
      })
    }))

  it.effect("filtered: a content-filtered reply ends the burst", () =>
    Effect.gen(function*() {
      const landed = yield* run([Scripted.make({ script: [Scripted.filtered()] })])
      expect(landed.reason).toBe<ExitReason>("filtered")
    }))

  it.effect("repeat_call_halt: warns at the second identical call+result and halts at the fourth", () =>
    Effect.gen(function*() {
      const same = Scripted.toolCalls([{ name: "status", arguments: { q: "db" } }])
      const model = Scripted.make({ script: [same, same, same, same, same] })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("repeat_call_halt")
      const results = landed.turns.flatMap((t) => t.entry.kind === "tool_results" ? t.entry.results : [])
      expect(results).toHaveLength(4)
      expect(results[0]?.content).toBe("all systems nominal")
      expect(results[1]?.content).toContain("all systems nominal")
      expect(results[1]?.content.length).toBeGreaterThan("all systems nominal".length)
    }))

  it.effect("repeat_call_halt: the fourth identical result halts the burst when another call follows it in the turn", () =>
    Effect.gen(function*() {
      const same = { name: "status", arguments: { q: "db" } }
      const model = Scripted.make({
        script: [
          Scripted.toolCalls([same]),
          Scripted.toolCalls([same]),
          Scripted.toolCalls([same]),
          // The fourth status call comes first; the turn's last call is a fresh one.
          Scripted.toolCalls([same, { name: "echo", arguments: { q: "other" } }]),
          Scripted.text("done")
        ]
      })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("repeat_call_halt")
      expect(kinds(landed.turns).filter((k) => k === "tool_results")).toHaveLength(4)
      const last = landed.turns.at(-1)?.entry
      if (last?.kind !== "tool_results") throw new Error("expected tool results")
      expect(last.results.map((r) => r.status)).toEqual(["ok", "ok"])
      expect(last.results[1]?.content).toBe("echo:other")
      expect(landed.trajectory.decisions?.find((d) => d._tag === "exit")).toMatchObject({
        check: "repeat_call_halt",
        notice: "an identical call returned the same result 4 times (repeatHaltAt 4)"
      })
    }))

  it.effect("bad_tool_use: three consecutive strikes (unknown tool, invalid JSON, invalid args)", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "nope", arguments: {} }]),
          Scripted.toolCalls([{ name: "echo", arguments: "{\"q\": " }]),
          Scripted.toolCalls([{ name: "echo", arguments: { q: 1 } }])
        ]
      })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("bad_tool_use")
      const texts = landed.turns.flatMap((t) => t.entry.kind === "tool_results" ? t.entry.results : [])
      expect(texts[0]?.content).toContain("unknown tool \"nope\"")
      expect(texts[1]?.content).toContain("not valid JSON")
      expect(texts[2]?.content).toContain("Re-emit the call")
    }))

  it.effect("a turn without a strike resets the strikes", () =>
    Effect.gen(function*() {
      const bad = Scripted.toolCalls([{ name: "nope", arguments: {} }])
      const model = Scripted.make({ script: [bad, bad, calls(1), bad, bad, Scripted.text("done")] })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("completed")
    }))

  it.effect("empty_exhausted: nudges twice, then exits on the third empty reply", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [Scripted.empty(), Scripted.empty(), Scripted.empty()] })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("empty_exhausted")
      expect(kinds(landed.turns)).toEqual(["user", "notice", "notice"])
    }))

  it.effect("length: drops the cut reply's tool calls and nudges", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [Scripted.length([{ name: "echo", arguments: "{\"q\":\"cut" }]), Scripted.text("done")]
      })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("completed")
      expect(kinds(landed.turns)).toEqual(["user", "assistant", "notice", "assistant"])
      const cut = landed.turns[1]?.entry
      expect(cut?.kind === "assistant" && cut.toolCalls).toEqual([])
    }))

  it.effect("cancelled: the transcript so far is kept and a report lands", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [calls(1), Scripted.delay(60_000, Scripted.text("late"))] })
      const s = spec()
      const cancel = yield* Deferred.make<void>()
      const fiber = yield* Effect.gen(function*() {
        const row = Harness.session(s)
        yield* (yield* SessionStore).createSession(row)
        return yield* Run.burst({
          session: row,
          spec: s,
          history: [],
          opening: { kind: "user", text: "go" },
          cancel
        })
      }).pipe(
        Effect.provide(Harness.layer({ providers: [model], tools: Tools.all })),
        Effect.fork
      )
      yield* TestClock.adjust("1 second")
      yield* Deferred.succeed(cancel, undefined)
      const landed = yield* Fiber.join(fiber)
      expect(landed.reason).toBe<ExitReason>("cancelled")
      expect(landed.report.exitReason).toBe("cancelled")
    }))

  it.effect("crashed: a defect inside the burst lands as crashed with a report", () =>
    Effect.gen(function*() {
      const model = Scripted.make({ script: [calls(1), Scripted.defect("provider bug")] })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("crashed")
      expect(landed.report.source).toBe("fallback")
      expect(landed.trajectory.errors.some((e) => e.code === "crashed")).toBe(true)
      expectPaired(landed.turns)
    }))

  it.effect("a tool that dies becomes an error result, not a crash", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [Scripted.toolCalls([{ name: "broken", arguments: { q: "x" } }]), Scripted.text("done")]
      })
      const landed = yield* run([model])
      expect(landed.reason).toBe<ExitReason>("completed")
      const results = landed.turns[2]?.entry
      expect(results?.kind === "tool_results" && results.results[0]?.isError).toBe(true)
    }))
})
