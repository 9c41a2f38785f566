/**
 * ExitPolicy — the one ordered list of checks that can end a burst.
 *
 * Prevents two failures. First, precedence spread over the loop: when the deadline, the ceilings, the budgets, the
 * repeat guard, the strikes and the pending writes each decided in their own module which of them wins, nobody could
 * say (or change) why a burst that hit two bounds at once reported one and not the other. Here the order is data,
 * asked at the two points where a burst can end — `before_model` (before EVERY model call, the finalize call
 * included: no request reaches a provider while a check fires) and `after_tools` (after a tool turn is persisted) —
 * and the first check that fires wins. Second, forking to add a rail: a host (a `Layer`) or an agent (its spec's
 * `exitPolicy`, data) adds its own checks or reorders them, within what the invariants allow: every built-in check
 * is always present and always asked, so an own check can end a burst EARLIER, never keep one running past a
 * built-in ceiling; own checks end with a halt reason only (`domain/ExitChecks` HaltReason).
 *
 * What is not a check, and why: the model's own outcomes (`ReplyPolicy`: completed, filtered, refused, empty), a
 * provider's failure (`providerExit` below: the reply never came), the cancel signal and a defect (`session/Run`),
 * and the deadline timer that stops a call in flight (`session/Loop`; the `deadline` check here stops the next one).
 */
import { Context, Either, Layer, Option } from "effect"
import type { ErrorKind } from "../domain/ErrorKind.js"
import { FieldIssue, InvalidRequest } from "../domain/Errors.js"
import { HaltReason } from "../domain/ExitChecks.js"
import type { ExitPoint, ExitPolicySpec, Metric, ThresholdCheck } from "../domain/ExitChecks.js"
import type { ExitReason } from "../domain/ExitReason.js"
import type { Limits } from "../domain/Limits.js"

/** What a tool turn left behind, for the `after_tools` checks. */
export interface TurnFacts {
  /** The calls of the turn (the surplus beyond the per-turn cap included). */
  readonly calls: number
  /** The highest repeat count one of its calls reached (`RepeatGuard`); 0 when none ran. */
  readonly repeats: number
  /** Writes waiting for a person's decision, across the burst. */
  readonly pending: number
  /** Calls refused because the tool-call budget was spent. */
  readonly budgetRefused: number
}

/** The burst's numbers at the point a check is asked. Counts include this burst; `*Session` the whole session. */
export interface Facts {
  readonly limits: Limits
  readonly modelCallsBurst: number
  readonly modelCallsSession: number
  readonly toolCallsBurst: number
  readonly toolCallsSession: number
  readonly tokensBurst: number
  readonly tokensSession: number
  /** Micro-dollars spent on model calls in this burst, and in the session (`Cost`). */
  readonly costBurst: number
  readonly costSession: number
  /** Active time of the session, this burst so far included. */
  readonly activeMs: number
  /** Time since this burst opened. */
  readonly burstMs: number
  /** Consecutive turns' strikes of bad tool use (`Strikes`). */
  readonly strikes: number
  /** The provider route is spent (sticky). */
  readonly exhausted: boolean
  /** How many providers the agent's tier routes to on this host (0: an unknown tier). */
  readonly providers: number
  /** Set at `after_tools` only. */
  readonly turn?: TurnFacts
}

/** One check: where it is asked, whether it fires, the reason it ends the burst with, and why in words. */
export interface Check {
  readonly name: string
  readonly at: ExitPoint
  readonly reason: ExitReason
  /** A built-in ceiling: it cannot be removed, and own checks cannot take its name. */
  readonly builtin: boolean
  readonly fires: (facts: Facts) => boolean
  /** The notice the check leaves when it ends the burst (the trajectory's `exit` decision). */
  readonly notice: (facts: Facts) => string
}

/** The checks in force, in the order they are asked (per point). */
export interface ExitPolicy {
  readonly checks: ReadonlyArray<Check>
}

/** What ended the burst: the check, its reason and its notice. */
export interface Decision {
  readonly check: string
  readonly reason: ExitReason
  readonly notice: string
}

const builtin = (
  name: string,
  at: ExitPoint,
  reason: ExitReason,
  fires: (facts: Facts) => boolean,
  notice: (facts: Facts) => string
): Check => ({ name, at, reason, builtin: true, fires, notice })

