// A property test of your own tool, under plain Node (no test runner): fast-check (Effect's `FastCheck`) draws model
// scripts from the tool's own definition (`Arbitraries.script([lookup])`: 80 % of calls carry arguments its schema
// accepts, the rest are one fault away, malformed JSON or aimed at a tool that does not exist, plus every kind of
// provider fault), and `runScript` plays each against an agent under the TestClock (a Retry-After costs no real
// time). The properties: the tool only ever runs with arguments its Schema accepts, one report lands, the rails
// hold; and over all runs at least half of the calls made reach the tool (the generator is not vacuous).
import { ToolRegistry } from "corral"
import { Arbitraries, Harness, runScript } from "corral/testing"
import { Effect, FastCheck as fc, Schema, TestContext } from "effect"

const Args = Schema.Struct({
  service: Schema.Literal("checkout", "payments", "search"),
  limit: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100)), { default: () => 10 })
})

const seen: Array<unknown> = []
const lookup = ToolRegistry.define({
  name: "lookup",
  description: "Recent incidents of a service.",
  parameters: Args,
  run: (args) => {
    seen.push(args)
    return Effect.succeed(`${args.service}: last ${args.limit} incidents, none open`)
  }
})

const agent = Harness.agent({ tools: ["lookup"], limits: { toolCalls: 6, modelCallsPerBurst: 8 } })
let made = 0
let ran = 0

await fc.assert(
  fc.asyncProperty(Arbitraries.script([lookup]), async (script) => {
    seen.length = 0
    const run = await Effect.runPromise(
      runScript({ spec: agent, tools: [lookup], script }).pipe(Effect.provide(TestContext.TestContext))
    )
    made += run.trajectory.toolCalls.length
    ran += run.trajectory.toolCalls.filter((c) => c.status === "ok").length
    if (!seen.every(Schema.is(Args))) throw new Error(`the tool ran with arguments its schema refuses: ${seen}`)
    if (run.report.exitReason !== run.reason) throw new Error("the report does not name the burst's exit")
    if (run.state.toolCalls > 6) throw new Error(`${run.state.toolCalls} tool calls past a ceiling of 6`)
  }),
  { numRuns: 100, seed: 1 }
)

const share = made === 0 ? 0 : ran / made
console.log(`100 scripts: ${made} tool calls, ${ran} ran the tool (${Math.round(share * 100)} %)`)
if (share < 0.5) {
  console.error("expected at least half of the generated calls to reach the tool")
  process.exit(1)
}
