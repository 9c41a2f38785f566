/**
 * A server's question (`elicitation/create`) routed to the person behind the session whose call is running on that
 * server (see `Elicitations`). Every path settles: no session to ask (no call in flight, or calls of several
 * sessions), no one to ask (no `Elicitations` service) → declined; the person does not answer within the asking
 * call's deadline → cancelled. Each outcome is told on the session's stream as a `tool_log` notice and, when no one
 * could be asked, in a log line naming the server. The wait ends before the asking call's deadline (which keeps
 * running), leaving the server a margin to take the answer: a server's `timeoutMs` (capped by `Limits.toolTimeoutMs`)
 * is also how long a person has to answer its questions.
 */
import type { ElicitRequest, ElicitResult } from "@modelcontextprotocol/sdk/types.js"
import { Clock, Duration, Effect, Option } from "effect"
import type { ElicitationAnswer, Elicitations } from "../Elicitations.js"
import { defaultsOf } from "../Elicitations.js"
import type { ToolNotices } from "../ToolNotices.js"
import type * as Connection from "./mcpConnection.js"

/** The ports an elicitation may use, as found in the registry's context. */
export interface Ports {
  readonly elicitations: Option.Option<Elicitations["Type"]>
  readonly notices: Option.Option<ToolNotices["Type"]>
}

/** Left of the asking call's window for the server to take the answer and finish (at most a fifth of what is left). */
const MARGIN_MS = 2000

const toResult = (answer: ElicitationAnswer, schema: Readonly<Record<string, unknown>>): ElicitResult =>
  answer.action === "accept"
    ? { action: "accept", content: { ...defaultsOf(schema), ...answer.content } as ElicitResult["content"] }
    : { action: answer.action }

/** Answers one question of `handle`'s server. Never fails. */
export const answer = (
  ports: Ports,
  handle: Connection.Handle,
  params: ElicitRequest["params"]
): Effect.Effect<ElicitResult> =>
  Effect.gen(function*() {
    const server = handle.name
    const callers = [...handle.callers]
    const sessions = new Set(callers.map((c) => c.sessionId))
    if (params.mode === "url" || !("requestedSchema" in params)) {
      yield* Effect.logWarning(`MCP server "${server}" asked for a URL elicitation, which Corral does not support`)
      return { action: "decline" } satisfies ElicitResult
    }
    const schema = params.requestedSchema as Readonly<Record<string, unknown>>
    const caller = callers.at(-1)
    if (caller === undefined || sessions.size !== 1) {
      yield* Effect.logWarning(
        `MCP server "${server}" asked "${params.message}" while ${
          caller === undefined ? "no call of it was running" : `calls of ${sessions.size} sessions were running`
        }: Corral cannot tell whom to ask, so it declined`
      )
      return { action: "decline" } satisfies ElicitResult
    }
    const tell = (level: string, message: string) =>
      Option.match(ports.notices, {
        onNone: () => Effect.void,
        onSome: (sink) =>
          sink.notify({
            _tag: "log",
            sessionId: caller.sessionId,
            callId: caller.callId,
            name: caller.tool,
            level,
            message
          })
      })
    if (Option.isNone(ports.elicitations)) {
      yield* Effect.logWarning(
        `session ${caller.sessionId}: MCP server "${server}" asked "${params.message}"; no one can be asked on this ` +
          "host, so it was declined"
      )
      yield* tell("warning", `MCP server "${server}" asked "${params.message}": declined (no one can be asked here)`)
      return { action: "decline" } satisfies ElicitResult
    }
    yield* tell("notice", `MCP server "${server}" asks: ${params.message}`)
    // The asking call's deadline keeps running while the person reads: settle early enough for the server to answer.
    const now = yield* Clock.currentTimeMillis
    const remaining = caller.deadlineAt - now
    const boundMs = Math.max(0, remaining - Math.min(MARGIN_MS, Math.floor(remaining / 5)))
    const asked = ports.elicitations.value.ask({
      server,
      sessionId: caller.sessionId,
      callId: caller.callId,
      tool: caller.tool,
      message: params.message,
      requestedSchema: schema,
      answerBy: now + boundMs
    })
    const settled = yield* Effect.timeoutTo(asked, {
      duration: Duration.millis(boundMs),
      onSuccess: Option.some,
      onTimeout: Option.none<ElicitationAnswer>
    })
    if (Option.isNone(settled)) {
      yield* Effect.logWarning(
        `session ${caller.sessionId}: MCP server "${server}" asked "${params.message}"; no answer within ` +
          `${boundMs} ms (the asking call's deadline), so it was cancelled`
      )
      yield* tell("warning", `no answer to MCP server "${server}" within ${boundMs} ms: the question was cancelled`)
      return { action: "cancel" } satisfies ElicitResult
    }
    yield* tell("info", `answered MCP server "${server}": ${settled.value.action}`)
    return toResult(settled.value, schema)
  })
