// A first agent: one call, one tool, a real model named by the environment (OPENAI_API_KEY, or OPENAI_BASE_URL for
// a local OpenAI-compatible server; ANTHROPIC_API_KEY). CI runs it against the fake provider.
import { Agent, ToolRegistry } from "corral"
import { Effect } from "effect"

const status = ToolRegistry.define<{ service: string }>({
  name: "status",
  description: "Health of a service.",
  parameters: { type: "object", properties: { service: { type: "string" } }, required: ["service"] },
  run: ({ service }) => Effect.succeed(`${service}: degraded`)
})

const result = await Agent.run({ prompt: "Why is checkout down?", tools: [status] })
console.log(result.exitReason, result.text)
if (result.exitReason !== "completed") process.exit(1)
