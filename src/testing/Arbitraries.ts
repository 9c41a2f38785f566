/**
 * fast-check arbitraries of model behaviour: replies of every shape and provider faults of every kind, so a rail's
 * property can be checked against ANY sequence a real model and a real provider could produce.
 */
import { FastCheck as fc } from "effect"
import { ErrorKind } from "../domain/ErrorKind.js"
import type { ExitPolicySpec, ThresholdCheck } from "../domain/ExitChecks.js"
import { HaltReason } from "../domain/ExitChecks.js"
import * as Scripted from "../model/Scripted.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"

/** Every provider error kind. */
export const errorKinds: ReadonlyArray<ErrorKind> = ErrorKind.literals

/** A tool call aimed at one of `tools`: valid, invalid JSON, or schema-invalid arguments, or an unknown name. */
export const toolCall = (tools: ReadonlyArray<string>): fc.Arbitrary<Scripted.CallSpec> =>
  fc.oneof(
    fc.record({
      name: fc.constantFrom(...tools),
      arguments: fc.constantFrom("{\"q\":\"a\"}", "{\"q\":\"b\"}", "{\"service\":\"db\"}")
    }),
    fc.record({ name: fc.constantFrom("nope", "ech0", ""), arguments: fc.constant("{}") }),
    fc.record({ name: fc.constantFrom(...tools), arguments: fc.constantFrom("{\"q\":", "not json", "[1]", "{}") })
  )

/** A provider fault of any kind, with or without a Retry-After (up to 2 minutes, beyond the 60 s cap). */
export const fault: fc.Arbitrary<Scripted.Step> = fc.record({
  kind: fc.constantFrom(...errorKinds),
  retryAfterMs: fc.option(fc.integer({ min: 0, max: 120_000 }), { nil: undefined })
}).map(({ kind, retryAfterMs }) => Scripted.fault(kind, retryAfterMs === undefined ? {} : { retryAfterMs }))

/**
 * One scripted step: a text answer, 1-10 tool calls (possibly with duplicated ids), an empty reply, a reply cut at
 * the output limit, a filtered or refused reply, or a fault.
 */
export const step = (tools: ReadonlyArray<string>): fc.Arbitrary<Scripted.Step> =>
  fc.oneof(
    { weight: 2, arbitrary: fc.string({ maxLength: 20 }).map((t) => Scripted.text(`answer ${t}`)) },
    {
      weight: 6,
      arbitrary: fc.tuple(fc.array(toolCall(tools), { minLength: 1, maxLength: 10 }), fc.boolean()).map((
        [calls, duplicateIds]
      ) => Scripted.toolCalls(calls.map((c, i) => duplicateIds && i > 0 ? { ...c, id: "dup" } : c)))
    },
    { weight: 1, arbitrary: fc.constant(Scripted.empty()) },
    { weight: 1, arbitrary: fc.array(toolCall(tools), { maxLength: 2 }).map((calls) => Scripted.length(calls)) },
    { weight: 1, arbitrary: fc.constantFrom(Scripted.filtered(), Scripted.refused()) },
    { weight: 3, arbitrary: fault }
  )

/** A script of up to `maxLength` steps. */
export const script = (tools: ReadonlyArray<string>, maxLength = 30): fc.Arbitrary<ReadonlyArray<Scripted.Step>> =>
  fc.array(step(tools), { maxLength })

/** Scripts for 1-3 providers of one route (the failover order). */
export const route = (
  tools: ReadonlyArray<string>,
  maxLength = 30
): fc.Arbitrary<ReadonlyArray<ReadonlyArray<Scripted.Step>>> =>
  fc.array(script(tools, maxLength), { minLength: 1, maxLength: 3 })

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
