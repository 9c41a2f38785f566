import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import * as Anthropic from "../../src/model/Anthropic.js"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as StormGuard from "../../src/model/StormGuard.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Fake from "../support/FakeProvider.js"
import * as Tools from "../support/tools.js"

const serverError = Fake.status(500, { error: { message: "upstream exploded", type: "server_error" } }, {
  "retry-after-ms": "5"
})

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("Failover over real HTTP", (it) => {
  describe("OpenAI-compatible → Anthropic", () => {
    it.scoped("fails over within one session after the retries are spent, and stays on Anthropic for the next burst", () =>
      Effect.gen(function*() {
        const primary = yield* Fake.make({ fallback: () => serverError })
        const secondary = yield* Fake.make()
        const openai = StormGuard.wrap(
          yield* OpenAiCompat.make({
            name: "openai",
            model: "gpt-test",
            baseUrl: primary.openAiBaseUrl,
            apiKey: Redacted.make("sk-test"),
            maxAttempts: 2
          })
        )
        const anthropic = StormGuard.wrap(
          yield* Anthropic.make({
            name: "anthropic",
            model: "claude-test",
            baseUrl: secondary.anthropicBaseUrl,
            apiKey: Redacted.make("sk-ant-test")
          })
        )
        const spec = Harness.agent({ tools: ["echo"] })
        const [first, second] = yield* Harness.runBurst({ spec, prompt: "Why is checkout failing?" }).pipe(
          Effect.flatMap((landed) =>
            Effect.map(
              Harness.runBurst({ spec, session: landed.session, history: landed.messages, prompt: "Anything else?" }),
              (next) => [landed, next] as const
            )
          ),
          Effect.provide(Harness.layer({ providers: [openai, anthropic], tools: Tools.all }))
        )

        // Burst 1: two attempts on the primary (500, retried after its Retry-After), then the rest on Anthropic.
        expect(first.reason).toBe<ExitReason>("completed")
        expect(first.state).toMatchObject({ providerIndex: 1, exhausted: false })
        expect(primary.requests).toHaveLength(2)
        expect(first.trajectory.errors.map((e) => e.code)).toEqual(["provider.server", "provider.server"])
        const kinds = first.turns.map((t) => t.entry.kind)
        expect(kinds).toEqual(["user", "assistant", "tool_results", "assistant"])
        const call = first.turns[1]?.entry
        expect(call?.kind === "assistant" && call.toolCalls[0]).toMatchObject({
          name: "echo",
          arguments: "{\"q\":\"demo\"}"
        })
        expect(first.report.source).toBe("model")
        expect(first.report.data).toEqual(Fake.demoReport)

        // The tool result went back to Anthropic as a tool_result block answering the tool_use id.
        const followUp = secondary.requests[1]?.body.messages
        expect(JSON.stringify(followUp)).toContain("\"type\":\"tool_result\"")

        // Burst 2: sticky — the primary is not asked again.
        expect(second.reason).toBe<ExitReason>("completed")
        expect(second.state.providerIndex).toBe(1)
        expect(primary.requests).toHaveLength(2)
        expect(secondary.requests.length).toBeGreaterThan(3)
        expect(secondary.requests.every((r) => r.wire === "anthropic")).toBe(true)
      }))
  })
})
