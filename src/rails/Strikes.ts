/**
 * Strikes — consecutive bad tool use.
 *
 * Prevents: a model that cannot form a valid call (hallucinated tool names, broken JSON, arguments that miss the
 * schema) burning the whole budget on error results. Each bad call is handed back with prescriptive text and
 * one chance is rarely enough, so the bound is three consecutive strikes: enough to recover from a typo and a
 * misread schema, not enough to loop. A turn with no strike resets the count — the model has shown it can recover.
 */
import type { Limits } from "../domain/Limits.js"

/**
 * Folds one turn into the running strike count: `turnStrikes` holds one flag per call (unknown tool, unparseable or
 * schema-invalid arguments). No strike in the turn → 0; otherwise the count grows by the turn's strikes and `halt`
 * is `true` once it reaches `limits.strikes` (exit `bad_tool_use`).
 */
export const observeTurn = (
  strikes: number,
  turnStrikes: ReadonlyArray<boolean>,
  limits: Limits
): { readonly strikes: number; readonly halt: boolean } => {
  const inTurn = turnStrikes.filter((strike) => strike).length
  if (inTurn === 0) return { strikes: 0, halt: false }
  const next = strikes + inTurn
  return { strikes: next, halt: next >= limits.strikes }
}
