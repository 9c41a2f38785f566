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
