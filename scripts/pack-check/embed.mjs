// Embeds the packed Corral in a plain Node ESM program (no TypeScript, no tsx, no build step of its own): publish an
// agent, run one session against a scripted model with one in-process tool, and require that it completed.
import { Corral, ToolRegistry } from "corral"
import { ScriptedModel } from "corral/testing"
import { Effect } from "effect"

const me = { orgId: "acme", userId: "ops" }

const status = ToolRegistry.define({
  name: "status",
  description: "Health of a service.",
  parameters: { type: "object", properties: { service: { type: "string" } }, required: ["service"] },
  run: ({ service }) => Effect.succeed(`${service}: degraded`)
})

const model = ScriptedModel.make({
  script: [
    ScriptedModel.toolCalls([{ name: "status", arguments: { service: "db" } }]),
    ScriptedModel.text("The database is degraded.")
  ]
})

const program = Effect.gen(function*() {
  const corral = yield* Corral
  yield* corral.publishAgent(me, {
    id: "triage",
    version: 1,
    name: "Triage",
    instructions: "Find the cause of the incident.",
    tools: ["status"]
  })
  return yield* corral.run(me, { agentId: "triage", scope: "incident:INC-42", prompt: "Why is checkout down?" })
})

const session = await Effect.runPromise(
  program.pipe(Effect.provide(Corral.layerMemory({ providers: [model], tools: [status] })))
)
console.log(`exit reason: ${session.exitReason}`)
if (session.exitReason !== "completed") {
  console.error(`pack-check: expected the session to complete, it ended with ${session.exitReason}`)
  process.exit(1)
}
