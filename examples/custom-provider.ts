// A hand-written `ModelProvider`: the port every adapter implements — a name, a model, the per-attempt rules, and
// `complete`, which answers one request or fails with a CLASSIFIED `ProviderError` (its `kind` alone decides what the
// chain does: `rate_limit` is retried after its Retry-After, `auth` fails over at once…). This one is rate-limited
// once, then asks for a tool call, then answers; the landing's finalize call (a request with `responseSchema`) gets
// a JSON report. Wrap your own client (a gateway, a company proxy, an SDK) the same way.
import type { ModelProvider, ModelRequest } from "corral"
import { Corral, ProviderError, ToolRegistry, Usage } from "corral"
import { Effect } from "effect"

const me = { orgId: "acme", userId: "ops" }
const usage = new Usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 })

let calls = 0
const complete = (request: ModelRequest) =>
  Effect.suspend(() => {
    calls++
    if (request.responseSchema !== undefined) {
      const report = {
        summary: "The database is degraded.",
        findings: ["db: degraded"],
        confidence: "high",
        nextSteps: []
      }
      return Effect.succeed({
        text: JSON.stringify(report),
        toolCalls: [],
        finishReason: "stop" as const,
        usage,
        model: "mine"
      })
    }
    // Your client's failure, classified once here: a 429 with a Retry-After of 50 ms.
    if (calls === 1) {
      return Effect.fail(
        new ProviderError({ kind: "rate_limit", message: "429 slow down", status: 429, retryAfterMs: 50 })
      )
    }
    const answered = request.messages.some((entry) => entry.kind === "tool_results")
    return Effect.succeed(
      answered
        ? { text: "The database is degraded.", toolCalls: [], finishReason: "stop" as const, usage, model: "mine" }
        : {
          text: "",
          toolCalls: [{ id: "call_1", name: "status", arguments: JSON.stringify({ service: "db" }) }],
          finishReason: "tool_calls" as const,
          usage,
          model: "mine"
        }
    )
  })

const mine: ModelProvider = { name: "mine", model: "mine", timeoutMs: 10_000, maxAttempts: 3, complete }

const status = ToolRegistry.define<{ service: string }>({
  name: "status",
  description: "Health of a service.",
  parameters: { type: "object", properties: { service: { type: "string" } }, required: ["service"] },
  run: ({ service }) => Effect.succeed(`${service}: degraded`)
})

const program = Effect.gen(function*() {
  const corral = yield* Corral
  yield* corral.publishAgent(me, { id: "triage", version: 1, name: "Triage", instructions: "Look.", tools: ["status"] })
  const session = yield* corral.run(me, {
    agentId: "triage",
    scope: "incident:INC-42",
    prompt: "Why is checkout down?"
  })
  const [burst] = yield* corral.trajectories(me, session.id)
  return { session, attempts: burst?.modelCalls.map((a) => a.error?.kind ?? "ok") ?? [] }
})

const { attempts, session } = await Effect.runPromise(
  program.pipe(Effect.provide(Corral.layerMemory({ providers: [mine], tools: [status] })))
)
console.log(`exit reason: ${session.exitReason}; model attempts: ${attempts.join(", ")}`)
if (session.exitReason !== "completed" || attempts[0] !== "rate_limit") process.exit(1)
