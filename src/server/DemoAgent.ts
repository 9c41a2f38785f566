/**
 * DemoAgent — the built-in `demo` agent, so a newcomer can watch a whole session with no key and no set-up.
 *
 * Its model is stateless (`Scripted.fromFunction`): every reply is derived from the conversation in the request,
 * never from a shared script cursor, so any number of demo sessions can run at once, follow-ups work, and a
 * session rebuilt from the store after a restart carries on where it was. The plan it plays: check the service's
 * health, read its logs, (restart it when the person asked for a fix — a write, so it waits for approval), then
 * answer; the landing report is built from what the tools returned. A think time per reply, streamed as deltas,
 * lets a viewer watch the turns arrive. The tools are the canned demo tools, renamed `demo_*` so they can never
 * shadow a real tool.
 */
import { Effect } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { ModelReply, ToolCall, TurnEntry } from "../domain/Message.js"
import { Usage } from "../domain/Usage.js"
import type { ModelProvider, ModelRequest } from "../model/ModelProvider.js"
import * as Scripted from "../model/Scripted.js"
import * as Cost from "../rails/Cost.js"
import * as DemoTools from "../testing/DemoTools.js"
import type { ToolHandler } from "../tools/ToolRegistry.js"

/** The demo agent's id. */
export const agentId = "demo"

/** The tier the demo agent runs on; routed to the scripted demo model only. */
export const tier = "demo"

/** The demo tools: canned observability reads (`demo_status`, `demo_logs`) and one write (`demo_restart`). */
export const tools: ReadonlyArray<ToolHandler> = DemoTools.all.map((tool) => ({
  ...tool,
  name: `demo_${tool.name}`,
  description: `${tool.description} (Corral demo: canned data.)`,
  source: "demo"
}))

const STATUS = "demo_status"
const LOGS = "demo_logs"
const RESTART = "demo_restart"

/** The demo agent's spec (published into every org the server serves). */
export const spec: typeof AgentSpec.Encoded = {
  id: agentId,
  version: 1,
  name: "Demo investigator",
  description: "A scripted investigator on canned data: no model key needed. Ask it why a service is failing; " +
    "ask it to fix the service to see a write wait for your approval.",
  instructions: "You investigate production incidents. Check the service's health, read its logs, and answer with " +
    "the cause. Restart a service only when asked to fix it.",
  tier,
  tools: tools.map((t) => t.name)
}

const services = ["checkout", "payments", "search", "auth", "inventory", "shipping", "cart", "billing", "api"]

const serviceOf = (text: string): string => services.find((s) => text.toLowerCase().includes(s)) ?? "checkout"

const model = "corral-demo-script"

const usage = new Usage({ inputTokens: 120, outputTokens: 40, cacheReadTokens: 0, cacheWriteTokens: 0 })

const say = (text: string): ModelReply => ({ text, toolCalls: [], finishReason: "stop", usage, model })

const call = (messages: ReadonlyArray<TurnEntry>, name: string, service: string, text: string): ModelReply => {
  // Unique per conversation position: a model numbers its calls, and the pairing rail keys results by id.
  const toolCall: ToolCall = { id: `call_${messages.length}_${name}`, name, arguments: JSON.stringify({ service }) }
  return { text, toolCalls: [toolCall], finishReason: "tool_calls", usage, model }
}

/** The contents of the successful results of tool `name`, oldest first. */
const resultsOf = (messages: ReadonlyArray<TurnEntry>, name: string): ReadonlyArray<string> =>
  messages.flatMap((e) =>
    e.kind === "tool_results" ? e.results.filter((r) => r.name === name && r.status === "ok").map((r) => r.content) : []
  )

/** The error line the logs end with, if the logs were read. */
const errorLine = (messages: ReadonlyArray<TurnEntry>): string | undefined =>
  resultsOf(messages, LOGS).flatMap((content) => content.split("\n")).reverse().find((l) => l.includes("ERROR"))

