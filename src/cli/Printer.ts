/**
 * Renders session events for a terminal: one line (or a short block) per event, as they happen.
 * Used by `corral run` and the demo.
 */
import type { Report } from "../domain/Report.js"
import type { SessionEvent } from "../domain/SessionEvent.js"

const clip = (text: string, max = 240): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max)}… (${text.length} chars)` : flat
}

/** The terminal lines for one event; empty for events not worth a line (deltas are shown inline by callers). */
export const lines = (event: SessionEvent): ReadonlyArray<string> => {
  switch (event._tag) {
    case "turn": {
      const entry = event.turn.entry
      const seq = String(event.seq).padStart(3)
      switch (entry.kind) {
        case "user":
          return [
            `${seq} user       ${clip(entry.text)}`,
            ...(entry.context ? [`           context  ${clip(entry.context, 160)}`] : [])
          ]
        case "assistant":
          return [
            `${seq} assistant  ${entry.text.trim().length > 0 ? clip(entry.text) : "(no text)"}${
              entry.finishReason === "length" ? "  [cut at the output limit]" : ""
            }`,
            ...entry.toolCalls.map((c) => `           calls    ${c.name}(${clip(c.arguments, 120)})`)
          ]
        case "tool_results":
          return entry.results.flatMap((r, i) => {
            const line = `${i === 0 ? seq : "   "} result     ${r.name} [${r.status}] ${clip(r.content, 160)}`
            // Rails annotate results (truncation, repeat warnings): show their notes, not just the head.
            const notes = r.content.split("\n").filter((l) => /^\[(truncated|repeat guard)/.test(l.trim()))
            return [line, ...notes.map((n) => `           rail     ${clip(n, 200)}`)]
          })
        case "notice":
          return [`${seq} notice     (${entry.rail}) ${clip(entry.text)}`]
      }
      return []
    }
    case "tool_start":
      return [`    running    ${event.name} …`]
    case "tool_progress":
      return [
        `    progress   ${event.name} ${event.progress}${event.total === undefined ? "" : ` of ${event.total}`}${
          event.message === undefined ? "" : `  ${clip(event.message)}`
        }`
      ]
    case "tool_log":
      return [`    tool log   ${event.name} [${event.level}] ${clip(event.message)}`]
    case "elicitation":
      return [
        `    question   ${event.name}: MCP server "${event.server}" asks: ${clip(event.message)} ` +
        `(answer: POST /v1/sessions/${event.sessionId}/elicitations/${event.elicitationId})`
      ]
    case "elicitation_settled":
      return [
        `    answered   ${event.name}: ${event.action}${event.reason === "timed_out" ? " (no answer in time)" : ""}`
      ]
    case "delta":
      return []
    case "exit":
      return [`    exit       ${event.reason}`]
    case "report":
      return report(event.report)
    case "error":
      return [`    error      ${event.code}: ${clip(event.message)}`]
  }
}

/** The report, pretty-printed. */
export const report = (value: Report): ReadonlyArray<string> => [
  `    report     (${value.source}${value.fallbackReason ? `: ${value.fallbackReason}` : ""})`,
  ...JSON.stringify(value.data, null, 2).split("\n").map((l) => `      ${l}`)
]
