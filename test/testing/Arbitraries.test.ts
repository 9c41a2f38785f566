/**
 * Honest generators: tool calls derived from each tool's own schema, so a property test of a tool shaped unlike the
 * demo's makes valid calls instead of passing vacuously; the stated proportions of valid, invalid and malformed
 * calls hold; overrides and the mix are honoured.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, JSONSchema, Schema } from "effect"
import type * as Scripted from "../../src/model/Scripted.js"
import * as Arbitraries from "../../src/testing/Arbitraries.js"
import * as Harness from "../../src/testing/Harness.js"
import { runScript } from "../../src/testing/runScript.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

/** A tool with a non-trivial schema: nested object, enums, an integer range, a bounded array, required fields. */
const searchLogs = ToolRegistry.define({
  name: "search_logs",
  description: "Searches a service's logs.",
  parameters: {
    type: "object",
    properties: {
      service: { type: "string", enum: ["db", "api", "web"] },
      windowMinutes: { type: "integer", minimum: 1, maximum: 60 },
      filter: {
        type: "object",
        properties: {
          level: { type: "string", enum: ["error", "warn"] },
          contains: { type: "string", minLength: 1, maxLength: 20 }
        },
        required: ["level"],
        additionalProperties: false
      },
      hosts: { type: "array", items: { type: "string", pattern: "^h[0-9]{1,3}$" }, minItems: 1, maxItems: 5 },
      sample: { type: "number", exclusiveMinimum: 0, maximum: 1 }
    },
    required: ["service", "windowMinutes", "filter", "hosts"],
    additionalProperties: false
  },
  run: () => Effect.succeed("3 matching lines")
})

const argumentsOf = (step: Scripted.Step): ReadonlyArray<Scripted.CallSpec> =>
  step._tag === "Reply"
    ? step.reply.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments }))
    : []

type Kind = "valid" | "invalid" | "malformed" | "unknownTool"
const kindOf = (tool: Arbitraries.ToolDefinition, call: Scripted.CallSpec): Kind => {
  if (call.name !== tool.name) return "unknownTool"
  let value: unknown
  try {
    value = JSON.parse(String(call.arguments))
  } catch {
    return "malformed"
  }
  return Arbitraries.accepts(tool.parameters, value) ? "valid" : "invalid"
}

const shares = (tool: Arbitraries.ToolDefinition, calls: ReadonlyArray<Scripted.CallSpec>) => {
  const counts: Record<Kind, number> = { valid: 0, invalid: 0, malformed: 0, unknownTool: 0 }
  for (const call of calls) counts[kindOf(tool, call)]++
  return Object.fromEntries(Object.entries(counts).map(([k, n]) => [k, n / calls.length])) as Record<Kind, number>
}

const scripts = (tools: Arbitraries.Tools, options?: Arbitraries.ScriptOptions) =>
  fc.sample(Arbitraries.script(tools, options), { numRuns: 200, seed: 19 })

