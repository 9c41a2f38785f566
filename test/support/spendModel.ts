/**
 * A model that bills like a provider, for the org-budget tests (in-process and test/support/spend-child.ts): its
 * input tokens are what it was sent (system, messages, tools) at 4 characters a token — under Corral's estimate of 3,
 * as a real tokenizer's count is — and its output is `OUTPUT` tokens or the request's cap if lower. It calls `echo`
 * `toolTurns` times (distinct arguments, so no repeat rail fires) and then answers; a report request gets a report.
 */
import { Effect } from "effect"
import type { ModelReply } from "../../src/domain/Message.js"
import { Usage } from "../../src/domain/Usage.js"
import type { ModelProvider, ModelRequest } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"

/** $2 in / $10 out per million tokens: a 400-token answer costs 4,000 µ$. */
export const prices = { inputPerMTok: 2, outputPerMTok: 10 }
/** The output of every reply, in tokens (cut to the request's cap when that is lower). */
export const OUTPUT = 400
/** The output cap the provider sends when a request has none: a hold's worst case. */
export const MAX_OUTPUT = 2_000

const billed = (request: ModelRequest): Usage => {
  const chars = request.system.length + JSON.stringify(request.messages).length + JSON.stringify(request.tools).length
  return new Usage({
    inputTokens: Math.ceil(chars / 4),
    outputTokens: Math.min(OUTPUT, request.maxTokens ?? MAX_OUTPUT),
    cacheReadTokens: 0,
    cacheWriteTokens: 0
  })
}

/** The billing model, named `name`; each reply takes `delayMs` (real time under `it.live`: calls overlap). */
export const spendingModel = (toolTurns = 3, name = "spend", delayMs = 0): ModelProvider =>
  delayed(delayMs, {
    ...Scripted.fromFunction({
      name,
      model: `${name}-1`,
      pricing: prices,
      reply: (request): ModelReply => {
        const usage = billed(request)
        const cut = usage.outputTokens < OUTPUT
        if (request.responseSchema !== undefined) {
          return {
            text: JSON.stringify({ summary: "spent", findings: [], confidence: "low", nextSteps: [] }),
            toolCalls: [],
            finishReason: "stop",
            usage,
            model: `${name}-1`
          }
        }
        const done = request.messages.filter((m) => m.kind === "tool_results").length
        if (cut || done >= toolTurns) {
          return {
            text: cut ? "cut" : "answered",
            toolCalls: [],
            finishReason: cut ? "length" : "stop",
            usage,
            model: `${name}-1`
          }
        }
        const users = request.messages.filter((m) => m.kind === "user").length
        return {
          text: "",
          toolCalls: [{ id: `c${users}_${done}`, name: "echo", arguments: JSON.stringify({ q: `${users}_${done}` }) }],
          finishReason: "tool_calls",
          usage,
          model: `${name}-1`
        }
      }
    }),
    maxOutputTokens: MAX_OUTPUT
  })

const delayed = (delayMs: number, provider: ModelProvider): ModelProvider =>
  delayMs === 0 ? provider : {
    ...provider,
    complete: (request) => Effect.zipRight(Effect.sleep(delayMs), provider.complete(request))
  }
