/**
 * `Agent.run` — the one-call path from `npm i corral effect` to a tool-using agent: a real adapter over HTTP (the
 * fake provider, a real server on 127.0.0.1), the model chosen from the environment or the options, and a clear
 * refusal naming `model` when there is none.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect } from "effect"
import { Agent, ToolRegistry } from "../../src/index.js"
import { ScriptedModel } from "../../src/testing/index.js"
import * as Fake from "../support/FakeProvider.js"

const status = ToolRegistry.define<{ service: string }>({
  name: "status",
  description: "Health of a service.",
  parameters: { type: "object", properties: { service: { type: "string" } }, required: ["service"] },
  run: ({ service }) => Effect.succeed(`${service}: degraded`)
})

const withEnv = (env: Record<string, string>) =>
  Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("Agent.run", () => {
  it.scopedLive("runs a tool loop on the OpenAI-compatible model the environment names, in one call", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const result = yield* Agent.runEffect({ prompt: "Why is checkout down?", tools: [status] }).pipe(
        withEnv({ OPENAI_BASE_URL: fake.openAiBaseUrl, OPENAI_API_KEY: "sk-test", OPENAI_MODEL: "fake-model" })
      )
      expect(result.exitReason).toBe("completed")
      expect(result.session.toolCalls).toBe(1)
      expect(result.text.length).toBeGreaterThan(0)
      expect(result.report?.data).toEqual(Fake.demoReport)
      expect(fake.requests[0]?.body.model).toBe("fake-model")
      expect(fake.requests.every((r) => r.headers.authorization === "Bearer sk-test")).toBe(true)
    }))

  it.scopedLive("takes the model from the options (Anthropic here), ahead of the environment", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const result = yield* Agent.runEffect({
        prompt: "Why is checkout down?",
        tools: [status],
        model: { api: "anthropic", model: "claude-x", baseUrl: fake.anthropicBaseUrl, apiKey: "sk-ant" }
      }).pipe(withEnv({ OPENAI_BASE_URL: "http://127.0.0.1:1/v1" }))
      expect(result.exitReason).toBe("completed")
      expect(fake.requests.every((r) => r.wire === "anthropic")).toBe(true)
    }))

  it.effect("runs on any ModelProvider, and a tripped rail is the exit reason, not an error", () =>
    Effect.gen(function*() {
      const call = ScriptedModel.toolCalls([{ name: "status", arguments: { service: "db" } }])
      const result = yield* Agent.runEffect({
        prompt: "Loop.",
        tools: [status],
        model: ScriptedModel.make({ script: [call, call, call, call] }),
        limits: { modelCallsPerBurst: 2 }
      })
      expect(result.exitReason).toBe("burst_limit")
      expect(result.report?.exitReason).toBe("burst_limit")
    }))

  it.effect("refuses to start without a model, naming the field and the variables", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Agent.runEffect({ prompt: "Hi" })).pipe(withEnv({}))
      expect(error._tag).toBe("InvalidRequest")
      const issue = error._tag === "InvalidRequest" ? error.issues[0] : undefined
      expect(issue?.path).toBe("model")
      expect(issue?.message).toContain("OPENAI_API_KEY")
    }))
})
