/**
 * The fallback report: built from the exit reason and the transcript when the model's report cannot be had.
 * It must validate against the agent's report schema, so it is generated from that schema mechanically.
 */
import type { JsonSchema } from "../../domain/AgentSpec.js"
import type { ExitReason } from "../../domain/ExitReason.js"
import type { TurnEntry } from "../../domain/Message.js"

/** What a person should do next, per exit reason. */
const advice: Record<ExitReason, string> = {
  completed: "Review the answer.",
  confirmation_pending: "Approve or reject the pending write(s) to let the session continue.",
  burst_limit: "Send a follow-up message to continue the investigation.",
  session_limit: "Start a new session: this one has used all its model calls.",
  tool_budget: "Start a new session or narrow the question: the tool-call budget is spent.",
  token_budget: "Start a new session or narrow the question: the token budget is spent.",
  cost_budget: "Raise the cost budget or start a new session: the money this session (or burst) may spend is spent.",
  deadline: "Send a follow-up to continue, or narrow the question: the active-time deadline was reached.",
  provider_failed: "Check the model providers' status and credentials, then continue the session.",
  context_overflow: "Start a new session with a narrower question: the conversation no longer fits the model.",
  refused: "Rephrase the request: the model refused it.",
  filtered: "Rephrase the request: the provider's content filter stopped the reply.",
  repeat_call_halt: "Check the tool the agent kept calling: it returned the same result repeatedly.",
  bad_tool_use: "Check the agent's tools and instructions: it kept calling tools incorrectly.",
  empty_exhausted: "Continue the session or try another model: the model kept answering with nothing.",
  cancelled: "Continue the session when ready: it was cancelled.",
  crashed: "Report this to the operator: the session hit an internal error. Continue to retry."
}

/** The facts the fallback is built from. */
export interface Facts {
  readonly reason: ExitReason
  readonly messages: ReadonlyArray<TurnEntry>
}

const lastAssistantText = (messages: ReadonlyArray<TurnEntry>): string => {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!
    if (m.kind === "assistant" && m.text.trim().length > 0) return m.text.trim()
  }
  return ""
}

const toolFindings = (messages: ReadonlyArray<TurnEntry>): Array<string> => {
  const out: Array<string> = []
  for (const m of messages) {
    if (m.kind !== "tool_results") continue
    for (const r of m.results) out.push(`${r.name}: ${r.status}${r.isError ? " (error)" : ""}`)
  }
  return out.slice(-10)
}

const head = (reason: ExitReason): string =>
  `The burst ended with exit reason "${reason}" before a report could be written by the model.`

// The summary's opening per exit reason, made once and flat: a host keeps every report (the memory store, every
// trajectory's), and a summary put together per report was a chain of four concatenations (~130 bytes) in front of
// the reply it quotes; now it is one pair of this shared opening and the reply (which stays the transcript's own).
const flat = (text: string): string => JSON.parse(JSON.stringify(text)) as string
const heads = Object.fromEntries(
  Object.keys(advice).map((reason) => [reason, flat(head(reason as ExitReason))])
) as Record<ExitReason, string>
const replyHeads = Object.fromEntries(
  Object.keys(advice).map((reason) => [reason, flat(`${head(reason as ExitReason)} Last reply: `)])
) as Record<ExitReason, string>

/** A one-paragraph summary of how the burst ended. */
export const summary = (facts: Facts): string => {
  const last = lastAssistantText(facts.messages)
  return last.length > 0 ? replyHeads[facts.reason] + last.slice(0, 2000) : heads[facts.reason]
}

/** The default-schema fallback. */
export const defaultReport = (facts: Facts): Record<string, unknown> => ({
  summary: summary(facts),
  findings: toolFindings(facts.messages),
  confidence: "low",
  nextSteps: [advice[facts.reason]]
})

type Node = Record<string, unknown>
const asNode = (v: unknown): Node | undefined => typeof v === "object" && v !== null ? v as Node : undefined

/** Generates a value for `schema`, putting the summary into the first free-text field. Depth-limited. */
export const instance = (schema: JsonSchema, facts: Facts): unknown => {
  let summaryUsed = false
  const text = (name: string): string => {
    if (!summaryUsed || /summary|answer|conclusion|description|text/i.test(name)) {
      summaryUsed = true
      return summary(facts)
    }
    return /next|advice|recommend/i.test(name) ? advice[facts.reason] : ""
  }
  const walk = (node: Node | undefined, name: string, depth: number): unknown => {
    if (node === undefined || depth > 8) return null
    if ("const" in node) return node.const
    if (Array.isArray(node.enum) && node.enum.length > 0) return node.enum[0]
    if (Array.isArray(node.default) || node.default !== undefined) return node.default
    for (const key of ["oneOf", "anyOf"] as const) {
      const options = node[key]
      if (Array.isArray(options) && options.length > 0) return walk(asNode(options[0]), name, depth + 1)
    }
    const type = Array.isArray(node.type) ? node.type[0] : node.type
    switch (type) {
      case "object": {
        const props = asNode(node.properties) ?? {}
        const out: Record<string, unknown> = {}
        for (const [key, sub] of Object.entries(props)) out[key] = walk(asNode(sub), key, depth + 1)
        return out
      }
      case "array": {
        const min = typeof node.minItems === "number" ? node.minItems : 0
        return Array.from({ length: min }, () => walk(asNode(node.items), name, depth + 1))
      }
      case "string": {
        const value = text(name)
        const min = typeof node.minLength === "number" ? node.minLength : 0
        const max = typeof node.maxLength === "number" ? node.maxLength : Infinity
        return value.padEnd(min, ".").slice(0, max)
      }
      case "integer":
      case "number":
        return typeof node.minimum === "number" ? node.minimum : 0
      case "boolean":
        return false
      case "null":
        return null
      default:
        return text(name)
    }
  }
  return walk(schema, "", 0)
}