/** Active time is spent (the timer in `session/Loop` stops a call in flight; this stops the next one). */
export const deadline = builtin(
  "deadline",
  "before_model",
  "deadline",
  (f) => f.activeMs >= f.limits.activeTimeMs,
  (f) => `the session's active time reached activeTimeMs ${f.limits.activeTimeMs}`
)

/**
 * The agent's tier routes to no provider on this host (it is not configured, or no longer): no request is made, no
 * call is counted, and the session is NOT marked exhausted — once the tier is configured, a follow-up works.
 */
export const noRoute = builtin(
  "no_route",
  "before_model",
  "provider_failed",
  (f) => f.providers === 0,
  () => "the agent's tier routes to no provider on this host"
)

/** Every provider of the route is spent (sticky: later bursts end here before any request). */
export const providerExhausted = builtin(
  "provider_exhausted",
  "before_model",
  "provider_failed",
  (f) => f.exhausted,
  () => "every provider of the route is spent"
)

/** The per-burst model-call ceiling. */
export const burstLimit = builtin(
  "burst_limit",
  "before_model",
  "burst_limit",
  (f) => f.modelCallsBurst >= f.limits.modelCallsPerBurst,
  (f) => `${f.modelCallsBurst} model calls in this burst reached modelCallsPerBurst ${f.limits.modelCallsPerBurst}`
)

/** The per-session model-call ceiling. */
export const sessionLimit = builtin(
  "session_limit",
  "before_model",
  "session_limit",
  (f) => f.modelCallsSession >= f.limits.modelCallsPerSession,
  (f) =>
    `${f.modelCallsSession} model calls in this session reached modelCallsPerSession ${f.limits.modelCallsPerSession}`
)

/** The session's token budget. */
export const tokenBudget = builtin(
  "token_budget",
  "before_model",
  "token_budget",
  (f) => f.tokensSession >= f.limits.tokens,
  (f) => `${f.tokensSession} tokens reached the token budget ${f.limits.tokens}`
)

/**
 * A cost budget is spent: the burst's (`costPerBurst`) or the session's (`costPerSession`), in micro-dollars. The
 * model-call gate also stops a call whose worst case would cross what is left (`Cost.fit`): this check is the
 * ceiling once it is reached.
 */
export const costBudget = builtin(
  "cost_budget",
  "before_model",
  "cost_budget",
  (f) => f.costBurst >= f.limits.costPerBurst || f.costSession >= f.limits.costPerSession,
  (f) =>
    f.costBurst >= f.limits.costPerBurst
      ? `${f.costBurst} micro-dollars spent in this burst reached costPerBurst ${f.limits.costPerBurst}`
      : `${f.costSession} micro-dollars spent in this session reached costPerSession ${f.limits.costPerSession}`
)

/** A call repeated with the same result `repeatHaltAt` times (`RepeatGuard`). */
export const repeatHalt = builtin(
  "repeat_call_halt",
  "after_tools",
  "repeat_call_halt",
  (f) => (f.turn?.repeats ?? 0) >= f.limits.repeatHaltAt,
  (f) =>
    `an identical call returned the same result ${f.turn?.repeats ?? 0} times (repeatHaltAt ${f.limits.repeatHaltAt})`
)

/** Bad tool use in consecutive turns (`Strikes`). */
export const badToolUse = builtin(
  "bad_tool_use",
  "after_tools",
  "bad_tool_use",
  (f) => f.strikes >= f.limits.strikes,
  (f) => `${f.strikes} strikes of bad tool use reached strikes ${f.limits.strikes}`
)

/** Writes wait for a person: the burst stops for them. */
export const confirmationPending = builtin(
  "confirmation_pending",
  "after_tools",
  "confirmation_pending",
  (f) => (f.turn?.pending ?? 0) > 0,
  (f) => `${f.turn?.pending ?? 0} write(s) wait for a person's decision`
)

/** The tool-call budget refused a call of this turn. */
export const toolBudget = builtin(
  "tool_budget",
  "after_tools",
  "tool_budget",
  (f) => (f.turn?.budgetRefused ?? 0) > 0,
  (f) => `the tool-call budget of ${f.limits.toolCalls} calls is spent`
)

/** The built-in checks, in Corral's default order. */
export const builtins: ReadonlyArray<Check> = [
  deadline,
  noRoute,
  providerExhausted,
  burstLimit,
  sessionLimit,
  tokenBudget,
  costBudget,
  repeatHalt,
  badToolUse,
  confirmationPending,
  toolBudget
]

/** Corral's policy: the built-ins in their default order. */
export const defaults: ExitPolicy = { checks: builtins }

