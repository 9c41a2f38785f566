/**
 * An agent's own limits bite outside the loop too (issue 15, "limits from one place"): on the approval path of the
 * session actor (tool budget, result size, tool timeout, the persistence timeout of a refusal's record) and in the
 * store writes of recovery (when a session is loaded, and at start). The agent tightens ONLY the field under test;
 * the host's ceilings stay at their defaults, which would give a visibly different outcome. The loop's side is in
 * AgentLimits.test.ts. Time is the TestClock's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import type { LimitsOverride } from "../../src/domain/Limits.js"
import { initialState } from "../../src/domain/Session.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Truncate from "../../src/rails/Truncate.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as Harness from "../../src/testing/Harness.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

/**
 * A store whose appends never answer while `hung` is set. Like the database driver, it gives up after the timeout it
 * is handed (SessionStore.appendTurn), so the time a hung write takes shows which limit the caller read.
 */
const hangingAppends = (base: SessionStore["Type"]) => {
  const state = { hung: false }
  const store: SessionStore["Type"] = {
    ...base,
    appendTurn: (sessionId, entry, at, timeoutMs) =>
      Effect.suspend(() =>
        !state.hung
          ? base.appendTurn(sessionId, entry, at, timeoutMs)
          : timeoutMs === undefined
          ? Effect.never
          // Given up on, not interrupted: appends run uninterruptibly (session/Transcript).
          : Effect.zipRight(
            Effect.sleep(timeoutMs),
            Effect.fail(new PersistenceFailed({ operation: "appendTurn", message: `no answer in ${timeoutMs} ms` }))
          )
      )
  }
  return { store, state }
}

/** Runs `self` to its end under the TestClock (100 ms steps): how it ended, and after how much clock time. */
const timed = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const startedAt = yield* TestClock.currentTimeMillis
    const exit = yield* Harness.drive(Effect.either(self), { step: "100 millis", maxSteps: 300 })
    return { exit, took: (yield* TestClock.currentTimeMillis) - startedAt }
  })

const principal = Harness.principal

/** Corral over `store`, host limits at their defaults. */
const corral = (
  store: SessionStore["Type"],
  model: Scripted.Scripted,
  handlers: ReadonlyArray<ToolRegistry.ToolHandler>
) =>
  Corral.layer().pipe(
    Layer.provide(Layer.mergeAll(
      LiveEvents.layer,
      ToolRegistry.layer(handlers),
      Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
    )),
    Layer.provide(Layer.succeed(SessionStore, store))
  )

const triage = (limits: LimitsOverride) => ({
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: ["echo", "restart"],
  finalize: "transcript" as const,
  limits
})

const restartDb = Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }])

/**
 * Runs an agent with `limits` to a pending restart, approves it, and returns the handler's record of the approved
 * call (from the trajectory of the burst that reported it).
 */
