/**
 * fast-check arbitraries of model behaviour: replies of every shape and provider faults of every kind, so a rail's
 * property can be checked against ANY sequence a real model and a real provider could produce.
 *
 * Tool calls are derived from the tools' own schemas when the tools are given as definitions (`{ name, parameters }`,
 * e.g. `ToolRegistry.define` handlers): `callMix` of the generated calls carry arguments the schema accepts, the rest
 * are schema-invalid, malformed JSON, or aimed at a tool that does not exist. Without that, a property test of a tool
 * shaped unlike the demo's passes vacuously: every call is refused before the tool runs.
 */
import { FastCheck as fc } from "effect"
import type { JsonSchema } from "../domain/AgentSpec.js"
import { ErrorKind } from "../domain/ErrorKind.js"
import type { ExitPolicySpec, ThresholdCheck } from "../domain/ExitChecks.js"
import { HaltReason } from "../domain/ExitChecks.js"
import * as Scripted from "../model/Scripted.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import * as Values from "./internal/jsonSchemaValues.js"

/** Every provider error kind. */
export const errorKinds: ReadonlyArray<ErrorKind> = ErrorKind.literals

/** A tool as the generators need it: its name and its parameters' JSON Schema (a `ToolHandler` fits). */
export interface ToolDefinition {
  readonly name: string
  readonly parameters: JsonSchema
}

/**
 * The share of each kind among generated tool calls (fractions of 1). `valid`: arguments the tool's schema accepts;
 * `invalid`: a JSON object one fault away from valid (a required field missing, a wrong type, out of range, outside
 * an enum, an unknown field); `malformed`: text that is not JSON; `unknownTool`: a name no tool has.
 */
export interface CallMix {
  readonly valid: number
  readonly invalid: number
  readonly malformed: number
  readonly unknownTool: number
}

/** The default mix: 80 % valid, 10 % schema-invalid, 5 % malformed JSON, 5 % an unknown tool. */
export const callMix: CallMix = { valid: 0.8, invalid: 0.1, malformed: 0.05, unknownTool: 0.05 }

/** Options of the schema-driven generators. */
export interface CallOptions {
  /**
   * The share of each kind of call, in place of `callMix`: kinds not named get none, and the shares are weights
   * (`{ valid: 1, invalid: 1 }` is half and half).
   */
  readonly mix?: Partial<CallMix>
  /**
   * Per tool name, the VALID arguments to use instead of ones derived from the schema (a tool whose schema says too
   * little, or values a test cares about). Invalid and malformed calls of that tool are derived from these values.
   */
  readonly overrides?: Readonly<Record<string, fc.Arbitrary<object>>>
}

/** Options of `script` and `route`. */
export interface ScriptOptions extends CallOptions {
  /** The longest script, in steps (default 30). */
  readonly maxLength?: number
}

/** What the generators accept as tools: definitions, or (the legacy form) bare names. */
export type Tools = ReadonlyArray<string | ToolDefinition>

/** Arguments the schema accepts (see `internal/jsonSchemaValues` for the subset of JSON Schema read). */
export const valueOf = (schema: JsonSchema): fc.Arbitrary<unknown> => Values.valid(schema)

/** Whether `value` passes `schema` as the tool registry checks it (ajv, non-strict). */
export const accepts = (schema: JsonSchema, value: unknown): boolean => Values.accepts(schema, value)

const legacyCall = (tools: ReadonlyArray<string>): fc.Arbitrary<Scripted.CallSpec> =>
  fc.oneof(
    fc.record({
      name: fc.constantFrom(...tools),
      arguments: fc.constantFrom("{\"q\":\"a\"}", "{\"q\":\"b\"}", "{\"service\":\"db\"}")
    }),
    fc.record({ name: fc.constantFrom("nope", "ech0", ""), arguments: fc.constant("{}") }),
    fc.record({ name: fc.constantFrom(...tools), arguments: fc.constantFrom("{\"q\":", "not json", "[1]", "{}") })
  )

const weight = (share: number) => Math.max(0, Math.round(share * 1000))

