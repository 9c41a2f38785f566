/**
 * Reasoning — which of a transcript's reasoning parts a provider may be sent (DESIGN §11).
 *
 * A reasoning part is the provider's own opaque record of its thinking (a signed Anthropic thinking block, an
 * encrypted Responses reasoning item). Another provider cannot read it and may refuse it, and even the same vendor
 * under another key or model cannot verify it: so a part travels back only to the provider that made it, named as
 * it is configured. After a failover, the parts of the provider left behind stay in the transcript (a replay, or a
 * later failback, needs them) but are not sent; the chain records that as a `reasoning_dropped` rail decision.
 */
import type { AssistantEntry, ReasoningPart, TurnEntry } from "../domain/Message.js"

const none: ReadonlyArray<ReasoningPart> = Object.freeze([])

/** The reasoning parts of `entry` that `provider` made, in their order; none for a turn without reasoning. */
export const ownParts = (
  entry: typeof AssistantEntry.Type,
  provider: string
): ReadonlyArray<ReasoningPart> => {
  const parts = entry.reasoning
  if (parts === undefined || parts.length === 0) return none
  return parts.every((part) => part.provider === provider) ? parts : parts.filter((part) => part.provider === provider)
}

/** How many reasoning parts of `messages` were made by a provider other than `provider` (and so are not sent). */
export const foreignParts = (messages: ReadonlyArray<TurnEntry>, provider: string): number => {
  let count = 0
  for (const entry of messages) {
    if (entry.kind !== "assistant" || entry.reasoning === undefined) continue
    for (const part of entry.reasoning) if (part.provider !== provider) count += 1
  }
  return count
}

/**
 * The assistant turn of the open tool-use cycle, if `messages` end in one: the last assistant turn, when it asked
 * for tools. Everything after it (its results, notices, a follow-up) travels in the one user message that carries
 * the results, so to the API the cycle is still open. Anthropic's rule for thinking applies to that turn: it must
 * be sent starting with its thinking block, verbatim.
 */
export const openToolCycle = (messages: ReadonlyArray<TurnEntry>): typeof AssistantEntry.Type | undefined => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const entry = messages[i]!
    if (entry.kind === "assistant") return entry.toolCalls.length > 0 ? entry : undefined
  }
  return undefined
}
