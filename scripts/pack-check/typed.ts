// Type-checks against the shipped declarations (dist/*.d.ts) as a TypeScript user of the package would: strict,
// NodeNext, and every declaration file checked (skipLibCheck off), Corral's and Effect's alike.
import type { CorralError, SessionView } from "corral"
import { Corral, defineAgent, isCorralError, ToolRegistry } from "corral"
import type * as Cluster from "corral/cluster"
import type * as Mcp from "corral/mcp"
import type * as Providers from "corral/providers"
import type * as Sql from "corral/sql"
import type * as Telemetry from "corral/telemetry"
import { ScriptedModel } from "corral/testing"
import type { Layer } from "effect"
import { Effect } from "effect"

const me = { orgId: "acme", userId: "ops" }

const status = ToolRegistry.define<{ service: string }>({
  name: "status",
  description: "Health of a service.",
  parameters: { type: "object", properties: { service: { type: "string" } }, required: ["service"] },
  run: ({ service }) => Effect.succeed(`${service}: degraded`)
})

// A spec written apart from the call that publishes it: checked key by key, nested objects included.
const triage = defineAgent({
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Look.",
  tools: ["status"],
  limits: { toolCalls: 5 },
  exitPolicy: {
    checks: [{ name: "tools", at: "after_tools", metric: "toolCallsBurst", atLeast: 3, reason: "tool_budget" }]
  }
})

// @ts-expect-error `toolz` is not a key of an agent spec.
export const misspelt = defineAgent({ id: "a", version: 1, name: "A", instructions: "Look.", toolz: [] })

export const misspeltLimit = defineAgent({
  id: "a",
  version: 1,
  name: "A",
  instructions: "Look.",
  // @ts-expect-error `toolz` is not a limit: the check reaches inside `limits`.
  limits: { toolz: 1 }
})

export const program: Effect.Effect<SessionView, CorralError, Corral> = Effect.gen(function*() {
  const corral = yield* Corral
  yield* corral.publishAgent(me, triage)
  return yield* corral.run(me, { agentId: "triage", scope: "incident:INC-42", prompt: "Why is checkout down?" })
})

export const layer: Layer.Layer<Corral, unknown> = Corral.layerMemory({
  providers: [ScriptedModel.make({ script: [ScriptedModel.text("The database is down.")] })],
  tools: [status]
})

export const exitReason: Effect.Effect<string, never> = program.pipe(
  Effect.provide(layer),
  Effect.map((session) => session.exitReason ?? "still running"),
  Effect.catchAll((error) => Effect.succeed(isCorralError(error) ? error._tag : "other"))
)

// @ts-expect-error: the agent id is required by the request's type.
export const refused = Effect.flatMap(Corral, (corral) => corral.run(me, { scope: "s", prompt: "p" }))

// Every entry point resolves to declarations.
export type Entries = [typeof Cluster, typeof Mcp, typeof Providers, typeof Sql, typeof Telemetry]
