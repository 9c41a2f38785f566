/**
 * The providers' documented request rules, as the fake provider (`FakeProvider`) enforces them: a request that
 * breaks one gets the 400 the provider answers, in the provider's own error body shape, so an adapter that breaks a
 * rule fails its tests instead of being silently accepted.
 *
 * Anthropic Messages (extended thinking, prompt caching):
 * - with `thinking` on (`enabled` or `adaptive`), the assistant message of the open tool-use cycle (the last
 *   assistant message, when it holds `tool_use` and the next user message holds `tool_result`) must start with a
 *   `thinking` or `redacted_thinking` block;
 * - every thinking block sent back must be one the provider issued, unaltered: the fake signs a block's thinking
 *   text with an HMAC under its own secret, so an edited text, another server's block or a made-up signature fails;
 *   `redacted_thinking` data must be data it issued;
 * - `thinking.budget_tokens` must be at least 1024 and below `max_tokens`;
 * - manual thinking (`enabled`) refuses a `tool_choice` that forces tool use (`tool` or `any`);
 * - `output_config.effort` is one of `low`, `medium`, `high`, `max`;
 * - at most 4 `cache_control` breakpoints.
 * The texts follow the API's error messages as users report them; the invalid-data text of a redacted block is
 * modelled on the signature one.
 *
 * OpenAI Chat Completions:
 * - the reasoning families (`gpt-5*`, `o<digit>*`) refuse `max_tokens` (`unsupported_parameter`);
 * - `reasoning_effort` takes `minimal`, `low`, `medium`, `high` only (`invalid_value`);
 * - a server configured like DeepSeek's reasoner (`refuseReasoningContent`) refuses `reasoning_content` in input
 *   messages (DeepSeek documents a 400 for it; the text here is the fake's).
 */
import { createHash, createHmac } from "node:crypto"

const asRecord = (u: unknown): Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u) ? u as Record<string, unknown> : {}
const asArray = (u: unknown): ReadonlyArray<unknown> => Array.isArray(u) ? u : []

/** A refusal: the HTTP status and the provider's error body. */
export interface Refusal {
  readonly status: number
  readonly body: object
  readonly message: string
}

/** What a fake server remembers to check the thinking it is sent back. */
export interface Issued {
  readonly secret: string
  /** `redacted_thinking` data this server handed out. */
  readonly redacted: Set<string>
}

/** The signature the fake gives a thinking text: an HMAC under its secret (base64, like the API's opaque ones). */
export const sign = (secret: string, thinking: string): string =>
  createHmac("sha256", secret).update(thinking).digest("base64")

const anthropicRefusal = (message: string): Refusal => ({
  status: 400,
  message,
  body: { type: "error", error: { type: "invalid_request_error", message } }
})

const openAiRefusal = (message: string, param: string | null, code: string): Refusal => ({
  status: 400,
  message,
  body: { error: { message, type: "invalid_request_error", param, code } }
})

const docs = "Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking"

/** How many `cache_control` breakpoints a request sets (tools, system blocks, message blocks). */
export const cacheBreakpoints = (body: Record<string, unknown>): number => {
  let count = 0
  for (const tool of asArray(body.tools)) if (asRecord(tool).cache_control !== undefined) count++
  for (const block of asArray(body.system)) if (asRecord(block).cache_control !== undefined) count++
  for (const message of asArray(body.messages)) {
    for (const block of asArray(asRecord(message).content)) if (asRecord(block).cache_control !== undefined) count++
  }
  return count
}

/** Whether an Anthropic request has thinking on. */
export const thinkingOn = (body: Record<string, unknown>): boolean => {
  const type = asRecord(body.thinking).type
  return type === "enabled" || type === "adaptive"
}

