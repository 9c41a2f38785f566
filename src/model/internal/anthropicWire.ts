/**
 * The Anthropic Messages wire format as this adapter reads it: lenient — every field optional or nullable, unknown
 * fields and block or event types ignored — so a reply carrying a newer block type (server tools) still decodes,
 * and gateways that trim fields still work. Thinking blocks carry `thinking` + `signature`, redacted ones `data`.
 */
import { Schema } from "effect"
import * as WireUsage from "./usage.js"

const Str = Schema.optional(Schema.NullOr(Schema.String))

/** One content block (text, tool_use, thinking, redacted_thinking, or a type this adapter ignores). */
export const WireBlock = Schema.Struct({
  type: Schema.String,
  text: Str,
  id: Str,
  name: Str,
  input: Schema.optional(Schema.Unknown),
  thinking: Str,
  signature: Str,
  data: Str
})
export type WireBlock = typeof WireBlock.Type

/** A Messages API reply. */
export const Message = Schema.Struct({
  id: Str,
  type: Str,
  model: Str,
  content: Schema.optional(Schema.NullOr(Schema.Array(WireBlock))),
  stop_reason: Str,
  usage: Schema.optional(Schema.NullOr(WireUsage.AnthropicUsage)),
  error: Schema.optional(Schema.Unknown)
})
export type Message = typeof Message.Type

/** One streamed event's data (every event type in one lenient shape, told apart by `type`). */
export const Event = Schema.Struct({
  type: Schema.String,
  index: Schema.optional(Schema.NullOr(Schema.Number)),
  message: Schema.optional(Schema.NullOr(Schema.Struct({
    id: Str,
    model: Str,
    usage: Schema.optional(Schema.NullOr(WireUsage.AnthropicUsage))
  }))),
  content_block: Schema.optional(Schema.NullOr(WireBlock)),
  delta: Schema.optional(Schema.NullOr(Schema.Struct({
    type: Str,
    text: Str,
    partial_json: Str,
    thinking: Str,
    signature: Str,
    stop_reason: Str
  }))),
  usage: Schema.optional(Schema.NullOr(WireUsage.AnthropicUsage)),
  error: Schema.optional(Schema.Unknown)
})
export type Event = typeof Event.Type