/** One tool's calls by kind; `invalid` falls back to malformed text for a schema that accepts every object. */
const callsOf = (tool: ToolDefinition, options: CallOptions) => {
  const good: fc.Arbitrary<unknown> = options.overrides?.[tool.name] ?? Values.valid(tool.parameters)
  const bad = Values.malformed(good)
  const named = (args: fc.Arbitrary<string>) => args.map((a): Scripted.CallSpec => ({ name: tool.name, arguments: a }))
  return {
    valid: named(good.map((v) => JSON.stringify(v) ?? "null")),
    invalid: named(
      fc.tuple(Values.invalid(tool.parameters, good), bad).map(([v, m]) => v === undefined ? m : JSON.stringify(v))
    ),
    malformed: named(bad)
  }
}

/**
 * A tool call aimed at one of `tools`. Given definitions, its kind is drawn in the proportions of `options.mix`
 * (default `callMix`), then its tool (evenly), then its arguments from that tool's schema or `options.overrides`.
 * Given only names (the legacy form), arguments are drawn from a fixed set (`{"q":…}`, `{"service":"db"}`, broken
 * JSON) that fits only tools shaped like the demo's; in a mixed list a bare name is a tool whose schema is
 * `{ type: "object" }`.
 */
export const toolCall = (tools: Tools, options: CallOptions = {}): fc.Arbitrary<Scripted.CallSpec> => {
  if (tools.every((t): t is string => typeof t === "string")) return legacyCall(tools)
  const mix = options.mix === undefined
    ? callMix
    : { valid: 0, invalid: 0, malformed: 0, unknownTool: 0, ...options.mix }
  const calls = tools.map((t) =>
    callsOf(typeof t === "string" ? { name: t, parameters: { type: "object" } } : t, options)
  )
  const kinds = [
    { weight: weight(mix.valid), arbitrary: fc.oneof(...calls.map((c) => c.valid)) },
    { weight: weight(mix.invalid), arbitrary: fc.oneof(...calls.map((c) => c.invalid)) },
    { weight: weight(mix.malformed), arbitrary: fc.oneof(...calls.map((c) => c.malformed)) },
    {
      weight: weight(mix.unknownTool),
      arbitrary: fc.record({ name: fc.constantFrom("nope", "ech0", ""), arguments: fc.constant("{}") })
    }
  ]
  const drawn = kinds.filter((k) => k.weight > 0)
  if (drawn.length === 0) throw new Error("Arbitraries: the call mix gives every kind of call a zero share")
  return fc.oneof(...drawn)
}

/** A provider fault of any kind, with or without a Retry-After (up to 2 minutes, beyond the 60 s cap). */
export const fault: fc.Arbitrary<Scripted.Step> = fc.record({
  kind: fc.constantFrom(...errorKinds),
  retryAfterMs: fc.option(fc.integer({ min: 0, max: 120_000 }), { nil: undefined })
}).map(({ kind, retryAfterMs }) => Scripted.fault(kind, retryAfterMs === undefined ? {} : { retryAfterMs }))

/** A reply asking for 1-10 calls of `tools` (ids possibly duplicated, as some models do). */
export const toolCallsStep = (tools: Tools, options: CallOptions = {}): fc.Arbitrary<Scripted.Step> =>
  fc.tuple(fc.array(toolCall(tools, options), { minLength: 1, maxLength: 10 }), fc.boolean()).map((
    [calls, duplicateIds]
  ) => Scripted.toolCalls(calls.map((c, i) => duplicateIds && i > 0 ? { ...c, id: "dup" } : c)))

/**
 * One scripted step: a text answer, 1-10 tool calls (possibly with duplicated ids), an empty reply, a reply cut at
 * the output limit, a filtered or refused reply, or a fault.
 */
export const step = (tools: Tools, options: CallOptions = {}): fc.Arbitrary<Scripted.Step> =>
  fc.oneof(
    { weight: 2, arbitrary: fc.string({ maxLength: 20 }).map((t) => Scripted.text(`answer ${t}`)) },
    { weight: 6, arbitrary: toolCallsStep(tools, options) },
    { weight: 1, arbitrary: fc.constant(Scripted.empty()) },
    {
      weight: 1,
      arbitrary: fc.array(toolCall(tools, options), { maxLength: 2 }).map((calls) => Scripted.length(calls))
    },
    { weight: 1, arbitrary: fc.constantFrom(Scripted.filtered(), Scripted.refused()) },
    { weight: 3, arbitrary: fault }
  )

