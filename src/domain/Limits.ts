/**
 * The shape of the hard ceilings. The values and the tightening rule live in `rails/Limits`; the schema lives here
 * so an agent spec can carry its (tighter) overrides.
 */
import { Schema } from "effect"

const Bound = Schema.Int.pipe(Schema.positive({ message: () => "a positive integer" }))

/**
 * Every bound on the loop. Counts are per session unless the name says burst or turn; times are milliseconds; money
 * is integer micro-dollars (10⁻⁶ USD).
 */
export const Limits = Schema.Struct({
  modelCallsPerBurst: Bound,
  modelCallsPerSession: Bound,
  toolCalls: Bound,
  toolCallsPerTurn: Bound,
  tokens: Bound,
  repeatWarnAt: Bound,
  repeatHaltAt: Bound,
  strikes: Bound,
  emptyNudges: Bound,
  retryAfterCapMs: Bound,
  activeTimeMs: Bound,
  toolResultMaxBytes: Bound,
  toolTimeoutMs: Bound,
  persistTimeoutMs: Bound,
  /** Micro-dollars a burst may spend on model calls (`Cost`); the default (`Cost.unlimited`) is no budget. */
  costPerBurst: Bound,
  /** Micro-dollars a session may spend on model calls, across its bursts; the default is no budget. */
  costPerSession: Bound
})
export type Limits = typeof Limits.Type

/** `Limits` as stored in records older than the cost budgets: without them, they read as no budget. */
export const RecordedLimits = Schema.Struct({
  ...Limits.fields,
  costPerBurst: Schema.optionalWith(Bound, { default: () => Number.MAX_SAFE_INTEGER }),
  costPerSession: Schema.optionalWith(Bound, { default: () => Number.MAX_SAFE_INTEGER })
})

/** An agent's or a host's overrides: any subset of the limits; each may only be lower than the ceiling. */
export const LimitsOverride = Schema.partial(Limits)
export type LimitsOverride = typeof LimitsOverride.Type
