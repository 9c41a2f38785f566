/**
 * How transcript entries become model text: retrieved or approved data travels in a delimited `<context>` block,
 * context first and question second; a rail's notice travels as a user message naming the rail. Shared by every
 * adapter, so each provider sees the same words.
 */
import type { TurnEntry } from "../domain/Message.js"

/** Wraps data in a delimited context block; a closing tag inside the data is neutralised so it cannot break out. */
export const contextBlock = (data: string): string =>
  `<context>\n${data.replaceAll("</context>", "<\\/context>")}\n</context>`

/** The text of a user entry as the model sees it: the context block first, the question second. */
export const userText = (entry: Extract<TurnEntry, { kind: "user" }>): string =>
  entry.context === undefined || entry.context.length === 0
    ? entry.text
    : `${contextBlock(entry.context)}\n\n${entry.text}`

/** The text of a notice as the model sees it (it travels as a user message, tagged with the rail that spoke). */
export const noticeText = (entry: Extract<TurnEntry, { kind: "notice" }>): string => `[${entry.rail}] ${entry.text}`
