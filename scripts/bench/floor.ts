/**
 * The floor: the workload of ../shared/bench/WORKLOAD.md as a plain hand-written agent loop, with no framework.
 * Every ratio of `npm run bench:workload` is taken against it.
 *
 * What it does per session is the least any agent runtime must do: keep the conversation as an array of
 * OpenAI-style message objects, `await` the model (an async interface, as every real model interface is; the fake
 * returns an already-resolved promise), parse and check each tool call's arguments by hand (JSON object with a
 * string `q`), run the turn's calls concurrently (`Promise.all` over async calls), append one `tool` message per
 * result, and stop when the model answers with text or after T + 1 = 11 model turns. No persistence, no tracing.
 * Scenario C holds each session's 20 messages as plain `{ role, content }` objects in one array per session.
 *
 * Run: `node --expose-gc --import tsx scripts/bench/floor.ts --scenario A|B|C [--quick --sessions N --warmup N]`;
 * prints one `RESULT <json>` line (framework `floor`).
 */
import * as Harness from "./harness.js"

interface WireCall {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

type Message =
  | { readonly role: "user"; readonly content: string }
  | { readonly role: "assistant"; readonly content: string | null; readonly tool_calls?: ReadonlyArray<WireCall> }
  | { readonly role: "tool"; readonly tool_call_id: string; readonly content: string }

interface Reply {
  readonly text: string | null
  readonly toolCalls: ReadonlyArray<WireCall>
  readonly finishReason: "tool_calls" | "stop"
  readonly usage: typeof Harness.USAGE
}

let modelCalls = 0
let toolCalls = 0

/** The scripted model of §3: stateless, derives everything from `messages`, resolves at once. */
const model = (messages: ReadonlyArray<Message>): Promise<Reply> => {
  modelCalls++
  const first = messages[0]
  const sid = Harness.sessionIdOf(first?.role === "user" ? first.content : undefined) ?? "?"
  let r = 0
  for (const m of messages) if (m.role === "tool") r++
  const t = 1 + r / Harness.K
  if (t <= Harness.T) {
    const calls: Array<WireCall> = []
    for (let i = 1; i <= Harness.K; i++) {
      calls.push({ id: Harness.callId(sid, t, i), name: "echo", arguments: Harness.callArguments(t, i) })
    }
    return Promise.resolve({ text: null, toolCalls: calls, finishReason: "tool_calls", usage: Harness.USAGE })
  }
  const valid = Harness.validCounter(sid)
  for (const m of messages) if (m.role === "tool") valid.add(m.tool_call_id, m.content)
  return Promise.resolve({
    text: Harness.finalText(sid, valid.count()),
    toolCalls: [],
    finishReason: "stop",
    usage: Harness.USAGE
  })
}

/** The echo tool with a hand-written argument check; a bad call becomes an error text for the model. */
const runTool = async (call: WireCall): Promise<string> => {
  if (call.name !== "echo") return `error: unknown tool "${call.name}"`
  let args: unknown
  try {
    args = JSON.parse(call.arguments)
  } catch {
    return "error: arguments are not valid JSON"
  }
  if (typeof args !== "object" || args === null || Array.isArray(args)) return "error: arguments must be an object"
  const q: unknown = (args as { q?: unknown }).q
  if (typeof q !== "string") return "error: q must be a string"
  toolCalls++
  return Harness.echo(q)
}

/** One session: the loop of §2, at most T + 1 model turns; resolves with the final text. */
const runSession = async (sid: number): Promise<string> => {
  const messages: Array<Message> = [{ role: "user", content: `session:${sid}` }]
  for (let turn = 0; turn < Harness.TURNS; turn++) {
    const reply = await model(messages)
    messages.push({ role: "assistant", content: reply.text, tool_calls: reply.toolCalls })
    if (reply.toolCalls.length === 0) return reply.text ?? ""
    const results = await Promise.all(reply.toolCalls.map(runTool))
    reply.toolCalls.forEach((call, i) => messages.push({ role: "tool", tool_call_id: call.id, content: results[i]! }))
  }
  return ""
}

/** Scenario C: the model answers user message `j` with the assistant text `j + 1` of §8. */
const historyModel = (messages: ReadonlyArray<Message>): Promise<string> => {
  modelCalls++
  const first = messages[0]
  const text = first?.role === "user" ? first.content : ""
  const sid = text.slice(2, text.indexOf(":", 2))
  return Promise.resolve(Harness.fresh(Harness.historyText(sid, messages.length)))
}

const createHeld = async (sid: number): Promise<Array<Message>> => {
  const messages: Array<Message> = []
  for (let j = 0; j < Harness.HISTORY; j += 2) {
    messages.push({ role: "user", content: Harness.fresh(Harness.historyText(sid, j)) })
    messages.push({ role: "assistant", content: await historyModel(messages) })
  }
  return messages
}

void Harness.main<string, Array<Message>>(() =>
  Promise.resolve({
    framework: "floor",
    versions: { node: process.version },
    notes: "hand-written loop: OpenAI-style message array, awaited async model (already-resolved promise), " +
      "hand-written argument check, Promise.all over the turn's tool calls; no persistence, no tracing. " +
      "C holds 20 {role, content} objects per session in one array per session.",
    modelCalls: () => modelCalls,
    toolCalls: () => toolCalls,
    session: runSession,
    burst: (sids) => Promise.all(sids.map(runSession)),
    inspect: (final) => Promise.resolve({ finalText: final }),
    held: {
      what: "per session: one array of 20 plain {role, content} message objects, all arrays kept in one array",
      create: createHeld,
      read: (messages) =>
        Promise.resolve(messages.map((m) => ({
          role: m.role === "user" ? "user" as const : "assistant" as const,
          text: m.content ?? ""
        })))
    },
    close: () => Promise.resolve()
  })
)