/** The first check at `at` that fires, in the policy's order. */
export const decide = (policy: ExitPolicy, at: ExitPoint, facts: Facts): Option.Option<Decision> => {
  for (const check of policy.checks) {
    if (check.at === at && check.fires(facts)) {
      return Option.some({ check: check.name, reason: check.reason, notice: check.notice(facts) })
    }
  }
  return Option.none()
}

const invalid = (issues: ReadonlyArray<FieldIssue>) =>
  Either.left(new InvalidRequest({ message: "the exit policy is not valid", issues }))

/**
 * A policy from checks in the order given. Fails with `InvalidRequest` (path `exitPolicy.checks`) when a built-in
 * check is missing or changed, or a name is taken twice: every built-in ceiling is always asked.
 */
export const make = (
  checks: ReadonlyArray<Check>,
  path = "exitPolicy.checks"
): Either.Either<ExitPolicy, InvalidRequest> => {
  const issues: Array<FieldIssue> = []
  const seen = new Set<string>()
  for (const check of checks) {
    if (seen.has(check.name)) {
      issues.push(new FieldIssue({ path, message: `the check name "${check.name}" is used twice` }))
    }
    seen.add(check.name)
    const own = builtins.find((b) => b.name === check.name)
    if (own !== undefined && own !== check) {
      issues.push(new FieldIssue({ path, message: `"${check.name}" is a built-in check: it cannot be replaced` }))
    }
    if (own === undefined && check.builtin) {
      issues.push(new FieldIssue({ path, message: `"${check.name}" is not a built-in check` }))
    }
    if (own === undefined && !isHaltReason(check.reason)) {
      issues.push(
        new FieldIssue({
          path,
          message: `the check "${check.name}" ends with "${check.reason}": an own check ends with a halt (` +
            `${[...halts].join(", ")})`
        })
      )
    }
  }
  for (const b of builtins) {
    if (!seen.has(b.name)) {
      issues.push(new FieldIssue({ path, message: `the built-in check "${b.name}" cannot be removed` }))
    }
  }
  return issues.length > 0 ? invalid(issues) : Either.right({ checks })
}

/** An own check. Its reason is a halt; it can only end a burst earlier than the built-ins would. */
export const check = (options: {
  readonly name: string
  readonly at: ExitPoint
  readonly reason: HaltReason
  readonly fires: (facts: Facts) => boolean
  readonly notice: string | ((facts: Facts) => string)
}): Check => {
  const notice = options.notice
  return {
    name: options.name,
    at: options.at,
    reason: options.reason,
    builtin: false,
    fires: options.fires,
    notice: typeof notice === "string" ? () => notice : notice
  }
}

/** A metric's value in `facts` (0 for a turn metric asked before a model call). */
export const metric = (facts: Facts, name: Metric): number => {
  switch (name) {
    case "turnCalls":
      return facts.turn?.calls ?? 0
    case "repeats":
      return facts.turn?.repeats ?? 0
    default:
      return facts[name]
  }
}

/** The check of a `ThresholdCheck` (an agent spec's data). */
export const threshold = (spec: ThresholdCheck): Check =>
  check({
    name: spec.name,
    at: spec.at,
    reason: spec.reason,
    fires: (facts) => metric(facts, spec.metric) >= spec.atLeast,
    // A time is not quoted: a replay reads it on another clock (`session/Replay`); counts are exact.
    notice: (facts) =>
      spec.notice ??
        `${spec.metric}${
            spec.metric === "activeMs" || spec.metric === "burstMs" ? "" : ` ${metric(facts, spec.metric)}`
          }` +
          ` reached the agent's check "${spec.name}" (at least ${spec.atLeast})`
  })

/**
 * Adds `extra` after the checks already there (or before the check named `before`). Fails like `make`.
 */
export const add = (
  policy: ExitPolicy,
  extra: Check,
  options: { readonly before?: string } = {}
): Either.Either<ExitPolicy, InvalidRequest> => {
  if (options.before === undefined) return make([...policy.checks, extra])
  const index = policy.checks.findIndex((c) => c.name === options.before)
  if (index < 0) {
    return invalid([new FieldIssue({ path: "before", message: `no check named "${options.before}"` })])
  }
  return make([...policy.checks.slice(0, index), extra, ...policy.checks.slice(index)])
}

/**
 * Reorders: the checks named in `order` come first, in that order; the others keep their relative order after
 * them. Fails naming each unknown name (path `exitPolicy.order[i]`).
 */
