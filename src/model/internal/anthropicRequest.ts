/**
 * The request side of the Anthropic adapter: transcript entries to the Messages wire, with the thinking and
 * prompt-cache rules set out in `Anthropic`'s module comment. Pure: no I/O, never fails.
 */
import { Either } from "effect"
import type { ReasoningPart } from "../../domain/Message.js"
import type { Options, Thinking } from "../Anthropic.js"
import type { ModelRequest } from "../ModelProvider.js"
import * as Reasoning from "../Reasoning.js"
import * as Render from "../Render.js"
import * as Http from "./http.js"

/** `max_tokens` when `maxOutputTokens` is not set. */
export const defaultMaxOutputTokens = 8192

/** The forced tool that carries a structured (finalize) reply. */
export const reportTool = "submit_report"

type Block = Record<string, unknown>
interface WireMessage {
  readonly role: "user" | "assistant"
  readonly content: Array<Block>
}

// Anthropic wants an object as `input`. Arguments that are not a JSON object (a failover after another model
// emitted broken JSON) are passed through as text, never repaired: the tool result already says what went wrong.
const inputOf = (args: string): unknown => {
  const parsed = Http.parseJson(args)
  return Either.isRight(parsed) && typeof parsed.right === "object" && parsed.right !== null &&
      !Array.isArray(parsed.right)
    ? parsed.right
    : { invalid_json: args }
}

const text = (value: string): Array<Block> => value.trim() === "" ? [] : [{ type: "text", text: value }]

const isThinking = (block: Block): boolean => block.type === "thinking" || block.type === "redacted_thinking"

/** The wire blocks of reasoning parts (thinking and redacted thinking only; other kinds are not Anthropic's). */
const reasoningBlocks = (parts: ReadonlyArray<ReasoningPart>): Array<Block> =>
  parts.flatMap((part): Array<Block> =>
    part.type === "thinking"
      ? [{ type: "thinking", thinking: part.thinking, signature: part.signature }]
      : part.type === "redacted_thinking"
      ? [{ type: "redacted_thinking", data: part.data }]
      : []
  )

/**
 * The `messages` array for `request`: user and notice entries → user text blocks (`Render.userText`,
 * `Render.noticeText`), assistant → its own thinking blocks (only when `thinkingOf` names the provider whose parts
 * to send) + text + `tool_use` blocks, tool results → `tool_result` blocks, consecutive same-role messages merged,
 * `tool_result` blocks first in a user message and thinking blocks first in an assistant one, empty messages
 * dropped. Never fails.
 */
export const toMessages = (
  request: Pick<ModelRequest, "messages">,
  attachments: "send" | "describe" = "send",
  thinkingOf?: string
): Array<WireMessage> => {
  const out: Array<WireMessage> = []
  const push = (role: WireMessage["role"], blocks: Array<Block>) => {
    if (blocks.length === 0) return
    const last = out.at(-1)
    if (last !== undefined && last.role === role) last.content.push(...blocks)
    else out.push({ role, content: blocks })
  }
  for (const entry of request.messages) {
    switch (entry.kind) {
      case "user":
        push("user", text(Render.userText(entry)))
        break
      case "notice":
        push("user", text(Render.noticeText(entry)))
        break
      case "assistant": {
        const blocks: Array<Block> = [
          ...text(entry.text),
          ...entry.toolCalls.map((call) => ({
            type: "tool_use",
            id: call.id,
            name: call.name,
            input: inputOf(call.arguments)
          }))
        ]
        // Thinking alone is no message: a turn with nothing else is left out, its thinking with it.
        const own = thinkingOf === undefined || blocks.length === 0
          ? []
          : reasoningBlocks(Reasoning.ownParts(entry, thinkingOf))
        push("assistant", [...own, ...blocks])
        break
      }
      case "tool_results":
        push(
          "user",
          entry.results.map((result) => {
            const images = attachments === "send" ? (result.attachments ?? []).filter((a) => a.type === "image") : []
            const content = images.length === 0 ? result.content : [
              ...text(result.content),
              ...images.map((image) => ({
                type: "image",
                source: { type: "base64", media_type: image.mimeType, data: image.data }
              }))
            ]
            return {
              type: "tool_result",
              tool_use_id: result.callId,
              ...(content === "" ? {} : { content }),
              ...(result.isError ? { is_error: true } : {})
            }
          })
        )
        break
    }
  }
  // The API requires tool results before any text in a user message, and an assistant message to start with its
  // thinking (two merged turns keep every thinking block in front); the sorts are stable.
  for (const message of out) {
    if (message.role === "user") {
      message.content.sort((a, b) => Number(b.type === "tool_result") - Number(a.type === "tool_result"))
    } else message.content.sort((a, b) => Number(isThinking(b)) - Number(isThinking(a)))
  }
  return out
}

