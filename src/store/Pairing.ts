/**
 * The pairing invariant, where turns are written: every call of an assistant turn has its result in the next turn.
 *
 * A burst stores the assistant turn before any tool runs and the results after, so a burst cut between the two (a
 * stop whose cancel landed mid-dispatch, a crash, a store that stopped answering) leaves calls without results. The
 * next writer of the session (any actor, on any node) may not know: an actor that kept its conversation in memory,
 * or another node's, appended its user turn right after the open calls, and every later burst of that session
 * failed (providers refuse unpaired calls with a 400). So the stores close open calls themselves, in the write that
 * would break the pairing: appending anything but a `tool_results` turn after an assistant turn whose calls have no
 * results first stores the `tool_results` turn `closing` makes (every call `unknown_outcome`: whether it ran is not
 * known, and it is never run again), in the same write, and reports it with the turn (`Appended.closed`).
 */
import type { ToolResult, TurnEntry } from "../domain/Message.js"

/** What the model and the person are told of a call whose burst ended before its result was stored. */
export const closingText = (tool: string): string =>
  `"${tool}" has no result: its burst ended before the result was stored, so its outcome is unknown and it was NOT ` +
  "run again. Check its effect before calling it again."

/** Whether `entry` is an assistant turn with calls: the turn after it must be their results. */
export const opens = (entry: TurnEntry | undefined): boolean =>
  entry !== undefined && entry.kind === "assistant" && entry.toolCalls.length > 0

/** Whether storing `entry` right after an assistant turn with calls would leave those calls without results. */
export const breaks = (entry: TurnEntry): boolean => entry.kind !== "tool_results"

/** The `tool_results` entry that closes the calls of `assistant` (none when it has none). */
export const closing = (assistant: TurnEntry): TurnEntry | undefined => {
  if (assistant.kind !== "assistant" || assistant.toolCalls.length === 0) return undefined
  return {
    kind: "tool_results",
    results: assistant.toolCalls.map((call): ToolResult => ({
      callId: call.id,
      name: call.name,
      content: closingText(call.name),
      isError: true,
      status: "unknown_outcome"
    }))
  }
}
