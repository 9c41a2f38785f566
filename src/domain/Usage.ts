/**
 * Token usage. Charged on every response, failed ones included, so a storm of failures still spends budget.
 *
 * `inputTokens` counts every input token the provider processed (cached or not); `cacheReadTokens` and
 * `cacheWriteTokens` say how many of them were read from or written to the provider's prompt cache.
 * `outputTokens` counts every output token billed, reasoning included (both APIs bill reasoning as output);
 * `reasoningTokens` says how many of them were reasoning. The parts are kept apart for pricing, never added twice.
 */
import { Schema } from "effect"

/** Tokens of one response, or a running total. */
export class Usage extends Schema.Class<Usage>("Usage")({
  inputTokens: Schema.NonNegativeInt,
  outputTokens: Schema.NonNegativeInt,
  cacheReadTokens: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 }),
  cacheWriteTokens: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 }),
  reasoningTokens: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 })
}) {
  /** No tokens. */
  static readonly zero = new Usage({
    inputTokens: 0,
    outputTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
    reasoningTokens: 0
  })
  /**
   * The sum of two usages. Not validated again: sums of valid usages are valid (it runs for every model attempt,
   * and the Schema's check cost more than the rest of the accounting).
   */
  static add(a: Usage, b: Usage): Usage {
    return new Usage({
      inputTokens: a.inputTokens + b.inputTokens,
      outputTokens: a.outputTokens + b.outputTokens,
      cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
      cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
      reasoningTokens: a.reasoningTokens + b.reasoningTokens
    }, true)
  }
  /** Tokens that count against a token budget (input + output; output includes reasoning). */
  get total(): number {
    return this.inputTokens + this.outputTokens
  }
}

/** The UTC day of an epoch-millisecond time, `YYYY-MM-DD`: the day of the usage ledger. */
export const utcDay = (millis: number): string => new Date(millis).toISOString().slice(0, 10)

/**
 * One line of an org's usage ledger (`GET /v1/usage`): what the model attempts of one agent at one provider cost on
 * one UTC day — every attempt, failed ones included. Token counts as in `Usage`; `costMicros` in integer
 * micro-dollars (0 for a provider without prices).
 */
export const UsageRow = Schema.Struct({
  /** The UTC day the attempts started, `YYYY-MM-DD`. */
  day: Schema.String,
  agentId: Schema.String,
  provider: Schema.String,
  model: Schema.String,
  attempts: Schema.NonNegativeInt,
  inputTokens: Schema.NonNegativeInt,
  outputTokens: Schema.NonNegativeInt,
  cacheReadTokens: Schema.NonNegativeInt,
  cacheWriteTokens: Schema.NonNegativeInt,
  reasoningTokens: Schema.NonNegativeInt,
  costMicros: Schema.NonNegativeInt
}).annotations({ identifier: "UsageRow" })
export type UsageRow = typeof UsageRow.Type

/**
 * One org's tally for one UTC day under a daily budget (`rails/OrgBudget`), in micro-dollars: what its settled calls
 * cost, and what the calls in flight hold.
 */
export interface OrgDayTally {
  readonly spentMicros: number
  readonly heldMicros: number
}
