/**
 * The fake provider is only worth its tests if it refuses what the providers refuse: each rule of
 * `ProviderRules`, broken on purpose over real HTTP, gets the provider's 400 and error body; kept, it is accepted.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as Fake from "../support/FakeProvider.js"

type Json = Record<string, unknown>

const post = (url: string, body: Json) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    })
    return { status: response.status, body: await response.json() as Json }
  })

const anthropic = (fake: Fake.FakeProvider, body: Json) =>
  post(`${fake.anthropicBaseUrl}/v1/messages`, { model: "claude-test", max_tokens: 4096, ...body })
const openai = (fake: Fake.FakeProvider, body: Json) =>
  post(`${fake.openAiBaseUrl}/chat/completions`, { messages: [{ role: "user", content: "hi" }], ...body })

const thinkingOn = { thinking: { type: "enabled", budget_tokens: 2048 } }
const user = { role: "user", content: "Why?" }
const toolUse = { type: "tool_use", id: "toolu_1", name: "logs", input: {} }
const toolResult = { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "ok" }] }

const invalid = (message: string | RegExp) => ({
  status: 400,
  body: { type: "error", error: { type: "invalid_request_error", message: expect.stringMatching(message) } }
})

describe("the fake provider refuses what Anthropic refuses", () => {
  it.scopedLive("an open tool cycle whose assistant message does not start with thinking, while thinking is on", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const messages = [user, { role: "assistant", content: [{ type: "text", text: "Looking." }, toolUse] }, toolResult]
      expect(yield* anthropic(fake, { ...thinkingOn, messages })).toEqual({
        status: 400,
        body: {
          type: "error",
          error: {
            type: "invalid_request_error",
            message: "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`. When " +
              "`thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the " +
              "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from " +
              "previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at " +
              "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
          }
        }
      })
      // Adaptive thinking obeys the same rule; without thinking the same transcript is fine.
      const adaptive = yield* anthropic(fake, { thinking: { type: "adaptive" }, messages })
      expect(adaptive).toEqual(invalid(/found `text`/))
      expect((yield* anthropic(fake, { messages })).status).toBe(200)
      expect(fake.refusals.map((r) => r.n)).toEqual([1, 2])
    }))

  it.scopedLive("a thinking block altered, made up or signed by another server; redacted data never issued", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const other = yield* Fake.make()
      const cycle = (block: Json) => [user, { role: "assistant", content: [block, toolUse] }, toolResult]
      const signed = { type: "thinking", thinking: "I should look.", signature: fake.sign("I should look.") }
      expect((yield* anthropic(fake, { ...thinkingOn, messages: cycle(signed) })).status).toBe(200)
      const altered = { ...signed, thinking: "I should not look." }
      expect(yield* anthropic(fake, { ...thinkingOn, messages: cycle(altered) })).toEqual(
        invalid(/^messages\.1\.content\.0: Invalid `signature` in `thinking` block$/)
      )
      const foreign = { ...signed, signature: other.sign("I should look.") }
      expect((yield* anthropic(fake, { ...thinkingOn, messages: cycle(foreign) })).status).toBe(400)
      const made = { type: "redacted_thinking", data: "RW5jcnlwdGVk" }
      expect(yield* anthropic(fake, { ...thinkingOn, messages: cycle(made) })).toEqual(invalid(/redacted_thinking/))
    }))

  it.scopedLive("a budget under 1024 or not under max_tokens; a forced tool with manual thinking; an unknown effort", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const messages = [user]
      expect(yield* anthropic(fake, { thinking: { type: "enabled", budget_tokens: 1000 }, messages })).toEqual(
        invalid(/budget_tokens: Input should be greater than or equal to 1024/)
      )
      expect(yield* anthropic(fake, { thinking: { type: "enabled", budget_tokens: 4096 }, messages })).toEqual(
        invalid(/`max_tokens` must be greater than `thinking.budget_tokens`/)
      )
      const forced = {
        tools: [{ name: "r", input_schema: { type: "object" } }],
        tool_choice: { type: "tool", name: "r" }
      }
      expect(yield* anthropic(fake, { ...thinkingOn, ...forced, messages })).toEqual(
        invalid(/Thinking may not be enabled when `tool_choice` forces tool use/)
      )
      expect((yield* anthropic(fake, { thinking: { type: "adaptive" }, ...forced, messages })).status).toBe(200)
      const adaptive = { thinking: { type: "adaptive" }, messages }
      expect(yield* anthropic(fake, { ...adaptive, output_config: { effort: "extreme" } })).toEqual(
        invalid(/^output_config.effort: Input should be/)
      )
      expect((yield* anthropic(fake, { ...adaptive, output_config: { effort: "max" } })).status).toBe(200)
    }))

  it.scopedLive("more than 4 cache_control breakpoints", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const mark = { cache_control: { type: "ephemeral" } }
      const tools = [1, 2, 3].map((i) => ({ name: `t${i}`, input_schema: { type: "object" }, ...mark }))
      const system = [{ type: "text", text: "sys", ...mark }]
      const messages = [{ role: "user", content: [{ type: "text", text: "hi", ...mark }] }]
      expect(yield* anthropic(fake, { tools, system, messages })).toEqual(
        invalid(/^A maximum of 4 blocks with cache_control may be provided. Found 5.$/)
      )
      expect((yield* anthropic(fake, { tools: tools.slice(1), system, messages })).status).toBe(200)
    }))
})

describe("the fake provider refuses what OpenAI refuses", () => {
  it.scopedLive("max_tokens sent to a reasoning model family", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const refusal = {
        status: 400,
        body: {
          error: {
            message:
              "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            type: "invalid_request_error",
            param: "max_tokens",
            code: "unsupported_parameter"
          }
        }
      }
      for (const model of ["gpt-5", "o3-mini", "openai/o4-mini"]) {
        expect(yield* openai(fake, { model, max_tokens: 100 })).toEqual(refusal)
        expect((yield* openai(fake, { model, max_completion_tokens: 100 })).status).toBe(200)
      }
      expect((yield* openai(fake, { model: "gpt-4o", max_tokens: 100 })).status).toBe(200)
    }))

  it.scopedLive("an invalid reasoning_effort", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      expect(yield* openai(fake, { model: "gpt-5", reasoning_effort: "extreme" })).toEqual({
        status: 400,
        body: {
          error: {
            message: "Invalid value: 'extreme'. Supported values are: 'minimal', 'low', 'medium', and 'high'.",
            type: "invalid_request_error",
            param: "reasoning_effort",
            code: "invalid_value"
          }
        }
      })
      expect((yield* openai(fake, { model: "gpt-5", reasoning_effort: "minimal" })).status).toBe(200)
    }))

  it.scopedLive("reasoning_content in input messages, on a server configured to refuse it", () =>
    Effect.gen(function*() {
      const strict = yield* Fake.make({ refuseReasoningContent: true })
      const lenient = yield* Fake.make()
      const messages = [
        { role: "user", content: "hi" },
        { role: "assistant", content: "hello", reasoning_content: "greet back" },
        { role: "user", content: "again" }
      ]
      const refused = yield* openai(strict, { model: "deepseek-reasoner", messages })
      expect(refused).toMatchObject({
        status: 400,
        body: { error: { type: "invalid_request_error", param: "messages[1].reasoning_content" } }
      })
      expect((yield* openai(lenient, { model: "deepseek-reasoner", messages })).status).toBe(200)
    }))
})
