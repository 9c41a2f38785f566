/**
 * `ToolContext.sample` from an in-process tool, under the TestClock: the sampler is the session's, not MCP's, so any
 * tool of a burst can ask the session's model — counted, recorded and replayed like an MCP server's sample. Here the
 * model takes its time (scripted delays) so the sample's answer and the call's end fall on clock ticks a replay must
 * reproduce in order.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Replay from "../../src/session/Replay.js"
import * as Harness from "../../src/testing/Harness.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

/** Asks the session's model twice (the second after 1 s of its own work), and answers with both replies. */
const ask = ToolRegistry.define<{ q: string }>({
  name: "ask",
  description: "Asks the model.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  run: (args, ctx) =>
    Effect.gen(function*() {
      if (ctx.sample === undefined) return "no sampler"
      const request = { server: "ask", messages: [{ role: "user" as const, text: args.q }], maxTokens: 10 }
      const first = yield* ctx.sample(request)
      yield* Effect.sleep("1 second")
      const second = yield* ctx.sample(request)
      return `${first.text} / ${second.text}`
    })
})

describe("sampling from an in-process tool", () => {
  it.effect("the session's model answers it, both counters count it, and the stored burst replays verified", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "ask", arguments: { q: "why?" } }]),
          Scripted.delay(2_000, Scripted.text("because")),
          Scripted.delay(500, Scripted.text("indeed")),
          Scripted.text("done")
        ]
      })
      const landed = yield* Harness.drive(
        Effect.gen(function*() {
          const burst = yield* Harness.runBurst({ spec: Harness.agent({ tools: ["ask"] }) })
          const verified = yield* Effect.flatMap(
            Replay.load(Harness.principal.orgId, burst.session.id),
            (recorded) => Replay.verifySession(recorded)
          )
          return { ...burst, verified }
        }).pipe(Effect.provide(Harness.layer({ providers: [model], tools: [ask] }))),
        { step: "100 millis" }
      )
      expect(landed.reason).toBe<ExitReason>("completed")
      const result = landed.turns.flatMap((t) => t.entry.kind === "tool_results" ? t.entry.results : [])[0]
      expect(result?.content).toBe("because / indeed")
      expect(landed.state.modelCalls).toBe(5)
      expect(landed.trajectory.toolCalls[0]?.samples).toBe(2)
      expect(landed.verified.map((r) => r._tag)).toEqual(["Verified"])
    }))
})