/**
 * The thinking configuration of one call, or none: none when thinking is off, when the call's `max_tokens` does
 * not exceed a manual budget, or when the open tool-use cycle's assistant turn has no thinking block of this
 * provider to start with (see the module comment).
 */
export const thinkingFor = (
  options: Pick<Options, "name" | "thinking">,
  request: Pick<ModelRequest, "messages">,
  maxTokens: number
): Thinking | undefined => {
  const thinking = options.thinking
  if (thinking === undefined) return undefined
  if (thinking.type === "enabled" && maxTokens <= thinking.budgetTokens) return undefined
  const open = Reasoning.openToolCycle(request.messages)
  if (open === undefined) return thinking
  const own = Reasoning.ownParts(open, options.name)
  return own.some((part) => part.type === "thinking" || part.type === "redacted_thinking") ? thinking : undefined
}

const ephemeral = { type: "ephemeral" } as const

/** Whether `request` is a structured (finalize) call: its schema describes an object. */
export const structured = (request: ModelRequest): boolean => {
  const schema = request.responseSchema
  return schema !== undefined && (schema.type === "object" || (schema.type === undefined && "properties" in schema))
}

/** The request body for `request` (see the module comment for the rules it obeys). Never fails. */
export const body = (options: Options, request: ModelRequest, stream: boolean): Block => {
  // The request's own cap (a sample's, say) when it asks for less than the configured one.
  const maxTokens = Math.min(options.maxOutputTokens ?? defaultMaxOutputTokens, request.maxTokens ?? Infinity)
  const thinking = thinkingFor(options, request, maxTokens)
  const cache = options.promptCache ?? true
  const messages = toMessages(request, options.attachments ?? "send", thinking !== undefined ? options.name : undefined)
  const payload: Block = { ...options.extraBody, model: options.model, max_tokens: maxTokens, messages }
  if (request.system !== "") {
    payload.system = cache ? [{ type: "text", text: request.system, cache_control: ephemeral }] : request.system
  }
  if (request.stopSequences !== undefined && request.stopSequences.length > 0) {
    payload.stop_sequences = request.stopSequences
  }
  if (thinking !== undefined) {
    payload.thinking = thinking.type === "enabled"
      ? { type: "enabled", budget_tokens: thinking.budgetTokens }
      : { type: "adaptive" }
    if (thinking.type === "adaptive" && thinking.effort !== undefined) {
      payload.output_config = { effort: thinking.effort }
    }
  }
  const tools: Array<Block> = request.tools.map((tool, i) => ({
    name: tool.name,
    description: tool.description,
    input_schema: tool.parameters,
    // On the request's last tool, not the report tool: the finalize call then still reads the tools' prefix.
    ...(cache && i === request.tools.length - 1 ? { cache_control: ephemeral } : {})
  }))
  if (structured(request)) {
    tools.push({ name: reportTool, description: "Submit the final report.", input_schema: request.responseSchema })
    payload.tool_choice = thinking?.type === "enabled" ? { type: "auto" } : { type: "tool", name: reportTool }
  }
  if (tools.length > 0) payload.tools = tools
  // The rolling breakpoint: the newest message's last block (never a thinking block, which cannot carry one).
  const last = messages.at(-1)?.content.at(-1)
  if (cache && last !== undefined && !isThinking(last)) last.cache_control = ephemeral
  if (stream) payload.stream = true
  return payload
}
