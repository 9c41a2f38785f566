/**
 * Limits — the hard ceilings every other rail reads.
 *
 * Prevents: an agent that spins (model calls, tool calls, tokens, wall time) or floods its own context. The seeds
 * come from production incident agents: 20 model calls is more than any healthy investigation burst needed, 60 per
 * session leaves room for three follow-ups, 8 calls per turn is where models start fanning out blindly, and a
 * 60 s Retry-After cap keeps one throttled provider from parking a session for hours. Hosts and agents may only
 * TIGHTEN them (a Layer or the spec's `limits`), never loosen: the ceiling is a promise to the operator.
 */
import { Context, Effect, Either, Layer } from "effect"
import { FieldIssue, InvalidRequest } from "../domain/Errors.js"
import type { Limits as LimitsShape, LimitsOverride } from "../domain/Limits.js"
import * as Cost from "./Cost.js"

/** The seed defaults of DESIGN §6. */
export const defaults: LimitsShape = {
  modelCallsPerBurst: 20,
  modelCallsPerSession: 60,
  toolCalls: 50,
  toolCallsPerTurn: 8,
  tokens: 2_000_000,
  repeatWarnAt: 2,
  repeatHaltAt: 4,
  strikes: 3,
  emptyNudges: 2,
  retryAfterCapMs: 60_000,
  activeTimeMs: 5 * 60_000,
  toolResultMaxBytes: 16 * 1024,
  toolTimeoutMs: 60_000,
  persistTimeoutMs: 10_000,
  costPerBurst: Cost.unlimited,
  costPerSession: Cost.unlimited
}

/** The ceilings in force. A `Context.Reference`: absent from the context means the seed defaults. */
export class Limits extends Context.Reference<Limits>()("corral/rails/Limits", {
  defaultValue: (): LimitsShape => defaults
}) {}

/**
 * Applies `override` on top of `ceiling`. Fails with `InvalidRequest` listing every field that would loosen a
 * ceiling (`limits.<field>`: "at most N").
 */
export const tighten = (
  ceiling: LimitsShape,
  override: LimitsOverride | undefined,
  pathPrefix = "limits"
): Either.Either<LimitsShape, InvalidRequest> => {
  if (override === undefined) return Either.right(ceiling)
  const issues: Array<FieldIssue> = []
  const next: Record<string, number> = { ...ceiling }
  for (const [key, value] of Object.entries(override) as Array<[keyof LimitsShape, number | undefined]>) {
    if (value === undefined) continue
    if (value > ceiling[key]) {
      issues.push(
        new FieldIssue({
          path: `${pathPrefix}.${key}`,
          message: `may only tighten the ceiling: at most ${ceiling[key]}, got ${value}`
        })
      )
    } else {
      next[key] = value
    }
  }
  return issues.length > 0
    ? Either.left(new InvalidRequest({ message: "limits may only be tightened", issues }))
    : Either.right(next as LimitsShape)
}

/**
 * The limits one agent runs under: the host's ceilings tightened by the agent spec's `limits`. Every place that
 * bounds an agent's work reads this, so a tighter value in the spec is never silently ignored. Field by field the
 * tighter value wins: a value that would loosen a ceiling (refused when the spec was published, so only a spec stored
 * under a laxer host reaches here) leaves that ceiling in force, and the agent's other, tighter values still apply.
 */
export const effective = (host: LimitsShape, override: LimitsOverride | undefined): LimitsShape => {
  if (override === undefined) return host
  const next: Record<string, number> = { ...host }
  for (const [key, value] of Object.entries(override) as Array<[keyof LimitsShape, number | undefined]>) {
    if (value !== undefined && value < host[key]) next[key] = value
  }
  return next as LimitsShape
}

/**
 * A layer that tightens the ceilings for everything it provides to. Fails with `InvalidRequest` naming each field
 * that would loosen a ceiling: a host can make Corral stricter, never laxer.
 */
export const layer = (override: LimitsOverride): Layer.Layer<Limits, InvalidRequest> =>
  Layer.unwrapEffect(
    Effect.map(Effect.flatMap(Limits, (ceiling) => tighten(ceiling, override)), (limits) =>
      Layer.succeedContext(Context.make(Limits, limits)))
  )