describe("Arbitraries derive tool calls from the tools' schemas", () => {
  it("over 200 generated scripts, the calls come in the stated proportions", () => {
    const calls = scripts([searchLogs]).flatMap((s) => s.flatMap(argumentsOf))
    expect(calls.length).toBeGreaterThan(500)
    const share = shares(searchLogs, calls)
    expect(Arbitraries.callMix).toEqual({ valid: 0.8, invalid: 0.1, malformed: 0.05, unknownTool: 0.05 })
    expect(share.valid).toBeGreaterThan(0.7)
    expect(share.valid).toBeLessThan(0.9)
    expect(share.invalid).toBeGreaterThan(0.05)
    expect(share.malformed).toBeGreaterThan(0.02)
    expect(share.unknownTool).toBeGreaterThan(0.02)
    // An invalid call is an object the schema rejects, not just any JSON: the registry's argument check is probed.
    const invalid = calls.filter((c) => kindOf(searchLogs, c) === "invalid").map((c) => JSON.parse(String(c.arguments)))
    expect(invalid.every((v) => typeof v === "object" && v !== null && !Array.isArray(v))).toBe(true)
  })

  it("the legacy form (names only) never fits such a tool: that is the vacuous test definitions avoid", () => {
    const calls = scripts(["search_logs"]).flatMap((s) => s.flatMap(argumentsOf))
    expect(shares(searchLogs, calls).valid).toBe(0)
  })

  it("the mix is configurable and an override replaces the derived valid arguments", () => {
    const pinned = { service: "db", windowMinutes: 5, filter: { level: "error" }, hosts: ["h1"] }
    const calls = scripts([searchLogs], {
      mix: { valid: 0.5, invalid: 0.5 },
      overrides: { search_logs: fc.constant(pinned) }
    }).flatMap((s) => s.flatMap(argumentsOf))
    const share = shares(searchLogs, calls)
    expect(share.valid).toBeGreaterThan(0.4)
    expect(share.valid).toBeLessThan(0.6)
    expect(share.malformed + share.unknownTool).toBe(0)
    const valid = calls.filter((c) => kindOf(searchLogs, c) === "valid")
    expect(new Set(valid.map((c) => c.arguments))).toEqual(new Set([JSON.stringify(pinned)]))
  })

  it("values derived from a schema pass it, and the invalid ones fail it, for every keyword tools use", () => {
    class Window extends Schema.Class<Window>("Window")({
      from: Schema.Int.pipe(Schema.between(0, 100)),
      unit: Schema.Literal("m", "h")
    }) {}
    const fromEffect = JSONSchema.make(Schema.Struct({
      window: Window,
      tags: Schema.Array(Schema.NonEmptyString).pipe(Schema.maxItems(3)),
      mode: Schema.Union(Schema.Literal("fast"), Schema.Struct({ depth: Schema.Int.pipe(Schema.positive()) })),
      note: Schema.optional(Schema.String)
    })) as unknown as Arbitraries.ToolDefinition["parameters"]
    const schemas: ReadonlyArray<Arbitraries.ToolDefinition["parameters"]> = [
      searchLogs.parameters,
      fromEffect,
      { type: "object", properties: { k: { const: 3 }, step: { type: "number", multipleOf: 0.5, maximum: 10 } } },
      {
        type: "object",
        allOf: [
          { properties: { a: { type: "string" } }, required: ["a"] },
          { properties: { b: { type: ["integer", "null"] } }, required: ["b"] }
        ]
      },
      {
        type: "object",
        properties: { pair: { type: "array", prefixItems: [{ type: "string" }, { type: "boolean" }] } }
      },
      { type: "object", additionalProperties: { type: "integer", minimum: 0 } },
      { type: "object", properties: { ids: { type: "array", items: { type: "integer" }, uniqueItems: true } } }
    ]
    for (const parameters of schemas) {
      const tool = { name: "t", parameters }
      const calls = fc.sample(
        Arbitraries.toolCall([tool], { mix: { valid: 0.5, invalid: 0.5, malformed: 0, unknownTool: 0 } }),
        { numRuns: 300, seed: 7 }
      )
      const valid = fc.sample(Arbitraries.valueOf(parameters), { numRuns: 200, seed: 7 })
      expect(valid.filter((v) => !Arbitraries.accepts(parameters, v))).toEqual([])
      // Half are meant valid, half invalid: both kinds are there, and no invalid one slipped through as valid.
      const share = shares(tool, calls)
      expect(share.valid).toBeGreaterThan(0.4)
      expect(share.valid).toBeLessThan(0.6)
      expect(share.invalid + share.malformed).toBeGreaterThan(0.4)
    }
  })

  it.effect("through the real loop, most generated scripts make calls the registry runs", () =>
    Effect.gen(function*() {
      const spec = Harness.agent({ tools: ["search_logs"] })
      const okCalls = (batch: ReadonlyArray<ReadonlyArray<Scripted.Step>>) =>
        Effect.forEach(batch, (script) =>
          Effect.map(
            runScript({ spec, tools: [searchLogs], script }),
            (run) => run.trajectory.toolCalls.filter((c) => c.name === "search_logs" && c.status === "ok").length
          ))
      const honest = yield* okCalls(scripts([searchLogs]))
      // Most: 7 in 10 at least (a script may still open with a text answer, a fatal fault, a filtered reply).
      expect(honest.filter((n) => n > 0).length).toBeGreaterThanOrEqual(140)
      // The names-only generator, against the same tool: not one call ever reaches it.
      const legacy = yield* okCalls(scripts(["search_logs"]).slice(0, 50))
      expect(legacy.filter((n) => n > 0)).toEqual([])
    }), { timeout: 120_000 })
})
