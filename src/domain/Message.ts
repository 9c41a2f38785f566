/**
 * What the model sees and says: tool calls, tool results, and the four kinds of transcript entry.
 */
import { Schema } from "effect"
import { ToolCallId } from "./Ids.js"
import { Usage } from "./Usage.js"

/** One call the model asked for. `arguments` is the raw JSON text exactly as the model emitted it: never repaired. */
export const ToolCall = Schema.Struct({
  id: ToolCallId,
  name: Schema.String,
  arguments: Schema.String
})
export type ToolCall = typeof ToolCall.Type

/** How a tool call ended. Everything but `ok` is error-flagged for the model, except a pending confirmation. */
export const ToolResultStatus = Schema.Literal(
  "ok",
  "error",
  "pending_confirmation",
  "not_executed",
  "unknown_outcome"
)
export type ToolResultStatus = typeof ToolResultStatus.Type

/**
 * Binary content a tool returned — an image or an audio clip, base64 — passed to the providers that accept it. The
 * result's `content` always describes it too (`[image: image/png, 1234 bytes]`), for the providers that do not.
 */
export const Attachment = Schema.Struct({
  type: Schema.Literal("image", "audio"),
  mimeType: Schema.String,
  data: Schema.String
})
export type Attachment = typeof Attachment.Type

/** The result of one tool call, as the model will see it (already truncated and annotated by the rails). */
export const ToolResult = Schema.Struct({
  callId: ToolCallId,
  name: Schema.String,
  content: Schema.String,
  isError: Schema.Boolean,
  status: ToolResultStatus,
  /** Images and audio the tool returned, within the result-size cap (`Truncate.attachments`). */
  attachments: Schema.optional(Schema.Array(Attachment))
})
export type ToolResult = typeof ToolResult.Type

/**
 * Reasoning a model produced with its reply (DESIGN §11): opaque, and tagged with the provider (its configured name)
 * that made it, because only that provider may be sent it back, and only as its own wire rules require. The loop
 * stores it with the assistant turn and never reads it; the adapter that made it replays it verbatim:
 * - `thinking` — an Anthropic thinking block with its `signature` (the API checks the signature: never edit either);
 * - `redacted_thinking` — an Anthropic block whose reasoning was encrypted by the provider (`data`);
 * - `reasoning` — an OpenAI Responses reasoning item: its `id`, its `encryptedContent` (asked for with
 *   `include: ["reasoning.encrypted_content"]`, since requests are `store: false`) and its summary texts;
 * - `reasoning_text` — the plain reasoning text an OpenAI-compatible server returns (`reasoning_content`, or
 *   `reasoning`), with the field it came in, so it goes back in the same one.
 * Never shown to tools, never put into the system prompt.
 */
export const ReasoningPart = Schema.Union(
  Schema.Struct({
    type: Schema.Literal("thinking"),
    provider: Schema.String,
    thinking: Schema.String,
    signature: Schema.String
  }),
  Schema.Struct({ type: Schema.Literal("redacted_thinking"), provider: Schema.String, data: Schema.String }),
  Schema.Struct({
    type: Schema.Literal("reasoning"),
    provider: Schema.String,
    id: Schema.String,
    encryptedContent: Schema.optional(Schema.String),
    summary: Schema.Array(Schema.String)
  }),
  Schema.Struct({
    type: Schema.Literal("reasoning_text"),
    provider: Schema.String,
    text: Schema.String,
    field: Schema.Literal("reasoning_content", "reasoning")
  })
)
export type ReasoningPart = typeof ReasoningPart.Type

/** Why the model stopped: the adapter's normalised finish reason. */
export const FinishReason = Schema.Literal("stop", "tool_calls", "length", "filtered", "refused", "unknown")
export type FinishReason = typeof FinishReason.Type

/** The person's (or host's) message; retrieved text travels in `context`, never in the system prompt. */
export const UserEntry = Schema.Struct({
  kind: Schema.Literal("user"),
  text: Schema.String,
  context: Schema.optional(Schema.String),
  /** The accepted message (`InboxMessage.id`) this turn took up, if it came through the durable mailbox. */
  messageId: Schema.optional(Schema.String)
})
/**
 * The model's reply: text and the tool calls it asked for, persisted before any tool runs — with the reasoning the
 * provider returned (`ReasoningPart`, in the order it came), when it returned any.
 */
export const AssistantEntry = Schema.Struct({
  kind: Schema.Literal("assistant"),
  text: Schema.String,
  toolCalls: Schema.Array(ToolCall),
  finishReason: FinishReason,
  reasoning: Schema.optional(Schema.Array(ReasoningPart))
})
/** All results of one assistant turn, together: one result per call (the pairing invariant). */
export const ToolResultsEntry = Schema.Struct({
  kind: Schema.Literal("tool_results"),
  results: Schema.Array(ToolResult)
})
/** A rail's message to the model (a nudge, a warning); `rail` names the module that spoke. */
export const NoticeEntry = Schema.Struct({
  kind: Schema.Literal("notice"),
  rail: Schema.String,
  text: Schema.String
})

/** One transcript entry, before it has a sequence number. */
export const TurnEntry = Schema.Union(UserEntry, AssistantEntry, ToolResultsEntry, NoticeEntry)
export type TurnEntry = typeof TurnEntry.Type
/** The kinds of transcript entry. */
export type TurnKind = TurnEntry["kind"]

/** A persisted transcript entry: per-session sequence number (from 1, no gaps) and the time it was stored. */
export const Turn = Schema.Struct({
  sessionId: Schema.String,
  seq: Schema.Int.pipe(Schema.positive()),
  at: Schema.Number,
  entry: TurnEntry
})
export type Turn = typeof Turn.Type

/**
 * A model's normalised reply. `raw` keeps the provider's reply verbatim (wire JSON, or the scripted step);
 * `reasoning`, the reasoning parts the adapter took from it (absent: none).
 */
export const ModelReply = Schema.Struct({
  text: Schema.String,
  toolCalls: Schema.Array(ToolCall),
  finishReason: FinishReason,
  reasoning: Schema.optional(Schema.Array(ReasoningPart)),
  usage: Usage,
  model: Schema.String,
  raw: Schema.optional(Schema.Unknown)
})
export type ModelReply = typeof ModelReply.Type
