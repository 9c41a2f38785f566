/**
 * ReplyPolicy — what one model reply means for the loop.
 *
 * Prevents: acting on a reply that cannot be trusted. A reply cut at the output limit may carry tool calls whose
 * JSON arguments were cut mid-way; they are dropped (never repaired) and the model is told to re-issue them shorter.
 * An empty reply gets a "continue" nudge, but only `emptyNudges` (2) of them: a model that keeps answering with
 * nothing is not going to start, and each nudge costs a model call.
 */
import type { Limits } from "../domain/Limits.js"
import type { ModelReply, ToolCall } from "../domain/Message.js"

/** The loop's reading of a reply. */
export type Verdict =
  | { readonly _tag: "Filtered" }
  | { readonly _tag: "Refused" }
  | { readonly _tag: "Truncated"; readonly droppedCalls: number }
  | { readonly _tag: "Empty" }
  | { readonly _tag: "Final"; readonly text: string }
  | { readonly _tag: "ToolCalls"; readonly calls: ReadonlyArray<ToolCall> }

/**
 * Classifies a reply with precedence filtered → refused → length (`Truncated`, its calls dropped) → empty (no
 * text after trimming and no calls) → tool calls → final text. Total: every reply gets exactly one verdict.
 */
export const classify = (reply: ModelReply): Verdict => {
  if (reply.finishReason === "filtered") return { _tag: "Filtered" }
  if (reply.finishReason === "refused") return { _tag: "Refused" }
  if (reply.finishReason === "length") return { _tag: "Truncated", droppedCalls: reply.toolCalls.length }
  if (reply.toolCalls.length === 0 && reply.text.trim() === "") return { _tag: "Empty" }
  if (reply.toolCalls.length > 0) return { _tag: "ToolCalls", calls: reply.toolCalls }
  return { _tag: "Final", text: reply.text }
}

/** The notice sent after a `Truncated` reply. */
export const lengthNudge: string =
  "Your previous reply was cut off at the output token limit. Any tool calls in it were dropped and not executed, " +
  "because their arguments may have been cut. Re-issue the calls you still need one at a time, with shorter " +
  "arguments, or give a shorter answer."

/** The "continue" notice sent after an `Empty` reply. */
export const emptyNudge: string =
  "Your previous reply was empty. Continue the investigation with a tool call, or give your final answer now."

/**
 * Whether the burst must exit `empty_exhausted`. `emptyCount` is the number of empty replies in this burst,
 * including the current one. The loop nudges on the first `limits.emptyNudges` empty replies and exits on the next:
 * with `emptyNudges = 2` it nudges on empty #1 and #2 and exits on empty #3.
 */
export const emptyExhausted = (emptyCount: number, limits: Limits): boolean => emptyCount > limits.emptyNudges
