/**
 * Prune — one mechanical prune of old tool results when the request overflows the context window.
 *
 * Prevents: a session dying on `context_overflow` when the bulk of its context is stale tool output the model has
 * already read and summarised in its own turns. Exactly one prune, then one retry: the prune is mechanical (no
 * model call, no summarising), and if it frees nothing the burst exits rather than re-sending an identical request.
 * The latest results are kept whole because the model has not answered them yet. Each pruned result keeps its call
 * id, name, status and error flag, so the pairing of calls and results still holds.
 */
import { Option } from "effect"
import type { ToolResult, TurnEntry } from "../domain/Message.js"
import { utf8Length } from "./Truncate.js"

const marker = "[pruned to fit the context window:"

/** The placeholder that replaces a pruned result of `bytes` UTF-8 bytes from tool `name`. */
export const placeholder = (name: string, bytes: number): string =>
  `${marker} ${bytes} bytes of an earlier result of tool ${name}; call it again if you still need it]`

/** Whether `content` is already a prune placeholder. */
export const isPruned = (content: string): boolean => content.startsWith(marker)

const pruneResult = (result: ToolResult): ToolResult => {
  if (isPruned(result.content)) return result
  const bytes = utf8Length(result.content)
  const replacement = placeholder(result.name, bytes)
  return bytes <= utf8Length(replacement) ? result : { ...result, content: replacement }
}

/**
 * Replaces the content of every tool result in every `tool_results` entry except the last one by a placeholder,
 * skipping results already pruned or already no longer than their placeholder; `None` when nothing changed (the
 * caller then exits `context_overflow`). Entry order, kinds and result metadata are preserved.
 */
export const prune = (messages: ReadonlyArray<TurnEntry>): Option.Option<ReadonlyArray<TurnEntry>> => {
  let last = -1
  messages.forEach((entry, index) => {
    if (entry.kind === "tool_results") last = index
  })
  let changed = false
  const next = messages.map((entry, index): TurnEntry => {
    if (entry.kind !== "tool_results" || index === last) return entry
    const results = entry.results.map(pruneResult)
    if (results.every((result, i) => result === entry.results[i])) return entry
    changed = true
    return { ...entry, results }
  })
  return changed ? Option.some(next) : Option.none()
}
