/**
 * The frictions a new user met in the first five minutes (issue 43), each as that user meets it: a misspelt key in
 * `defineAgent`, the fast-check the arbitraries need, one bad value reported as one line, the agent a not-found
 * error is about, and a scripted session's report after the model answered.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck } from "effect"
import { Corral, defineAgent, Principal } from "../../src/index.js"
import * as Testing from "../../src/testing/index.js"

const me = new Principal({ orgId: "acme", userId: "ops" })
const memory = (reply = "The disk is full.") =>
  Corral.layerMemory({ providers: [Testing.ScriptedModel.make({ script: [Testing.ScriptedModel.text(reply)] })] })

describe("the first five minutes", () => {
  it("defineAgent refuses a key an agent spec does not have, as publishAgent's literal does", () => {
    const spec = defineAgent({ id: "triage", version: 1, name: "Triage", instructions: "Look.", tools: [] })
    expect(spec.tools).toEqual([])
    // @ts-expect-error `toolz` is not a key of an agent spec (npm run typecheck fails if this compiles).
    const misspelt = defineAgent({ id: "triage", version: 1, name: "Triage", instructions: "Look.", toolz: [] })
    expect(misspelt.id).toBe("triage")
  })

  it("defineAgent refuses a misspelt key inside limits, mcpPrompt and an exit check too, and takes any reportSchema", () => {
    const spec = defineAgent({
      id: "triage",
      version: 1,
      name: "Triage",
      instructions: "Look.",
      limits: { toolCalls: 5 },
      mcpPrompt: { name: "docs/triage", arguments: { team: "ops" } },
      exitPolicy: {
        checks: [{ name: "tools", at: "after_tools", metric: "toolCallsBurst", atLeast: 3, reason: "tool_budget" }]
      },
      reportSchema: { type: "object", properties: { cause: { type: "string" } }, additionalProperties: false }
    })
    expect(spec.limits.toolCalls).toBe(5)
    // @ts-expect-error `toolz` is not a limit (npm run typecheck fails if this compiles)
    defineAgent({ id: "a", version: 1, name: "A", instructions: "Look.", limits: { toolz: 1 } })
    // @ts-expect-error `args` is not a key of an MCP prompt reference
    defineAgent({ id: "a", version: 1, name: "A", instructions: "Look.", mcpPrompt: { name: "docs/p", args: {} } })
    defineAgent({
      id: "a",
      version: 1,
      name: "A",
      instructions: "Look.",
      exitPolicy: {
        checks: [{
          name: "tools",
          at: "after_tools",
          metric: "toolCallsBurst",
          atLeast: 3,
          reason: "tool_budget",
          // @ts-expect-error `notes` is not a key of an exit check (it is `notice`)
          notes: "too many"
        }]
      }
    })
  })

  it("corral/testing exports the fast-check its arbitraries are built on (effect's, fast-check 3)", () => {
    expect(Testing.FastCheck).toBe(FastCheck)
    const script = Testing.Arbitraries.script(["lookup"])
    expect(Testing.FastCheck.sample(script, { numRuns: 3, seed: 1 })).toHaveLength(3)
  })

  it.effect("reports one bad value as one line, whatever union it belongs to", () =>
    Effect.gen(function*() {
      const corral = yield* Corral
      const refused = yield* Effect.flip(corral.publishAgent(me, {
        id: "triage",
        version: 1,
        name: "Triage",
        instructions: "Look.",
        // @ts-expect-error a number where a tier name goes
        tier: 5,
        exitPolicy: {
          checks: [{
            name: "x",
            at: "after_tools",
            metric: "toolCallsBurst",
            atLeast: 3,
            // @ts-expect-error not an exit reason a check may give
            reason: "nope"
          }]
        }
      }))
      expect(refused._tag).toBe("InvalidRequest")
      const issues = refused._tag === "InvalidRequest" ? refused.issues.map((i) => `${i.path}: ${i.message}`) : []
      expect(issues).toEqual([
        "tier: Expected string, actual 5",
        expect.stringMatching(/^exitPolicy\.checks\.0\.reason: Expected one of "burst_limit", .*, actual "nope"$/)
      ])
    }).pipe(Effect.provide(memory())))

  it.effect("says which agent was not found", () =>
    Effect.gen(function*() {
      const corral = yield* Corral
      const missing = yield* Effect.flip(corral.run(me, { agentId: "triage", scope: "s", prompt: "Why?" }))
      expect(missing._tag).toBe("AgentNotFound")
      expect(missing.message).toContain("\"triage\"")
    }).pipe(Effect.provide(memory())))

  it.effect("a scripted session's report says what the model answered", () =>
    Effect.gen(function*() {
      const corral = yield* Corral
      yield* corral.publishAgent(me, { id: "triage", version: 1, name: "Triage", instructions: "Look." })
      const session = yield* corral.run(me, { agentId: "triage", scope: "s", prompt: "Why is checkout down?" })
      expect(session.exitReason).toBe("completed")
      expect(session.report?.data).toMatchObject({ summary: "The model said: The disk is full." })
    }).pipe(Effect.provide(memory())))
})
