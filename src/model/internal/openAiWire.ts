/**
 * The OpenAI Chat Completions wire format as this adapter reads it: lenient — every field optional or nullable,
 * unknown fields ignored — because compatible servers omit what they do not implement (`refusal`, `usage`, ids,
 * `index` on streamed tool-call fragments) and some add their own.
 */
import { Schema } from "effect"
import * as WireUsage from "./usage.js"

const Str = Schema.optional(Schema.NullOr(Schema.String))

/** One tool call, whole (a completion) or a fragment (a chunk). */
export const WireToolCall = Schema.Struct({
  index: Schema.optional(Schema.NullOr(Schema.Number)),
  id: Str,
  type: Str,
  function: Schema.optional(Schema.NullOr(Schema.Struct({
    name: Str,
    // Some servers send the arguments as an object instead of JSON text.
    arguments: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Unknown)))
  })))
})
export type WireToolCall = typeof WireToolCall.Type

/** Message content: text, or (some servers) an array of text parts. */
export const ContentValue = Schema.NullOr(
  Schema.Union(Schema.String, Schema.Array(Schema.Struct({ type: Str, text: Str })))
)
const Content = Schema.optional(ContentValue)

/**
 * `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama): the reasoning text some compatible
 * servers return beside the content. Unknown here, and read only when it is text: a server that puts an object in
 * either field must not make the whole reply undecodable.
 */
const ReasoningField = Schema.optional(Schema.Unknown)

const WireMessage = Schema.Struct({
  content: Content,
  refusal: Str,
  reasoning_content: ReasoningField,
  reasoning: ReasoningField,
  tool_calls: Schema.optional(Schema.NullOr(Schema.Array(WireToolCall)))
})

/** A chat completion, as OpenAI documents it and compatible servers approximate it. */
export const Completion = Schema.Struct({
  id: Str,
  model: Str,
  choices: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    message: Schema.optional(Schema.NullOr(WireMessage)),
    finish_reason: Str
  })))),
  usage: Schema.optional(Schema.NullOr(WireUsage.OpenAiUsage)),
  error: Schema.optional(Schema.Unknown)
})
export type Completion = typeof Completion.Type

/** One streamed `chat.completion.chunk`. */
export const Chunk = Schema.Struct({
  id: Str,
  model: Str,
  choices: Schema.optional(Schema.NullOr(Schema.Array(Schema.Struct({
    delta: Schema.optional(Schema.NullOr(Schema.Struct({
      content: Str,
      refusal: Str,
      reasoning_content: ReasoningField,
      reasoning: ReasoningField,
      tool_calls: Schema.optional(Schema.NullOr(Schema.Array(WireToolCall)))
    }))),
    finish_reason: Str
  })))),
  usage: Schema.optional(Schema.NullOr(WireUsage.OpenAiUsage)),
  error: Schema.optional(Schema.Unknown)
})
export type Chunk = typeof Chunk.Type
