import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Corral } from "../../src/Corral.js"
import { defineAgent } from "../../src/domain/AgentSpec.js"
import { Principal } from "../../src/domain/Principal.js"
import type { ModelProvider, ModelRequest } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import type { ToolContext } from "../../src/tools/ToolExecutor.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const ctx: ToolContext = { sessionId: "ses_1", principal: alice, scope: "s", runId: "run_1", callId: "call_1" }

/** `since` is a refinement JSON Schema cannot say (an ISO date), and `limit` has a default the tool relies on. */
const LookupArgs = Schema.Struct({
  service: Schema.String.annotations({ description: "The service to look up." }),
  limit: Schema.optionalWith(Schema.Int.pipe(Schema.between(1, 100)), { default: () => 10 }),
  since: Schema.optional(Schema.String.pipe(Schema.filter((s) => !Number.isNaN(Date.parse(s)), {
    message: () => "an ISO date, e.g. 2026-01-31"
  })))
})

const seen: Array<{ service: string; limit: number; since?: string | undefined }> = []
const lookup = ToolRegistry.define({
  name: "lookup",
  description: "Looks up a service's recent incidents.",
  parameters: LookupArgs,
  run: (args) =>
    Effect.sync(() => {
      // Typed: `args.limit` is a number (the default applied), not `unknown`.
      seen.push(args)
      return `${args.service}: ${args.limit} incidents`
    })
})

const registry = ToolRegistry.make([lookup])
const call = (args: unknown) => registry.call("lookup", JSON.stringify(args), ctx)

describe("Tools with an Effect Schema for parameters", () => {
  it.effect("the model is offered the JSON Schema derived from the Schema", () =>
    Effect.gen(function*() {
      const requests: Array<ModelRequest> = []
      const script = Scripted.make({ script: [Scripted.text("done")] })
      const recording: ModelProvider = {
        ...script,
        complete: (request) => Effect.suspend(() => (requests.push(request), script.complete(request)))
      }
      const offered = yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(
          alice,
          defineAgent({
            id: "triage",
            version: 1,
            name: "Triage",
            instructions: "Look it up.",
            tools: ["lookup"],
            finalize: "transcript"
          })
        )
        yield* c.run(alice, { agentId: "triage", scope: "s", prompt: "incidents of db?" })
        return requests[0]?.tools.find((t) => t.name === "lookup")
      }).pipe(Effect.provide(Corral.layerMemory({ providers: [recording], tools: [lookup] })))
      expect(offered?.parameters).toEqual(ToolRegistry.jsonSchemaOf(LookupArgs))
      expect(offered?.parameters).toMatchObject({
        type: "object",
        required: ["service"],
        properties: { service: { type: "string", description: "The service to look up." } },
        additionalProperties: false
      })
      expect(Object.keys(offered?.parameters.properties as object)).toEqual(["service", "limit", "since"])
      expect(JSON.stringify(offered?.parameters)).toContain(`"maximum":100`)
      expect(offered?.parameters).not.toHaveProperty("$schema")
    }))

  it.effect("a valid call runs with the decoded, typed arguments", () =>
    Effect.gen(function*() {
      seen.length = 0
      const outcome = yield* call({ service: "db" })
      expect(outcome).toMatchObject({ isError: false, content: "db: 10 incidents" })
      expect(seen).toEqual([{ service: "db", limit: 10 }])
    }))

  it.effect("invalid arguments are invalid_args naming the field, and the tool does not run", () =>
    Effect.gen(function*() {
      seen.length = 0
      const outOfRange = yield* call({ service: "db", limit: 0 })
      expect(outOfRange.failure).toBe("invalid_args")
      expect(outOfRange.content).toContain(`arguments for tool "lookup" do not match its schema`)
      expect(outOfRange.content).toMatch(/- limit: .*between 1 and 100/)
      expect(outOfRange.content).not.toContain("Expected undefined")
      // A refinement no JSON Schema says: the Schema itself decides.
      const badDate = yield* call({ service: "db", since: "yesterday-ish" })
      expect(badDate.failure).toBe("invalid_args")
      expect(badDate.content).toContain("- since: an ISO date, e.g. 2026-01-31")
      const missing = yield* call({ limit: 5, extra: true })
      expect(missing.failure).toBe("invalid_args")
      expect(missing.content).toContain("- service: is missing")
      expect(missing.content).toContain("- extra: is unexpected")
      expect(seen).toEqual([])
    }))

  it("a Schema.Class is offered as an object schema, not a top-level $ref", () => {
    class Restart extends Schema.Class<Restart>("Restart")({ service: Schema.String }) {}
    const restart = ToolRegistry.define({
      name: "restart",
      description: "Restarts a service.",
      effect: "write",
      parameters: Restart,
      run: (args) => Effect.succeed(`restarted ${args.service}`)
    })
    expect(restart.parameters).toMatchObject({ type: "object", required: ["service"] })
    expect(restart.parameters).not.toHaveProperty("$ref")
  })
})
