/**
 * corralPublish — `Corral.publishAgent`: an agent spec is validated at runtime whatever its static type, and every
 * invalid field is named at once (unknown tools and tiers, loosened limits, a cost budget over unpriced providers, a
 * bad exit policy or report schema) before anything is stored.
 */
import { Effect, Option } from "effect"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import type { InvalidRequest, PersistenceFailed } from "../../domain/Errors.js"
import { FieldIssue } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import * as Cost from "../../rails/Cost.js"
import * as ExitPolicy from "../../rails/ExitPolicy.js"
import * as Limits from "../../rails/Limits.js"
import * as OrgBudget from "../../rails/OrgBudget.js"
import type { Ports } from "./corralPorts.js"
import { invalid, issuesOf } from "./corralPorts.js"
import * as JsonSchemaCheck from "./jsonSchema.js"

/** Validates and stores an agent spec; `InvalidRequest` listing every invalid field. */
export const publishAgent = (
  ports: Ports,
  by: Principal,
  input: unknown
): Effect.Effect<AgentSpec, InvalidRequest | PersistenceFailed> =>
  Effect.gen(function*() {
    const spec = yield* ports.decodeSpec(input).pipe(
      Effect.mapError((error) => invalid("the agent spec is invalid", issuesOf(error)))
    )
    const issues: Array<FieldIssue> = []
    const known = new Set(
      (yield* ports.executor.list({ sessionId: "", principal: by, scope: "", runId: "" })).map((t) => t.name)
    )
    spec.tools.forEach((name, i) => {
      if (!known.has(name)) {
        issues.push(
          new FieldIssue({
            path: `tools.${i}`,
            message: `unknown tool "${name}"; known tools: ${[...known].sort().join(", ") || "(none)"}`
          })
        )
      }
    })
    if (Option.isNone(ports.providers.route(spec.tier))) {
      issues.push(
        new FieldIssue({
          path: "tier",
          message: `unknown tier "${spec.tier}"; configured tiers: ${ports.providers.tiers.join(", ") || "(none)"}`
        })
      )
    }
    issues.push(...limitIssues(ports, by, spec))
    const policy = ExitPolicy.forSpec(ports.hostPolicy, spec.exitPolicy)
    if (policy._tag === "Left") issues.push(...policy.left.issues)
    if (spec.reportSchema !== undefined) {
      const problem = JsonSchemaCheck.check(spec.reportSchema)
      if (problem !== undefined) {
        issues.push(new FieldIssue({ path: "reportSchema", message: `not a valid JSON Schema: ${problem}` }))
      }
    }
    if (issues.length > 0) return yield* invalid("the agent spec is invalid", issues)
    yield* ports.store.putAgent(by.orgId, spec)
    return spec
  })

/** The spec's limits against the host's ceilings, and the prices a cost budget needs. */
const limitIssues = (ports: Ports, by: Principal, spec: AgentSpec): ReadonlyArray<FieldIssue> => {
  const tightened = Limits.tighten(ports.ceiling, spec.limits)
  if (tightened._tag === "Left") return tightened.left.issues
  // A cost budget needs prices: a call to an unpriced provider would cost it nothing, and the budget would lie.
  if (!Cost.bounded(tightened.right) && OrgBudget.perDayOf(ports.orgBudgets, by.orgId) === undefined) return []
  const issues: Array<FieldIssue> = []
  for (const provider of Option.getOrElse(ports.providers.route(spec.tier), () => [])) {
    if (provider.pricing !== undefined) continue
    issues.push(
      new FieldIssue({
        path: spec.limits?.costPerSession !== undefined
          ? "limits.costPerSession"
          : spec.limits?.costPerBurst !== undefined
          ? "limits.costPerBurst"
          : "tier",
        message:
          `a cost budget applies${
            Cost.bounded(tightened.right) ? "" : ` (the daily budget of org "${by.orgId}")`
          }, but provider "${provider.name}" of tier "${spec.tier}" has no prices: give it "pricing" in the ` +
          `configuration`
      })
    )
  }
  return issues
}
