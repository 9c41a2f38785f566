/**
 * Token usage. Charged on every response, failed ones included, so a storm of failures still spends budget.
 */
import { Schema } from "effect"

/** Tokens of one response, or a running total. */
export class Usage extends Schema.Class<Usage>("Usage")({
  inputTokens: Schema.NonNegativeInt,
  outputTokens: Schema.NonNegativeInt,
  cacheReadTokens: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 }),
  cacheWriteTokens: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 })
}) {
  /** No tokens. */
  static readonly zero = new Usage({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 })
  /**
   * The sum of two usages. Not validated again: sums of valid usages are valid (it runs for every model attempt,
   * and the Schema's check cost more than the rest of the accounting).
   */
  static add(a: Usage, b: Usage): Usage {
    return new Usage({
      inputTokens: a.inputTokens + b.inputTokens,
      outputTokens: a.outputTokens + b.outputTokens,
      cacheReadTokens: a.cacheReadTokens + b.cacheReadTokens,
      cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens
    }, true)
  }
  /** Tokens that count against a token budget (input + output). */
  get total(): number {
    return this.inputTokens + this.outputTokens
  }
}