const approveRestart = (
  limits: LimitsOverride,
  restart: ToolRegistry.ToolHandler,
  script: ReadonlyArray<Scripted.Step> = [restartDb, Scripted.text("done")]
) =>
  Effect.gen(function*() {
    const store = yield* MemoryStore.makeMemory
    return yield* Effect.gen(function*() {
      const c = yield* Corral
      yield* c.publishAgent(principal, triage(limits))
      const v = yield* c.run(principal, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
      expect(v.status).toBe("awaiting_confirmation")
      const done = yield* Harness.drive(c.approve(principal, v.id, v.pending[0]?.token ?? ""), { step: "1 second" })
      expect(done.exitReason).toBe("completed")
      const trajectories = yield* c.trajectories(principal, v.id)
      return trajectories.at(-1)?.toolCalls.find((r) => r.origin === "handler")
    }).pipe(Effect.provide(corral(store, Scripted.make({ script }), [Tools.echo, restart])))
  })

describe("an agent's limits bite on the approval path (SessionActor)", () => {
  it.effect("toolCalls: an approved write past the agent's tool budget does not run", () =>
    Effect.gen(function*() {
      let runs = 0
      const restart = { ...Tools.restart, run: () => Effect.sync(() => (runs++, "restarted")) }
      // One echo spends the agent's budget of one; the write waits for approval without claiming a unit.
      const echo = Scripted.toolCalls([{ name: "echo", arguments: { q: "health" } }])
      const record = yield* approveRestart({ toolCalls: 1 }, restart, [echo, restartDb, Scripted.text("done")])
      expect(runs).toBe(0)
      expect(record).toMatchObject({ status: "not_executed", result: expect.stringContaining("budget of 1 calls") })
    }))

  it.effect("toolResultMaxBytes: an approved write's result is cut to the agent's size", () =>
    Effect.gen(function*() {
      const restart = { ...Tools.restart, run: () => Effect.succeed("restart log line\n".repeat(4_000)) }
      const record = yield* approveRestart({ toolResultMaxBytes: 1_024 }, restart)
      expect(record?.status).toBe("ok")
      expect(Truncate.utf8Length(record?.result ?? "")).toBeLessThanOrEqual(1_024)
    }))

  it.effect("toolTimeoutMs: an approved write is stopped at the agent's tool timeout", () =>
    Effect.gen(function*() {
      const restart = { ...Tools.restart, run: () => Effect.as(Effect.sleep("30 seconds"), "restarted") }
      const record = yield* approveRestart({ toolTimeoutMs: 5_000 }, restart)
      expect(record).toMatchObject({
        status: "error",
        result: "tool \"restart\" did not finish within 5000 ms; it was stopped. Try a narrower request."
      })
    }))
})

describe("persistTimeoutMs: a hung store write is bounded by the agent's value", () => {
  it.effect("in the loop: the burst stops when the store does not answer within the agent's timeout", () =>
    Effect.gen(function*() {
      const { state, store } = hangingAppends(yield* MemoryStore.makeMemory)
      state.hung = true
      const layer = Layer.mergeAll(
        LiveEvents.layer,
        ToolRegistry.layer(Tools.all),
        Layer.succeed(Providers, Providers.fromRoutes({ default: [Scripted.make({ script: [] })] }))
      ).pipe(Layer.provideMerge(Layer.succeed(SessionStore, store)))
      const { exit, took } = yield* timed(
        Harness.runBurst({ spec: Harness.agent({ limits: { persistTimeoutMs: 2_000 } }) }).pipe(Effect.provide(layer))
      )
      expect(exit).toMatchObject({ _tag: "Left", left: { _tag: "PersistenceFailed" } })
      expect(took).toBe(2_000)
    }))

  it.effect("on the approval path: a refused decision's record waits no longer than the agent's timeout", () =>
    Effect.gen(function*() {
      const { state, store } = hangingAppends(yield* MemoryStore.makeMemory)
      const model = Scripted.make({ script: [restartDb, Scripted.text("done")] })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(principal, triage({ persistTimeoutMs: 2_000 }))
        const v = yield* c.run(principal, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
        state.hung = true
        const { exit, took } = yield* timed(c.approve(principal, v.id, "forged-token"))
        expect(exit).toMatchObject({ _tag: "Left", left: { _tag: "PersistenceFailed" } })
        expect(took).toBe(2_000)
      }).pipe(Effect.provide(corral(store, model, [Tools.echo, Tools.restart])))
    }))

  it.effect("when a session is loaded: the repair of its transcript waits no longer than the agent's timeout", () =>
    Effect.gen(function*() {
      const { state, store } = hangingAppends(yield* MemoryStore.makeMemory)
      const agent = Harness.agent({ tools: ["echo"], limits: { persistTimeoutMs: 2_000 } })
      const row = Harness.session(agent, { state: { ...initialState, status: "interrupted" } })
      yield* store.putAgent(principal.orgId, agent)
      yield* store.createSession(row)
      // The process died between a turn's calls and their results: loading the session repairs the tail.
      yield* store.appendTurn(row.id, { kind: "user", text: "why?" }, 0)
      yield* store.appendTurn(row.id, {
        kind: "assistant",
        text: "",
        toolCalls: [{ id: "call_1", name: "echo", arguments: `{"q":"x"}` }],
        finishReason: "tool_calls"
      }, 0)
      const model = Scripted.make({ script: [Scripted.text("done")] })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        state.hung = true
        const { exit, took } = yield* timed(c.continue(principal, row.id, "go on"))
        expect(exit).toMatchObject({ _tag: "Left", left: { _tag: "PersistenceFailed" } })
        expect(took).toBe(2_000)
      }).pipe(Effect.provide(corral(store, model, [Tools.echo])))
    }))

  it.effect("at start: the recovery of a session a dead process left running waits no longer than its agent's timeout", () =>
    Effect.gen(function*() {
      const { state, store } = hangingAppends(yield* MemoryStore.makeMemory)
      const agent = Harness.agent({ tools: ["restart"], limits: { persistTimeoutMs: 2_000 } })
      // An approved write was running when the process died: recovery records its unknown outcome in the transcript.
      const pending = [{
        callId: "call_1",
        tool: "restart",
        arguments: `{"service":"db"}`,
        turnSeq: 2,
        dispatchedAt: 0
      }]
      yield* store.putAgent(principal.orgId, agent)
      yield* store.createSession(Harness.session(agent, { state: { ...initialState, status: "running", pending } }))
      state.hung = true
      const model = Scripted.make({ script: [] })
      const { exit, took } = yield* timed(Effect.scoped(Layer.build(corral(store, model, [Tools.restart]))))
      expect(exit).toMatchObject({ _tag: "Left", left: { _tag: "PersistenceFailed" } })
      expect(took).toBe(2_000)
    }))
})
