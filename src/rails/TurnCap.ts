/**
 * TurnCap — at most `toolCallsPerTurn` (8) tool calls are executed per turn.
 *
 * Prevents: a model fanning out blindly — dozens of parallel queries in one turn, loading production systems and
 * flooding its own context before it has read a single result. Eight is where incident agents stopped choosing
 * calls and started enumerating. The surplus is not silently dropped: each gets an error result (so pairing holds)
 * telling the model it was not run and may be re-issued.
 */
import type { Limits } from "../domain/Limits.js"
import type { ToolCall, ToolResult } from "../domain/Message.js"

/** Splits a turn's calls in order: the first `limits.toolCallsPerTurn` run, the rest are surplus (possibly none). */
export const split = (
  calls: ReadonlyArray<ToolCall>,
  limits: Limits
): { readonly run: ReadonlyArray<ToolCall>; readonly surplus: ReadonlyArray<ToolCall> } => ({
  run: calls.slice(0, limits.toolCallsPerTurn),
  surplus: calls.slice(limits.toolCallsPerTurn)
})

/** The error result (`not_executed`) paired with a surplus call: it says the call was not run and may be re-issued. */
export const surplusResult = (call: ToolCall, cap: number): ToolResult => ({
  callId: call.id,
  name: call.name,
  content: `at most ${cap} tool calls are executed per turn; this call to ${call.name} was not executed. ` +
    "Re-issue it in a later turn if you still need it.",
  isError: true,
  status: "not_executed"
})
