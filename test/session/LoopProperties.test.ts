/**
 * Property tests of the loop: for ANY scripted sequence of replies and provider faults, the invariants of
 * DESIGN §5 hold. Two bursts per case, so the session-level invariants (ceilings, sticky exhaustion) are exercised.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { ExitReason } from "../../src/domain/ExitReason.js"
import type { Turn } from "../../src/domain/Message.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Limits from "../../src/rails/Limits.js"
import * as Prompt from "../../src/session/Prompt.js"
import * as Arbitraries from "../../src/testing/Arbitraries.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Tools from "../support/tools.js"

const MARKER = "USER-TEXT-7f3a"

const scripts = Arbitraries.route(Tools.names)
const policies = Arbitraries.exitPolicy

const isExitReason = Schema.is(ExitReason)

const pairedEverywhere = (turns: ReadonlyArray<Turn>): boolean =>
  turns.every((turn, i) => {
    const entry = turn.entry
    if (entry.kind !== "assistant" || entry.toolCalls.length === 0) return true
    const next = turns[i + 1]?.entry
    return next?.kind === "tool_results" &&
      next.results.length === entry.toolCalls.length &&
      next.results.every((r, j) => r.callId === entry.toolCalls[j]?.id)
  })

describe("Loop properties (any replies, any faults)", () => {
  it.effect.prop(
    "one exit reason per burst, pairing, ceilings, one-way failover, sticky exhaustion, clean system prompt",
    { scripts, policy: policies },
    ({ policy, scripts }) =>
      Effect.gen(function*() {
        const providers = scripts.map((script, i) =>
          Scripted.make({ name: `p${i}`, script, maxAttempts: 2, timeoutMs: 30_000, whenDone: Scripted.text("done") })
        )
        // Any composition of the exit policy the invariants allow: own checks, any order.
        const spec = Harness.agent({ tools: Tools.names, exitPolicy: policy })
        const own = new Map((policy.checks ?? []).map((c) => [c.name, c]))
        const [first, second] = yield* Harness.drive(
          Harness.runBurst({ spec, prompt: `first ${MARKER}` }).pipe(
            Effect.flatMap((one) =>
              Effect.map(
                Harness.runBurst({ spec, session: one.session, history: one.messages, prompt: `again ${MARKER}` }),
                (two) => [one, two] as const
              )
            ),
            Effect.provide(Harness.layer({ providers, tools: Tools.all }))
          )
        )
        const limits = Limits.defaults
        for (const landed of [first, second]) {
          // (a) exactly one exit reason, the same everywhere it is recorded, and a report for it
          expect(isExitReason(landed.reason)).toBe(true)
          expect(landed.trajectory.exitReason).toBe(landed.reason)
          expect(landed.state.lastExitReason).toBe(landed.reason)
          expect(landed.report.exitReason).toBe(landed.reason)
          // (c) both counters move together and stay under both ceilings
          const snaps = landed.trajectory.budgets
          expect(snaps.length).toBeLessThanOrEqual(limits.modelCallsPerBurst)
          snaps.forEach((s, i) => {
            expect(s.modelCallsBurst).toBe(i + 1)
            expect(s.modelCallsSession - s.modelCallsBurst).toBe(snaps[0]!.modelCallsSession - 1)
          })
          expect(landed.state.modelCalls).toBeLessThanOrEqual(limits.modelCallsPerSession)
          // (f) exactly one exit decision, naming the check (or outcome) that ended the burst; an own check ends with
          // its reason, and only once its metric reached its threshold — it ends a burst earlier, never later
          const exits = (landed.trajectory.decisions ?? []).filter((d) => d._tag === "exit")
          expect(exits).toHaveLength(1)
          expect(exits[0]?.reason).toBe(landed.reason)
          const check = own.get(exits[0]?.check ?? "")
          if (check !== undefined) {
            expect(landed.reason).toBe(check.reason)
            if (check.metric === "modelCallsBurst") expect(snaps.length).toBe(check.atLeast)
          }
          for (const c of own.values()) {
            if (c.metric === "modelCallsBurst" && c.at === "before_model") {
              // the loop's model calls (the finalize call is gated by the same checks)
              expect(snaps.length).toBeLessThanOrEqual(c.atLeast)
            }
          }
          // (d) the failover index never decreases within a burst
          const order = landed.trajectory.modelCalls.map((a) => Number(a.provider.slice(1)))
          order.forEach((p, i) => expect(p).toBeGreaterThanOrEqual(order[i - 1] ?? 0))
        }
        // (b) pairing across the whole transcript
        expect(pairedEverywhere(second.turns)).toBe(true)
        // (c) the session counter carries across bursts
        expect(second.state.modelCalls).toBe(first.state.modelCalls + second.trajectory.budgets.length)
        // (d) the index never decreases across bursts; exhaustion is sticky and costs no model call
        expect(second.state.providerIndex).toBeGreaterThanOrEqual(first.state.providerIndex)
        if (first.state.exhausted) {
          expect(second.reason).toBe("provider_failed")
          expect(second.trajectory.modelCalls).toHaveLength(0)
          expect(second.state.exhausted).toBe(true)
        }
        // (e) the system prompt is the spec's, always: no user text, tool result or document reaches it
        for (const p of providers) {
          for (const request of p.requests) {
            expect(request.system).toBe(Prompt.system(spec))
            expect(request.system).not.toContain(MARKER)
            expect(request.system).not.toContain("echo:")
          }
        }
      }),
    { fastCheck: { numRuns: 200, seed: 20261201 }, timeout: 180_000 }
  )
})
