// Embedding Corral with a real adapter: `OpenAiCompat` (OpenAI, Ollama, vLLM, llama.cpp, LM Studio…) over Node's HTTP
// client, pointed at the server in OPENAI_BASE_URL (the API root with its version, e.g. http://127.0.0.1:8788/v1).
// CI points it at the repository's fake provider (`npm run fake-provider`), which calls the first tool offered,
// then answers, then writes a valid report. Prints the session's exit reason; exits 1 unless it completed.
import { Corral, ToolRegistry } from "corral"
import { layerHttpClient, OpenAiCompat } from "corral/providers"
import { Effect, Redacted } from "effect"

const baseUrl = process.env.OPENAI_BASE_URL
if (baseUrl === undefined) {
  console.error("set OPENAI_BASE_URL (e.g. http://127.0.0.1:8788/v1 from `npm run fake-provider`)")
  process.exit(2)
}
const apiKey = process.env.OPENAI_API_KEY

const me = { orgId: "acme", userId: "ops" }

const status = ToolRegistry.define<{ service: string }>({
  name: "status",
  description: "Health of a service.",
  parameters: { type: "object", properties: { service: { type: "string" } }, required: ["service"] },
  run: ({ service }) => Effect.succeed(`${service}: degraded`)
})

const program = Effect.gen(function*() {
  // Build the adapter, then hand it to the in-memory runtime as the default tier. It keeps using the HttpClient it
  // was built with, so that client must outlive the sessions: provide it to the whole program, not to `make` alone
  // (a client provided to `make` only is closed as soon as `make` returns: "The client is destroyed").
  const model = yield* OpenAiCompat.make({
    name: "openai",
    baseUrl,
    model: process.env.OPENAI_MODEL ?? "fake-model",
    ...(apiKey === undefined ? {} : { apiKey: Redacted.make(apiKey) }),
    timeoutMs: 30_000
  })
  const session = yield* Effect.gen(function*() {
    const corral = yield* Corral
    yield* corral.publishAgent(me, {
      id: "triage",
      version: 1,
      name: "Triage",
      instructions: "Find the cause of the incident.",
      tools: ["status"]
    })
    return yield* corral.run(me, { agentId: "triage", scope: "incident:INC-42", prompt: "Why is checkout down?" })
  }).pipe(Effect.provide(Corral.layerMemory({ providers: [model], tools: [status] })))
  console.log(`exit reason: ${session.exitReason}`)
  console.log(`report: ${JSON.stringify(session.report?.data)}`)
  return session
})

const session = await Effect.runPromise(program.pipe(Effect.provide(layerHttpClient)))
if (session.exitReason !== "completed") process.exit(1)
