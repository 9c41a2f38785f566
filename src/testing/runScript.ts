/**
 * `runScript`: one burst of an agent against scripted providers, in memory, under the TestClock.
 */
import { Effect } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { ModelProvider } from "../model/ModelProvider.js"
import * as Scripted from "../model/Scripted.js"
import type { ToolHandler } from "../tools/ToolRegistry.js"
import * as Harness from "./Harness.js"

/**
 * Runs `spec` (default: a test agent allowed every given tool) for one burst opened by `prompt`. `script` is played
 * by one scripted provider; pass `providers` instead for a failover route. Time moves on by itself while the burst
 * sleeps (backoffs, Retry-After, timeouts), so run it inside `it.effect`. Fails only with `PersistenceFailed`.
 */
export const runScript = (options: {
  readonly script?: ReadonlyArray<Scripted.Step>
  readonly providers?: ReadonlyArray<ModelProvider>
  readonly tools?: ReadonlyArray<ToolHandler>
  readonly spec?: AgentSpec
  readonly prompt?: string
}): Effect.Effect<Harness.BurstRun, PersistenceFailed> => {
  const tools = options.tools ?? []
  const providers = options.providers ?? [Scripted.make({ script: options.script ?? [] })]
  const spec = options.spec ?? Harness.agent({ tools: tools.map((t) => t.name) })
  return Harness.drive(
    Harness.runBurst({ spec, ...(options.prompt === undefined ? {} : { prompt: options.prompt }) }).pipe(
      Effect.provide(Harness.layer({ providers, tools }))
    )
  )
}
