/**
 * Budget — the session's tool-call budget and token budget.
 *
 * Prevents: an agent that fans out into hundreds of tool calls (each one load on a production system) or burns
 * tokens through a storm of failed, retried responses. A tool call claims its unit BEFORE dispatch, so a call that
 * hangs or crashes has still been paid for and the ceiling (50) is never overshot. Tokens are charged on every
 * response, failed ones included, because the provider bills them either way.
 */
import { Option } from "effect"
import type { Limits } from "../domain/Limits.js"
import type { Usage } from "../domain/Usage.js"

/** What the session has used so far: tool calls dispatched and tokens charged. */
export interface Budget {
  readonly toolCalls: number
  readonly tokens: number
}

/** Nothing used yet. */
export const empty: Budget = { toolCalls: 0, tokens: 0 }

/**
 * Claims one tool-call unit before dispatch; `None` when the budget is spent (`toolCalls >= limits.toolCalls`),
 * in which case the call must not run and gets `budgetNotice` as its error result.
 */
export const claimTool = (b: Budget, limits: Limits): Option.Option<Budget> =>
  b.toolCalls >= limits.toolCalls ? Option.none() : Option.some({ ...b, toolCalls: b.toolCalls + 1 })

/**
 * Charges one response's `usage.total` (input + output tokens); never refuses — the exit policy's `token_budget`
 * check (`ExitPolicy.tokenBudget`) ends the burst before the next model call once the budget is reached.
 */
export const chargeTokens = (b: Budget, usage: Usage): Budget => ({ ...b, tokens: b.tokens + usage.total })

/** The text of the error result for a call to `name` refused because the `limit`-call budget is spent. */
export const budgetNotice = (name: string, limit: number): string =>
  `tool-call budget of ${limit} calls for this session is spent; the call to ${name} was not executed. ` +
  "Answer with what you have."
