/**
 * Strikes — consecutive bad tool use.
 *
 * Prevents: a model that cannot form a valid call (hallucinated tool names, broken JSON, arguments that miss the
 * schema) burning the whole budget on error results. Each bad call is handed back with prescriptive text and
 * one chance is rarely enough, so the bound is three consecutive strikes: enough to recover from a typo and a
 * misread schema, not enough to loop. A turn with no strike resets the count — the model has shown it can recover.
 */

/**
 * Folds one turn into the running strike count: `turnStrikes` holds one flag per call (unknown tool, unparseable or
 * schema-invalid arguments). No strike in the turn → 0; otherwise the count grows by the turn's strikes. Never
 * halts by itself: the exit policy's `bad_tool_use` check (`ExitPolicy.badToolUse`) ends the burst once the count
 * reaches `limits.strikes`.
 */
export const observeTurn = (strikes: number, turnStrikes: ReadonlyArray<boolean>): number => {
  const inTurn = turnStrikes.filter((strike) => strike).length
  return inTurn === 0 ? 0 : strikes + inTurn
}
