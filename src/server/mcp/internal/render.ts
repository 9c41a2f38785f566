/**
 * Text renderings for MCP hosts: what a landed session, a transcript turn and a pending write look like as text
 * (the `text` content next to the structured content, the progress messages, the elicitation message).
 */
import type { Turn } from "../../../domain/Message.js"
import type { SessionView } from "../../../domain/Session.js"

/** At most `max` characters of `text` on one line, marked when cut. */
export const excerpt = (text: string, max = 160): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length <= max ? line : `${line.slice(0, max - 1)}…`
}

/** One transcript turn as a progress message ("turn 3 · assistant: … → demo_logs"). */
export const turn = (t: Turn): string => {
  const entry = t.entry
  switch (entry.kind) {
    case "user":
      return `turn ${t.seq} · user: ${excerpt(entry.text, 100)}`
    case "assistant": {
      const calls = entry.toolCalls.map((c) => c.name).join(", ")
      return `turn ${t.seq} · assistant: ${excerpt(entry.text, 100)}${calls.length > 0 ? ` → ${calls}` : ""}`
    }
    case "tool_results":
      return `turn ${t.seq} · tool results: ${entry.results.map((r) => `${r.name} ${r.status}`).join(", ")}`
    case "notice":
      return `turn ${t.seq} · notice (${entry.rail}): ${excerpt(entry.text, 100)}`
  }
}

/** The URI of a session resource. */
export const sessionUri = (id: string): string => `corral://sessions/${encodeURIComponent(id)}`

/** The URI of an agent resource. */
export const agentUri = (id: string): string => `corral://agents/${encodeURIComponent(id)}`

/** How to decide a pending write without elicitation: the `approve` tool or the HTTP API. */
export const howToApprove = (sessionId: string): string =>
  `decide it with the \`approve\` tool ({"sessionId":"${sessionId}","token":"<token>","decision":"approve"|"reject"}) ` +
  `or over HTTP: POST /v1/sessions/${sessionId}/approvals {"token":"<token>","decision":"approve"|"reject"}`

/** A landed (or still running) session as text: where it stands, its pending writes, and its report. */
export const session = (view: SessionView, note?: string): string => {
  const lines: Array<string> = []
  const reason = view.exitReason === undefined ? "" : ` · exit ${view.exitReason}`
  lines.push(
    `session ${view.id} (agent ${view.agentId} v${view.agentVersion}, scope ${view.scope}): ${view.status}${reason}`
  )
  if (note !== undefined) lines.push(note)
  for (const p of view.pending) {
    lines.push(
      `waiting for approval: ${p.tool}(${p.arguments})` +
        (p.token === undefined ? "" : ` — token ${p.token}`)
    )
  }
  if (view.pending.length > 0) lines.push(howToApprove(view.id))
  if (view.report !== undefined && view.status !== "running") {
    lines.push(`report (${view.report.source}):`, JSON.stringify(view.report.data, null, 2))
  }
  lines.push(
    `${view.modelCalls} model calls · ${view.toolCalls} tool calls · resource ${sessionUri(view.id)}`
  )
  return lines.join("\n")
}
