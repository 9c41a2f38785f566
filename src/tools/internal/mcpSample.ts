/**
 * A server's sample request (`sampling/createMessage`, of a server configured with `sampling: true`) served by the
 * model of the session whose tool call is running on that server (`ToolContext.sample`: the session's gate, counters,
 * token budget and provider chain). Every path settles with a completion or a JSON-RPC error that says why:
 *
 * - no call of the server is running, or calls of several sessions are (Corral cannot tell whose model to charge),
 *   or the call runs outside a burst (no sampler) → `-32600` (invalid request);
 * - content Corral does not sample (images, audio, tool use: a text-only request is the contract here, so nothing is
 *   silently dropped from what the server meant) or a request offering tools → `-32602` (invalid params);
 * - a check of the session's exit policy fired (a model-call ceiling, the token budget, the deadline, spent
 *   providers: named in the message, and no model call is made) → `-32600`;
 * - the provider chain failed → `-32603` (internal error);
 * - no answer before the calling tool's deadline, less a margin for the server to take it → `-32001` (timeout).
 *
 * `includeContext`, `modelPreferences` and `temperature` are ignored (the session's route decides the model).
 */
import type { CreateMessageRequest, CreateMessageResult } from "@modelcontextprotocol/sdk/types.js"
import { ErrorCode } from "@modelcontextprotocol/sdk/types.js"
import { Clock, Duration, Effect, Either } from "effect"
import type { SampleRefused } from "../../domain/Errors.js"
import type { SampleMessage } from "../ToolExecutor.js"
import type * as Connection from "./mcpConnection.js"

/** What the server receives instead of a completion. */
export interface Refusal {
  readonly code: number
  readonly message: string
}

/** Left of the asking call's window for the server to take the answer and finish (at most a fifth of what is left). */
const MARGIN_MS = 2000

type Params = CreateMessageRequest["params"]

/** The request's messages as text, or why Corral does not sample them. */
export const messagesOf = (server: string, params: Params): Either.Either<ReadonlyArray<SampleMessage>, string> => {
  if (params.tools !== undefined || params.toolChoice !== undefined) {
    return Either.left(`MCP server "${server}" offered tools with its sample request: Corral samples text only`)
  }
  const messages: Array<SampleMessage> = []
  for (const [i, message] of params.messages.entries()) {
    const blocks = Array.isArray(message.content) ? message.content : [message.content]
    const texts: Array<string> = []
    for (const block of blocks) {
      if (block.type !== "text") {
        const at = i + 1
        return Either.left(
          `MCP server "${server}" sent ${block.type} content in message ${at} of its sample request: Corral ` +
            "samples text only (send the content as text)"
        )
      }
      texts.push(block.text)
    }
    messages.push({ role: message.role, text: texts.join("\n\n") })
  }
  return messages.length === 0
    ? Either.left(`MCP server "${server}" sent a sample request without messages`)
    : Either.right(messages)
}

// A closed gate or an ended call is a refusal of this request (-32600); a failed chain is Corral's own trouble.
const codeOf = (refused: SampleRefused): number =>
  refused.reason === "provider" ? ErrorCode.InternalError : ErrorCode.InvalidRequest

/** Serves one sample request of `handle`'s server. Never fails: a refusal is the `Left`. */
export const answer = (
  handle: Connection.Handle,
  params: Params
): Effect.Effect<Either.Either<CreateMessageResult, Refusal>> =>
  Effect.gen(function*() {
    const server = handle.name
    const callers = [...handle.callers]
    const sessions = new Set(callers.map((c) => c.sessionId))
    const caller = callers.at(-1)
    const refuse = (code: number, message: string) =>
      Effect.as(
        Effect.logWarning(
          `${caller === undefined ? "" : `session ${caller.sessionId}: `}sample request of MCP server "${server}" ` +
            `refused: ${message}`
        ),
        Either.left<Refusal>({ code, message })
      )
    if (caller === undefined || sessions.size !== 1) {
      return yield* refuse(
        ErrorCode.InvalidRequest,
        `MCP server "${server}" asked for a sample while ${
          caller === undefined ? "no call of it was running" : `calls of ${sessions.size} sessions were running on it`
        }: Corral samples only for one session's tool call, charged to that session`
      )
    }
    if (caller.sample === undefined) {
      return yield* refuse(
        ErrorCode.InvalidRequest,
        `MCP server "${server}" asked for a sample, but no model serves samples for this call (it does not run in a ` +
          "session's burst)"
      )
    }
    const messages = messagesOf(server, params)
    if (Either.isLeft(messages)) return yield* refuse(ErrorCode.InvalidParams, messages.left)
    // The asking call's deadline keeps running while the model writes: settle early enough for the server to answer.
    const now = yield* Clock.currentTimeMillis
    const remaining = caller.deadlineAt - now
    const boundMs = Math.max(0, remaining - Math.min(MARGIN_MS, Math.floor(remaining / 5)))
    const sampled = yield* caller.sample({
      server,
      ...(params.systemPrompt === undefined ? {} : { system: params.systemPrompt }),
      messages: messages.right,
      maxTokens: params.maxTokens,
      ...(params.stopSequences === undefined ? {} : { stopSequences: params.stopSequences })
    }).pipe(
      Effect.timeoutTo({
        duration: Duration.millis(boundMs),
        onSuccess: Either.right,
        onTimeout: () =>
          Either.left<Refusal>({
            code: ErrorCode.RequestTimeout,
            message: `the session's model did not answer MCP server "${server}" within ${boundMs} ms (the calling ` +
              `tool "${caller.tool}"'s deadline, less a margin for the server to answer)`
          })
      }),
      Effect.catchAll((refused) =>
        Effect.succeed(Either.left<Refusal>({ code: codeOf(refused), message: refused.message }))
      )
    )
    if (Either.isLeft(sampled)) return yield* refuse(sampled.left.code, sampled.left.message)
    const reply = sampled.right
    return Either.right<CreateMessageResult>({
      role: "assistant",
      content: { type: "text", text: reply.text },
      model: reply.model,
      stopReason: reply.stopReason
    })
  })