/**
 * In scripts of tool definitions, the share that open with a tool call (the others open with any step). A model
 * given a tool mostly calls it first; and a property test of a tool is about the tool: with any step first, over
 * half the scripts end (a text answer, a fatal fault, no steps at all) before any call is made.
 */
export const opensWithCall = 0.75

const scriptOptions = (options: number | ScriptOptions | undefined): ScriptOptions =>
  typeof options === "number" ? { maxLength: options } : options ?? {}

/**
 * A script of up to `maxLength` steps (default 30). Pass the tools as definitions (`[lookup]`, not `["lookup"]`):
 * calls are then derived from their schemas (see `toolCall`), and a script has at least one step, its first a tool
 * call in `opensWithCall` of them. Bare names keep the legacy generator (0-30 steps, any first). A number as second
 * argument is the legacy `maxLength`.
 */
export const script = (
  tools: Tools,
  options?: number | ScriptOptions
): fc.Arbitrary<ReadonlyArray<Scripted.Step>> => {
  const { maxLength = 30, ...calls } = scriptOptions(options)
  const any = step(tools, calls)
  if (tools.every((t) => typeof t === "string") || maxLength < 1) return fc.array(any, { maxLength })
  return fc.oneof(
    {
      weight: weight(opensWithCall),
      arbitrary: fc.tuple(toolCallsStep(tools, calls), fc.array(any, { maxLength: maxLength - 1 })).map((
        [first, rest]
      ) => [first, ...rest])
    },
    { weight: weight(1 - opensWithCall), arbitrary: fc.array(any, { minLength: 1, maxLength }) }
  )
}

/** Scripts for 1-3 providers of one route (the failover order). */
export const route = (
  tools: Tools,
  options?: number | ScriptOptions
): fc.Arbitrary<ReadonlyArray<ReadonlyArray<Scripted.Step>>> =>
  fc.array(script(tools, options), { minLength: 1, maxLength: 3 })

/** A fault sequence: only faults, for retry and failover properties. */
export const faults = (maxLength = 10): fc.Arbitrary<ReadonlyArray<Scripted.Step>> => fc.array(fault, { maxLength })

/** An own exit check as agent-spec data (`AgentSpec.exitPolicy.checks`), with a low threshold so it bites. */
export const thresholdCheck: fc.Arbitrary<ThresholdCheck> = fc.oneof(
  fc.record({
    at: fc.constant("before_model" as const),
    metric: fc.constantFrom(
      "modelCallsBurst" as const,
      "toolCallsBurst" as const,
      "tokensBurst" as const,
      "burstMs" as const,
      "strikes" as const
    )
  }),
  fc.record({
    at: fc.constant("after_tools" as const),
    metric: fc.constantFrom("toolCallsBurst" as const, "turnCalls" as const, "repeats" as const, "strikes" as const)
  })
).chain(({ at, metric }) =>
  fc.record({
    name: fc.constant(`own-${metric.toLowerCase()}-${at.replace("_", "-")}`),
    at: fc.constant(at),
    metric: fc.constant(metric),
    atLeast: metric === "tokensBurst" || metric === "burstMs" ? fc.integer({ min: 1, max: 400 }) : fc.integer({
      min: 1,
      max: 6
    }),
    reason: fc.constantFrom(...HaltReason.literals)
  })
)

/**
 * An agent's exit policy: zero to three own checks, and an order that puts a random selection of all check names
 * (built-in and own) first — any composition the invariants allow.
 */
export const exitPolicy: fc.Arbitrary<ExitPolicySpec> = fc.uniqueArray(thresholdCheck, {
  maxLength: 3,
  selector: (c) => c.name
}).chain((checks) => {
  const names = [...ExitPolicy.builtins.map((c) => c.name), ...checks.map((c) => c.name)]
  return fc.shuffledSubarray(names).map((order): ExitPolicySpec => ({ checks, order }))
})