export const reorder = (
  policy: ExitPolicy,
  order: ReadonlyArray<string>,
  path = "exitPolicy.order"
): Either.Either<ExitPolicy, InvalidRequest> => {
  const byName = new Map(policy.checks.map((c) => [c.name, c]))
  const issues: Array<FieldIssue> = []
  order.forEach((name, i) => {
    if (!byName.has(name)) {
      issues.push(
        new FieldIssue({
          path: `${path}[${i}]`,
          message: `no check named "${name}"; known: ${[...byName.keys()].join(", ")}`
        })
      )
    }
  })
  if (new Set(order).size !== order.length) {
    issues.push(new FieldIssue({ path, message: "a check is named twice" }))
  }
  if (issues.length > 0) return invalid(issues)
  const first = order.map((name) => byName.get(name)!)
  return make([...first, ...policy.checks.filter((c) => !order.includes(c.name))])
}

/** The host policy with an agent's own checks (appended) and order applied. Fails naming the spec's fields. */
export const forSpec = (
  policy: ExitPolicy,
  spec: ExitPolicySpec | undefined
): Either.Either<ExitPolicy, InvalidRequest> => {
  if (spec === undefined) return Either.right(policy)
  const issues: Array<FieldIssue> = []
  ;(spec.checks ?? []).forEach((c, i) => {
    if ((c.metric === "turnCalls" || c.metric === "repeats") && c.at !== "after_tools") {
      issues.push(
        new FieldIssue({
          path: `exitPolicy.checks[${i}].at`,
          message: `the metric "${c.metric}" exists only after a tool turn: use "after_tools"`
        })
      )
    }
  })
  if (issues.length > 0) return invalid(issues)
  return Either.flatMap(
    make([...policy.checks, ...(spec.checks ?? []).map(threshold)]),
    (withChecks) => spec.order === undefined ? Either.right(withChecks) : reorder(withChecks, spec.order)
  )
}

/**
 * The policy a burst runs with: the host's with the agent's own checks and order, or — when the agent's do not fit
 * the host's (a name it orders is not there) — the host's alone, with the reason (for the trajectory).
 */
export const effective = (
  host: ExitPolicy,
  spec: ExitPolicySpec | undefined
): { readonly policy: ExitPolicy; readonly problem: Option.Option<InvalidRequest> } =>
  Either.match(forSpec(host, spec), {
    onLeft: (problem) => ({ policy: host, problem: Option.some(problem) }),
    onRight: (policy) => ({ policy, problem: Option.none() })
  })

/** The names of the checks, in order (recorded in the trajectory). */
export const names = (policy: ExitPolicy): ReadonlyArray<string> => policy.checks.map((c) => c.name)

/** The host's policy in force. A `Context.Reference`: absent from the context means `defaults`. */
export class Policy extends Context.Reference<Policy>()("corral/rails/ExitPolicy", {
  defaultValue: (): ExitPolicy => defaults
}) {}

/** A layer that puts `policy` in force for everything it provides to. */
export const layer = (policy: ExitPolicy): Layer.Layer<never> => Layer.succeedContext(Context.make(Policy, policy))

/**
 * What a provider's failure ends the burst with, by kind — or `prune`: context overflow gets exactly one mechanical
 * prune and one retry (`Prune`). Kinds that retry or fail over inside the chain reach here only once it is spent.
 */
export const providerExit = (kind: ErrorKind): ExitReason | "prune" => {
  switch (kind) {
    case "context_overflow":
      return "prune"
    case "refused":
      return "refused"
    case "filtered":
      return "filtered"
    default:
      return "provider_failed"
  }
}

/**
 * Exit reasons after which the landing makes no finalize call: it would be refused (a ceiling, a budget, spent
 * providers, an overflow), wasted (the deadline), or unwanted (a cancel, a crash).
 */
export const noFinalize: ReadonlySet<ExitReason> = new Set<ExitReason>([
  "cancelled",
  "crashed",
  "provider_failed",
  "context_overflow",
  "deadline",
  "token_budget",
  "cost_budget",
  "burst_limit",
  "session_limit"
])

/** Whether a halt reason is one an own check may use. */
export const isHaltReason = (reason: ExitReason): reason is HaltReason => halts.has(reason)

// The one list of halts is the schema's (`domain/ExitChecks`), which the agent spec decodes with.
const halts: ReadonlySet<ExitReason> = new Set<ExitReason>(HaltReason.literals)
