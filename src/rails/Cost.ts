/**
 * Cost — what a model attempt cost, in integer micro-dollars, and how much of a cost budget the next call may use.
 *
 * Prevents: a session (or a loop of retries) that burns money unseen. Tokens are not a price: a cached read costs a
 * tenth of an input token, a reasoning token is billed as output, one provider's token is not another's. So every
 * attempt's usage is priced at its provider's prices (failed attempts too: they were billed), and the ceilings
 * `costPerBurst` / `costPerSession` bound the spend like the token budget bounds tokens.
 *
 * Money is integers everywhere: prices are kept in picodollars per token (a price in USD per million tokens with up
 * to six decimals is exact), an attempt's cost is rounded UP to whole micro-dollars (never under-reported), and every
 * total is a sum of those integers — never a floating-point sum.
 *
 * The bound on overspend: before a call, the gate knows what was spent and the call's worst case — its input
 * (estimated high: a token per 3 characters) plus its output cap, at the highest prices of the providers the call
 * may still reach. A call whose worst case would cross the budget is sent with its output cap lowered to fit; one
 * whose input alone would cross it is not made. So a burst ends within its budget plus the estimate's error, and
 * retries of that one call (each attempt bills again) — at most one logical call past it.
 */
import type { Limits } from "../domain/Limits.js"
import type { Usage } from "../domain/Usage.js"

/** Prices of one provider, in picodollars (10⁻¹² USD) per token. */
export interface Prices {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
  readonly reasoning: number
}

/** Prices as an operator writes them: USD per million tokens. */
export interface UsdPerMTok {
  readonly inputPerMTok: number
  readonly outputPerMTok: number
  readonly cacheReadPerMTok?: number | undefined
  readonly cacheWritePerMTok?: number | undefined
  readonly reasoningPerMTok?: number | undefined
}

/** "No budget": the default of `costPerBurst` and `costPerSession` (about nine billion dollars). */
export const unlimited = Number.MAX_SAFE_INTEGER

// USD per million tokens → picodollars per token: × 10⁻⁶ (per token) × 10¹² (pico) = × 10⁶. Rounded once, here.
const pico = (usdPerMTok: number): number => Math.round(usdPerMTok * 1_000_000)

/**
 * Prices from USD per million tokens. Cache reads and writes default to the input price, reasoning to the output
 * price (what a provider that does not discount them charges).
 */
export const fromUsd = (usd: UsdPerMTok): Prices => ({
  input: pico(usd.inputPerMTok),
  output: pico(usd.outputPerMTok),
  cacheRead: pico(usd.cacheReadPerMTok ?? usd.inputPerMTok),
  cacheWrite: pico(usd.cacheWritePerMTok ?? usd.inputPerMTok),
  reasoning: pico(usd.reasoningPerMTok ?? usd.outputPerMTok)
})

/** Whether a price in USD per million tokens is exact in picodollars per token (at most six decimals). */
export const exactPrice = (usdPerMTok: number): boolean =>
  Number.isFinite(usdPerMTok) && usdPerMTok >= 0 && Math.abs(usdPerMTok * 1_000_000 - pico(usdPerMTok)) < 1e-6

const picoPerMicro = 1_000_000

/**
 * What `usage` cost at `prices`, in micro-dollars, rounded up. The parts are priced apart and never twice: cache
 * reads and writes are parts of `inputTokens`, reasoning a part of `outputTokens`.
 */
export const micros = (prices: Prices, usage: Usage): number => {
  const cached = Math.min(usage.inputTokens, usage.cacheReadTokens + usage.cacheWriteTokens)
  const reasoning = Math.min(usage.outputTokens, usage.reasoningTokens)
  const picos = (usage.inputTokens - cached) * prices.input +
    usage.cacheReadTokens * prices.cacheRead +
    usage.cacheWriteTokens * prices.cacheWrite +
    (usage.outputTokens - reasoning) * prices.output +
    reasoning * prices.reasoning
  return Math.ceil(picos / picoPerMicro)
}

/** Whether the limits bound cost at all. */
export const bounded = (limits: Limits): boolean => limits.costPerBurst < unlimited || limits.costPerSession < unlimited

/** What is left of the tighter of the two cost budgets, in micro-dollars (`unlimited` when neither is set). */
export const remaining = (limits: Limits, spentBurst: number, spentSession: number): number =>
  Math.min(limits.costPerBurst - spentBurst, limits.costPerSession - spentSession)

/** A token estimate of `characters` of text, on the high side: one token per 3 characters. */
export const estimateTokens = (characters: number): number => Math.ceil(characters / 3)

/**
 * What the next call may do within `left` micro-dollars: `None` when its input alone (`inputTokens` at the highest
 * input price) would use it up; else the largest output cap (tokens) whose worst case fits, at most `cap` when the
 * call already has one.
 */
export const fit = (
  prices: ReadonlyArray<Prices>,
  left: number,
  inputTokens: number,
  cap: number | undefined
): { readonly _tag: "None" } | { readonly _tag: "Fits"; readonly maxTokens: number | undefined } => {
  if (left >= unlimited) return { _tag: "Fits", maxTokens: cap }
  const input = Math.max(0, ...prices.map((p) => p.input))
  const output = Math.max(0, ...prices.map((p) => Math.max(p.output, p.reasoning)))
  const leftPicos = left * picoPerMicro - inputTokens * input
  if (leftPicos <= 0) return { _tag: "None" }
  if (output === 0) return { _tag: "Fits", maxTokens: cap }
  const affordable = Math.floor(leftPicos / output)
  if (affordable < 1) return { _tag: "None" }
  return { _tag: "Fits", maxTokens: cap === undefined ? affordable : Math.min(cap, affordable) }
}

/**
 * The most a call may cost: its input (`inputTokens`, an estimate) at the highest input price and `outputTokens` at
 * the highest output (or reasoning) price of `prices`, in micro-dollars rounded up.
 */
export const worstCase = (prices: ReadonlyArray<Prices>, inputTokens: number, outputTokens: number): number => {
  const input = Math.max(0, ...prices.map((p) => p.input))
  const output = Math.max(0, ...prices.map((p) => Math.max(p.output, p.reasoning)))
  return Math.ceil((inputTokens * input + outputTokens * output) / picoPerMicro)
}

/** Micro-dollars as dollars for people: `$0.012345`. */
export const usd = (micros: number): string => `$${(micros / 1_000_000).toFixed(6)}`
