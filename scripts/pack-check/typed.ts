// Type-checks against the shipped declarations (dist/*.d.ts) as a TypeScript user of the package would: strict,
// NodeNext, and every declaration file checked (skipLibCheck off), Corral's and Effect's alike.
import type { CorralError, SessionView } from "corral"
import { Corral, isCorralError, ToolRegistry } from "corral"
import type * as Cluster from "corral/cluster"
import type * as Mcp from "corral/mcp"
import type * as Providers from "corral/providers"
import type * as Sql from "corral/sql"
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

export const program: Effect.Effect<SessionView, CorralError, Corral> = Effect.gen(function*() {
  const corral = yield* Corral
  yield* corral.publishAgent(me, { id: "triage", version: 1, name: "Triage", instructions: "Look.", tools: ["status"] })
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

// The entry points resolve to declarations (placeholders until the public-surface work fills them).
export type Entries = [typeof Cluster, typeof Mcp, typeof Providers, typeof Sql]
