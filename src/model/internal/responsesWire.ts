/**
 * The OpenAI Responses wire format (`POST /v1/responses`) as this adapter reads it: a response's `output` items
 * (`message`, `reasoning`, `function_call`; others are kept out of the reply), its `status` with
 * `incomplete_details` and `error`, its `usage`; and the streamed events that carry them. Lenient like the Chat
 * Completions schemas: every field optional or nullable, unknown fields and unknown item or event types ignored,
 * because the API adds item and event types as it grows and a reply must not fail on one it does not need.
 */
import { Schema } from "effect"
import * as WireUsage from "./usage.js"

const Str = Schema.optional(Schema.NullOr(Schema.String))

/** One part of a `message` item's content (`output_text` or `refusal`), or of a reasoning item's `summary`. */
const Part = Schema.Struct({ type: Str, text: Str, refusal: Str })

/** One output item: the fields of every type this adapter reads, all optional. */
export const OutputItem = Schema.Struct({
  type: Str,
  id: Str,
  status: Str,
  // message
  role: Str,
  content: Schema.optional(Schema.NullOr(Schema.Array(Part))),
  // reasoning
  summary: Schema.optional(Schema.NullOr(Schema.Array(Part))),
  encrypted_content: Str,
  // function_call
  call_id: Str,
  name: Str,
  arguments: Str
})
export type OutputItem = typeof OutputItem.Type

/** The error of a `failed` response (`response.error`), or of an `error` stream event. */
export const ResponseError = Schema.Struct({
  code: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Number))),
  message: Str,
  type: Str
})
export type ResponseError = typeof ResponseError.Type

/** A response object: the body of a non-streamed reply, and the `response` of the lifecycle events. */
export const Response = Schema.Struct({
  id: Str,
  object: Str,
  model: Str,
  status: Str,
  output: Schema.optional(Schema.NullOr(Schema.Array(OutputItem))),
  incomplete_details: Schema.optional(Schema.NullOr(Schema.Struct({ reason: Str }))),
  error: Schema.optional(Schema.NullOr(ResponseError)),
  usage: Schema.optional(Schema.NullOr(WireUsage.ResponsesUsage))
})
export type Response = typeof Response.Type

/**
 * One streamed event (`data:` of an SSE event; its `type` names it, as does the SSE `event:` line). The fields of
 * every event type this adapter handles, all optional: `delta` (text, arguments and summary deltas), `item` with
 * `output_index` (output_item.added / done), `response` (created, completed, incomplete, failed), and `code`,
 * `message` (the `error` event).
 */
export const StreamEvent = Schema.Struct({
  type: Schema.String,
  sequence_number: Schema.optional(Schema.NullOr(Schema.Number)),
  output_index: Schema.optional(Schema.NullOr(Schema.Number)),
  item_id: Str,
  delta: Str,
  arguments: Str,
  item: Schema.optional(Schema.NullOr(OutputItem)),
  response: Schema.optional(Schema.NullOr(Response)),
  code: Schema.optional(Schema.NullOr(Schema.Union(Schema.String, Schema.Number))),
  message: Str,
  param: Str,
  error: Schema.optional(Schema.NullOr(ResponseError))
})
export type StreamEvent = typeof StreamEvent.Type