/** The refusal an Anthropic Messages request earns, or `undefined` when it keeps every rule above. */
export const checkAnthropic = (body: Record<string, unknown>, issued: Issued): Refusal | undefined => {
  const thinking = asRecord(body.thinking)
  if (thinking.type === "enabled") {
    const budget = thinking.budget_tokens
    if (typeof budget !== "number" || budget < 1024) {
      return anthropicRefusal("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
    }
    if (typeof body.max_tokens === "number" && budget >= body.max_tokens) {
      return anthropicRefusal(
        `\`max_tokens\` must be greater than \`thinking.budget_tokens\`. ${docs}#max-tokens-and-context-window-size`
      )
    }
    const choice = asRecord(body.tool_choice).type
    if (choice === "tool" || choice === "any") {
      return anthropicRefusal("Thinking may not be enabled when `tool_choice` forces tool use.")
    }
  }
  const effort = asRecord(body.output_config).effort
  if (effort !== undefined && !["low", "medium", "high", "max"].includes(String(effort))) {
    return anthropicRefusal("output_config.effort: Input should be 'low', 'medium', 'high' or 'max'")
  }
  const breakpoints = cacheBreakpoints(body)
  if (breakpoints > 4) {
    return anthropicRefusal(`A maximum of 4 blocks with cache_control may be provided. Found ${breakpoints}.`)
  }
  const messages = asArray(body.messages).map(asRecord)
  for (const [i, message] of messages.entries()) {
    for (const [j, raw] of asArray(message.content).entries()) {
      const block = asRecord(raw)
      if (block.type === "thinking") {
        const text = typeof block.thinking === "string" ? block.thinking : ""
        if (block.signature !== sign(issued.secret, text)) {
          return anthropicRefusal(`messages.${i}.content.${j}: Invalid \`signature\` in \`thinking\` block`)
        }
      } else if (block.type === "redacted_thinking") {
        if (typeof block.data !== "string" || !issued.redacted.has(block.data)) {
          return anthropicRefusal(`messages.${i}.content.${j}: Invalid \`data\` in \`redacted_thinking\` block`)
        }
      }
    }
  }
  if (thinkingOn(body)) {
    const last = messages.map((m) => m.role).lastIndexOf("assistant")
    const assistant = messages[last]
    const next = messages[last + 1]
    const blocks = asArray(assistant?.content).map(asRecord)
    const open = assistant !== undefined && blocks.some((b) => b.type === "tool_use") &&
      asArray(next?.content).some((b) => asRecord(b).type === "tool_result")
    const first = blocks[0]?.type
    if (open && first !== "thinking" && first !== "redacted_thinking") {
      return anthropicRefusal(
        `messages.${last}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${
          String(first)
        }\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding ` +
          "the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from " +
          `previous turns. To avoid this requirement, disable \`thinking\`. ${docs}`
      )
    }
  }
  return undefined
}

/** Whether `model` is one of OpenAI's reasoning families (a vendor prefix such as `openai/` is looked through). */
export const reasoningFamily = (model: unknown): boolean =>
  typeof model === "string" && /^(gpt-5|o\d)/i.test(model.slice(model.lastIndexOf("/") + 1))

const efforts = ["minimal", "low", "medium", "high"]

/** The refusal an OpenAI Chat Completions request earns, or `undefined` when it keeps every rule above. */
export const checkOpenAi = (
  body: Record<string, unknown>,
  options: { readonly refuseReasoningContent?: boolean }
): Refusal | undefined => {
  if (reasoningFamily(body.model) && body.max_tokens !== undefined) {
    return openAiRefusal(
      "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      "max_tokens",
      "unsupported_parameter"
    )
  }
  const effort = body.reasoning_effort
  if (effort !== undefined && (typeof effort !== "string" || !efforts.includes(effort))) {
    return openAiRefusal(
      `Invalid value: '${String(effort)}'. Supported values are: 'minimal', 'low', 'medium', and 'high'.`,
      "reasoning_effort",
      "invalid_value"
    )
  }
  if (options.refuseReasoningContent === true) {
    const index = asArray(body.messages).findIndex((m) => asRecord(m).reasoning_content !== undefined)
    if (index >= 0) {
      return openAiRefusal(
        `messages[${index}]: reasoning_content is not accepted in input messages; remove it from the request.`,
        `messages[${index}].reasoning_content`,
        "invalid_request_error"
      )
    }
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Prompt caching (Anthropic), modelled: the prefix up to a breakpoint is cached when a request carries it; a later
// request whose prefix up to one of its own breakpoints (or up to 20 blocks before one) matches reads it.

const stripCache = (u: unknown): unknown => {
  const { cache_control: _, ...rest } = asRecord(u)
  return rest
}

/** The request's blocks in cache order (tools, system, messages), without their cache_control, and where breakpoints are. */
const linear = (body: Record<string, unknown>): { blocks: Array<string>; breakpoints: Array<number> } => {
  const blocks: Array<string> = []
  const breakpoints: Array<number> = []
  const add = (raw: unknown, tag: string) => {
    blocks.push(tag + JSON.stringify(stripCache(raw)))
    if (asRecord(raw).cache_control !== undefined) breakpoints.push(blocks.length)
  }
  for (const tool of asArray(body.tools)) add(tool, "tool:")
  if (typeof body.system === "string") add({ text: body.system }, "system:")
  else for (const block of asArray(body.system)) add(block, "system:")
  for (const message of asArray(body.messages)) {
    const m = asRecord(message)
    if (typeof m.content === "string") add({ type: "text", text: m.content }, `${String(m.role)}:`)
    else for (const block of asArray(m.content)) add(block, `${String(m.role)}:`)
  }
  return { blocks, breakpoints }
}

/**
 * The cache reads and writes of an Anthropic request against `cache` (prefix → tokens), which it updates; and the
 * uncached input tokens (a token counted as four characters). `undefined` when the request has no breakpoint.
 * A prefix is keyed by a hash chained block by block.
 */
export const cacheUsage = (
  body: Record<string, unknown>,
  cache: Map<string, number>
): { readonly read: number; readonly write: number; readonly input: number } | undefined => {
  const { blocks, breakpoints } = linear(body)
  if (breakpoints.length === 0) return undefined
  // keys[end] and tokens[end] describe the prefix of the first `end` blocks.
  const keys: Array<string> = [""]
  const tokens: Array<number> = [0]
  let chars = 0
  for (const block of blocks) {
    keys.push(createHash("sha256").update(keys.at(-1)!).update(block).digest("base64"))
    chars += block.length
    tokens.push(Math.ceil(chars / 4))
  }
  let read = 0
  for (const point of breakpoints) {
    for (let end = point; end >= Math.max(1, point - 20); end--) {
      const hit = cache.get(keys[end]!)
      if (hit !== undefined) {
        read = Math.max(read, hit)
        break
      }
    }
  }
  const cached = tokens[breakpoints.at(-1)!]!
  for (const point of breakpoints) cache.set(keys[point]!, tokens[point]!)
  return { read, write: Math.max(0, cached - read), input: Math.max(1, tokens[blocks.length]! - cached) }
}