const conclusion = (messages: ReadonlyArray<TurnEntry>, service: string): string => {
  const error = errorLine(messages)
  return error === undefined
    ? `${service} is unhealthy, but its logs show no error yet.`
    : `${service} is failing: its database connection pool is exhausted ("${error.trim()}").`
}

const report = (messages: ReadonlyArray<TurnEntry>, service: string) => {
  const status = resultsOf(messages, STATUS)[0]
  const error = errorLine(messages)
  const restarted = resultsOf(messages, RESTART).length > 0 ||
    messages.some((e) => e.kind === "user" && (e.context ?? "").includes("APPROVED"))
  return {
    summary: error === undefined
      ? `${service} was investigated; no cause was established.`
      : `The database connection pool of ${service} is exhausted${restarted ? "; the service was restarted" : ""}.`,
    findings: [
      ...(status === undefined ? [] : [`status: ${status.trim()}`]),
      ...(error === undefined ? [] : [`logs end with: ${error.trim()}`])
    ],
    confidence: error === undefined ? "low" : "medium",
    nextSteps: error === undefined
      ? ["Read the service's logs."]
      : ["Raise the pool size or find the connection leak.", `Watch the error rate of ${service} after any change.`]
  }
}

/**
 * The demo model's reply to `request`, derived from the conversation alone: health check, then logs, then (when
 * the person asked for a fix) a restart, then the answer; a finalize request gets the report. Never throws.
 */
export const reply = (request: ModelRequest): ModelReply => {
  const messages = request.messages
  const users = messages.flatMap((e) => e.kind === "user" ? [e] : [])
  const service = serviceOf(users.map((u) => u.text).join(" "))
  if (request.responseSchema !== undefined) return say(JSON.stringify(report(messages, service)))
  let lastUser = -1
  messages.forEach((e, i) => {
    if (e.kind === "user") lastUser = i
  })
  const latest = users[users.length - 1]
  const decided = latest?.context ?? ""
  if (decided.includes("APPROVED")) {
    return say(`The restart of ${service} went through and its health check passes. ${conclusion(messages, service)}`)
  }
  if (decided.includes("DECLINED")) return say(`The restart was declined. ${conclusion(messages, service)}`)
  const steps = messages.slice(lastUser + 1).filter((e) => e.kind === "tool_results").length
  const wantsFix = /\b(fix|restart|repair|mitigate)\b/i.test(latest?.text ?? "")
  switch (steps) {
    case 0:
      return call(messages, STATUS, service, `Checking the health of ${service} first.`)
    case 1:
      return call(messages, LOGS, service, `${service} reports unhealthy; reading its recent logs.`)
    case 2:
      return wantsFix
        ? call(messages, RESTART, service, `${conclusion(messages, service)} Restarting it (needs your approval).`)
        : say(conclusion(messages, service))
    default:
      return say(conclusion(messages, service))
  }
}

const chunks = (text: string, parts: number): ReadonlyArray<string> => {
  const words = text.split(/(?<= )/)
  const size = Math.max(1, Math.ceil(words.length / parts))
  const out: Array<string> = []
  for (let i = 0; i < words.length; i += size) out.push(words.slice(i, i + size).join(""))
  return out
}

/**
 * The demo model: `reply` behind a think time of `delayMs` per reply, the reply's text streamed as deltas over a
 * further ~`delayMs`. Never fails; the sleeps are interruptible, so cancelling a demo burst is immediate.
 */
export const provider = (delayMs: number): ModelProvider => {
  const base = Scripted.fromFunction({ name: "demo", model, reply })
  return {
    ...base,
    // It costs nothing, and says so: a host cost budget covers the demo agent too.
    pricing: Cost.fromUsd({ inputPerMTok: 0, outputPerMTok: 0 }),
    complete: (request) =>
      Effect.gen(function*() {
        yield* Effect.sleep(delayMs)
        const answer = yield* base.complete(request)
        if (request.onDelta !== undefined && request.responseSchema === undefined && answer.text.length > 0) {
          const parts = chunks(answer.text, 6)
          for (const part of parts) {
            yield* Effect.sleep(Math.floor(delayMs / parts.length))
            request.onDelta(part)
          }
        }
        return answer
      })
  }
}
