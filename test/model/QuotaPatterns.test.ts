import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Either, Ref } from "effect"
import * as Anthropic from "../../src/model/Anthropic.js"
import * as ProviderChain from "../../src/model/ProviderChain.js"
import * as ProviderErrors from "../../src/model/ProviderError.js"
import * as QuotaPatterns from "../../src/model/QuotaPatterns.js"
import * as Fake from "../support/FakeProvider.js"
import * as Cases from "../support/ProviderCases.js"

describe("QuotaPatterns: one table per vendor", () => {
  for (const entry of QuotaPatterns.table) {
    it(`${entry.vendor} ${entry.pattern.source}: its example is a quota, on a 429 and on a 400, in a stream error too`, () => {
      expect(entry.pattern.test(entry.example.toLowerCase())).toBe(true)
      expect(ProviderErrors.classifyStatus(429, entry.example)).toBe("quota")
      expect(ProviderErrors.classifyStatus(400, entry.example)).toBe("quota")
      expect(ProviderErrors.classifyErrorType("rate_limit_error", entry.example)).toBe("quota")
    })
  }

  it("a per-minute throttle that says \"quota\" is still a rate limit, retried", () => {
    const throttles = [
      // Gemini
      "Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent " +
      "request limit per minute for a region' of service 'generativelanguage.googleapis.com'",
      // Azure OpenAI
      "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-02-01 have exceeded token " +
      "rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds.",
      // Anthropic's ordinary rate limit
      "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"This request would exceed your " +
      "organization's rate limit of 50,000 input tokens per minute.\"}}"
    ]
    for (const body of throttles) expect([body, ProviderErrors.classifyStatus(429, body)]).toEqual([body, "rate_limit"])
  })
})

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("QuotaPatterns over real HTTP", (it) => {
  it.scoped("Anthropic's spend limit (429 rate_limit_error, enforced_spend_limit_reached) fails over at once", () =>
    Effect.gen(function*() {
      const body = {
        type: "error",
        error: {
          type: "rate_limit_error",
          message:
            "You have reached your specified API usage limits. You will regain access on 2026-12-31 at 00:00 UTC.",
          details: { error_code: "enforced_spend_limit_reached" }
        }
      }
      const limited = yield* Fake.make({ fallback: () => Fake.status(429, body, { "retry-after": "1" }) })
      const healthy = yield* Fake.make()
      const claude = yield* Anthropic.make({ name: "claude", model: "claude-test", baseUrl: limited.anthropicBaseUrl })
      const backup = yield* Anthropic.make({ name: "backup", model: "claude-test", baseUrl: healthy.anthropicBaseUrl })
      const state = yield* Ref.make(ProviderChain.initialState)
      const errors: Array<string> = []
      const result = yield* Effect.either(ProviderChain.callModel({
        providers: [claude, backup],
        state,
        request: Cases.request,
        onAttempt: (record) => Effect.sync(() => record.error !== undefined && errors.push(record.error.kind))
      }))
      expect(Either.isRight(result)).toBe(true)
      // One request to the spent provider, not three: no retry of a bill.
      expect(limited.requests).toHaveLength(1)
      expect(errors).toEqual(["quota"])
      expect((yield* Ref.get(state)).index).toBe(1)
    }))
})
