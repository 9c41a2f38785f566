/**
 * Token usage as the two wire formats report it, normalised once. `inputTokens` counts EVERY input token the
 * provider processed, cached or not, so budgets mean the same thing whichever provider answered: OpenAI's
 * `prompt_tokens` already includes `cached_tokens`; Anthropic's `input_tokens` excludes the cache reads and writes,
 * so they are added back. The cache counters are kept separately for cost reporting. Reasoning: OpenAI's
 * `completion_tokens` already include `completion_tokens_details.reasoning_tokens` (kept apart, never added);
 * Anthropic's `output_tokens` include the thinking, which the Messages API does not count apart.
 */
import { Option, Schema } from "effect"
import { Usage } from "../../domain/Usage.js"

const Count = Schema.NullOr(Schema.Number)

/** OpenAI Chat Completions `usage` (every field optional: compatible servers omit what they do not count). */
export const OpenAiUsage = Schema.Struct({
  prompt_tokens: Schema.optional(Count),
  completion_tokens: Schema.optional(Count),
  prompt_tokens_details: Schema.optional(Schema.NullOr(Schema.Struct({ cached_tokens: Schema.optional(Count) }))),
  completion_tokens_details: Schema.optional(
    Schema.NullOr(Schema.Struct({ reasoning_tokens: Schema.optional(Count) }))
  )
})
export type OpenAiUsage = typeof OpenAiUsage.Type

/** Anthropic Messages `usage` (in a message, in `message_start`, and cumulative in `message_delta`). */
export const AnthropicUsage = Schema.Struct({
  input_tokens: Schema.optional(Count),
  output_tokens: Schema.optional(Count),
  cache_read_input_tokens: Schema.optional(Count),
  cache_creation_input_tokens: Schema.optional(Count)
})
export type AnthropicUsage = typeof AnthropicUsage.Type

/**
 * OpenAI Responses `usage`: `input_tokens` includes the cached ones (`input_tokens_details.cached_tokens`, and
 * `cache_write_tokens` where the model reports writes); `output_tokens` includes the reasoning ones
 * (`output_tokens_details.reasoning_tokens`).
 */
export const ResponsesUsage = Schema.Struct({
  input_tokens: Schema.optional(Count),
  output_tokens: Schema.optional(Count),
  input_tokens_details: Schema.optional(Schema.NullOr(Schema.Struct({
    cached_tokens: Schema.optional(Count),
    cache_write_tokens: Schema.optional(Count)
  }))),
  output_tokens_details: Schema.optional(Schema.NullOr(Schema.Struct({ reasoning_tokens: Schema.optional(Count) })))
})
export type ResponsesUsage = typeof ResponsesUsage.Type

const count = (value: number | null | undefined): number =>
  value === null || value === undefined || !Number.isFinite(value) ? 0 : Math.max(0, Math.round(value))

/** Normalises an OpenAI usage (absent → zero). Never fails. */
export const fromOpenAi = (usage: OpenAiUsage | null | undefined): Usage =>
  usage === null || usage === undefined ? Usage.zero : new Usage({
    inputTokens: count(usage.prompt_tokens),
    outputTokens: count(usage.completion_tokens),
    cacheReadTokens: count(usage.prompt_tokens_details?.cached_tokens),
    cacheWriteTokens: 0,
    reasoningTokens: Math.min(count(usage.completion_tokens_details?.reasoning_tokens), count(usage.completion_tokens))
  })

/** Normalises an OpenAI Responses usage (absent → zero); reasoning tokens stay counted in the output. Never fails. */
export const fromResponses = (usage: ResponsesUsage | null | undefined): Usage =>
  usage === null || usage === undefined ? Usage.zero : new Usage({
    inputTokens: count(usage.input_tokens),
    outputTokens: count(usage.output_tokens),
    cacheReadTokens: count(usage.input_tokens_details?.cached_tokens),
    cacheWriteTokens: count(usage.input_tokens_details?.cache_write_tokens),
    reasoningTokens: count(usage.output_tokens_details?.reasoning_tokens)
  })

/** Normalises an Anthropic usage (absent → zero); cache reads and writes count as input too. Never fails. */
export const fromAnthropic = (usage: AnthropicUsage | null | undefined): Usage => {
  if (usage === null || usage === undefined) return Usage.zero
  const cacheRead = count(usage.cache_read_input_tokens)
  const cacheWrite = count(usage.cache_creation_input_tokens)
  return new Usage({
    inputTokens: count(usage.input_tokens) + cacheRead + cacheWrite,
    outputTokens: count(usage.output_tokens),
    cacheReadTokens: cacheRead,
    cacheWriteTokens: cacheWrite
  })
}

const Either = Schema.Struct({ usage: Schema.Struct({ ...OpenAiUsage.fields, ...AnthropicUsage.fields }) })
const decodeEither = Schema.decodeUnknownOption(Either)

/**
 * The usage an error body reports, if any (some servers still charge a failed request and say so), in either
 * wire format. `undefined` when the body carries none. Never fails.
 */
export const inErrorBody = (json: unknown): Usage | undefined =>
  Option.match(decodeEither(json), {
    onNone: () => undefined,
    onSome: ({ usage }) => {
      const normalised = usage.prompt_tokens !== undefined || usage.completion_tokens !== undefined
        ? fromOpenAi(usage)
        : fromAnthropic(usage)
      return normalised.total === 0 ? undefined : normalised
    }
  })
