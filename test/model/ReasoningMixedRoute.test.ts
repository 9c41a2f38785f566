/**
 * The three reasoning APIs on one route, over real HTTP to their strict fakes: Claude with extended thinking
 * (Messages; two of them, on two servers with two signing keys), gpt-5 with reasoning effort on the Responses API and
 * on Chat Completions, in a random failover order,
 * each meeting random faults (rate limits that retry, server errors that fail over, cut replies, context overflows that
 * prune) while the agent calls a tool whose result is truncated. Property: whatever the order and the faults, no
 * request is refused — each provider is sent only its own reasoning, in the form its rules require, and every
 * failover that leaves another provider's parts out says so (`reasoning_dropped`). Shown to fail when a provider is
 * sent every part of the transcript (`Reasoning.ownParts` returning them all): the second Claude refuses the first's
 * signatures.
 */
import type { HttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Redacted } from "effect"
import * as Anthropic from "../../src/model/Anthropic.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as OpenAiResponses from "../../src/model/OpenAiResponses.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Fake from "../support/FakeProvider.js"
import * as FakeResponses from "../support/FakeResponses.js"
import * as Tools from "../support/tools.js"

type Fault = "ok" | "rate_limit" | "server" | "cut" | "overflow"
const fault = fc.constantFrom<Fault>("ok", "ok", "ok", "rate_limit", "server", "cut", "overflow")
// Two Claude providers (two servers, two signing keys): a thinking block of one is not valid at the other.
type Kind = "claude" | "claude-backup" | "responses" | "chat"

const serverError = { error: { message: "upstream exploded", type: "server_error" } }
const overflowOpenAi = {
  error: {
    message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
    type: "invalid_request_error",
    param: "input",
    code: "context_length_exceeded"
  }
}

// Tool results so far in a Messages / Chat Completions request, and in a Responses one.
const resultsOf = (request: Fake.RecordedRequest) => Fake.toolResults(request)

/** A Messages / Chat Completions fake: `turns` calls of `logs` (big results), then an answer; faults by arrival. */
const messagesFallback = (faults: ReadonlyArray<Fault>, turns: number) => (r: Fake.RecordedRequest): Fake.Behaviour => {
  const reasoning = r.wire === "anthropic" ? { thinking: `Thinking ${r.n}.` } : { reasoningText: `Reasoning ${r.n}.` }
  switch (faults[r.n - 1] ?? "ok") {
    case "rate_limit":
      return Fake.rateLimited({ ms: 5 })
    case "server":
      return Fake.status(500, serverError, { "retry-after-ms": "5" })
    case "cut":
      return Fake.reply({
        ...reasoning,
        text: "The cause is proba",
        finish: r.wire === "anthropic" ? "max_tokens" : "length"
      })
    case "overflow":
      return r.wire === "anthropic"
        ? Fake.status(400, {
          type: "error",
          error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" }
        })
        : Fake.status(400, overflowOpenAi)
    case "ok":
      break
  }
  if (Fake.isFinalize(r)) {
    const final = Fake.demo(r)
    return final._tag === "Reply" ? Fake.reply({ ...final.reply, ...reasoning }) : final
  }
  if (resultsOf(r) < turns && Fake.offeredTools(r).length > 0) {
    return Fake.reply({ ...reasoning, toolCalls: [{ name: "logs", arguments: { q: `step ${r.n}` } }] })
  }
  return Fake.reply({ ...reasoning, text: "Found it." })
}

/** The Responses fake's counterpart. */
const responsesFallback =
  (faults: ReadonlyArray<Fault>, turns: number) => (r: FakeResponses.RecordedRequest): FakeResponses.Behaviour => {
    switch (faults[r.n - 1] ?? "ok") {
      case "rate_limit":
        return FakeResponses.rateLimited({ ms: 5 })
      case "server":
        return FakeResponses.status(500, serverError, { "retry-after-ms": "5" })
      case "cut":
        return FakeResponses.reply({ text: "The cause is proba", incomplete: "max_output_tokens" })
      case "overflow":
        return FakeResponses.status(400, overflowOpenAi)
      case "ok":
        break
    }
    const finalize = FakeResponses.demo(0)(r)
    if (JSON.stringify(r.body.text ?? {}).includes("json_schema")) return finalize
    if (FakeResponses.outputs(r) < turns && Array.isArray(r.body.tools) && r.body.tools.length > 0) {
      return FakeResponses.reply({ toolCalls: [{ name: "logs", arguments: { q: `step ${r.n}` } }] })
    }
    return FakeResponses.text("Found it.")
  }

const scenario = fc.record({
  order: fc.shuffledSubarray<Kind>(["claude", "claude-backup", "responses", "chat"], { minLength: 2, maxLength: 4 }),
  turns: fc.integer({ min: 1, max: 4 }),
  faults: fc.array(fc.array(fault, { maxLength: 10 }), { minLength: 4, maxLength: 4 })
})

const play = (s: typeof scenario extends fc.Arbitrary<infer A> ? A : never) =>
  Effect.gen(function*() {
    const messages = yield* Fake.make({ fallback: messagesFallback(s.faults[0]!, s.turns) })
    const chat = yield* Fake.make({ fallback: messagesFallback(s.faults[1]!, s.turns) })
    const responses = yield* FakeResponses.make({ fallback: responsesFallback(s.faults[2]!, s.turns) })
    const backup = yield* Fake.make({ fallback: messagesFallback(s.faults[3]!, s.turns) })
    const common = { apiKey: Redacted.make("sk-test"), maxAttempts: 2 }
    const make = (kind: Kind): Effect.Effect<ModelProvider, never, HttpClient.HttpClient> => {
      switch (kind) {
        case "claude":
          return Anthropic.make({
            ...common,
            name: "claude",
            model: "claude-test",
            baseUrl: messages.anthropicBaseUrl,
            thinking: { type: "enabled", budgetTokens: 2048 }
          })
        case "claude-backup":
          return Anthropic.make({
            ...common,
            name: "claude-backup",
            model: "claude-test",
            baseUrl: backup.anthropicBaseUrl,
            thinking: { type: "enabled", budgetTokens: 2048 }
          })
        case "responses":
          return OpenAiResponses.make({
            ...common,
            name: "responses",
            model: "gpt-5",
            baseUrl: responses.baseUrl,
            reasoning: { effort: "low" }
          })
        case "chat":
          return OpenAiCompat.make({
            ...common,
            name: "chat",
            model: "gpt-5",
            baseUrl: chat.openAiBaseUrl,
            reasoning: { effort: "low" },
            maxOutputTokens: 4000
          })
      }
    }
    const providers: Array<ModelProvider> = []
    for (const kind of s.order) providers.push(yield* make(kind))
    const spec = Harness.agent({ tools: ["logs"] })
    const [first, second] = yield* Effect.gen(function*() {
      const one = yield* Harness.runBurst({ spec })
      // A second burst of the session: its history holds the first's reasoning, of whichever providers made it.
      const two = yield* Harness.runBurst({
        spec,
        session: one.session,
        history: one.messages,
        prompt: "And the second service?"
      })
      return [one, two] as const
    }).pipe(Effect.provide(Harness.layer({ providers, tools: Tools.all })))
    return {
      runs: [first, second],
      refusals: [
        ...messages.refusals,
        ...chat.refusals,
        ...responses.refusals.map((r) => ({ n: r.n, message: r.error.message }))
      ]
    }
  })

describe("Reasoning on a route of the three APIs", () => {
  it.live(
    "any order, any faults, truncated results, two bursts: no request is refused",
    () =>
      Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(scenario, async (s) => {
            const { refusals, runs } = await Effect.runPromise(
              play(s).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici))
            )
            expect(refusals).toEqual([])
            for (const run of runs) {
              expect(run.trajectory.errors.filter((e) => e.code === "provider.bad_request")).toEqual([])
              // Every provider that was sent a request with another provider's parts left out said so, once.
              const dropped = (run.trajectory.decisions ?? []).filter((d) => d._tag === "reasoning_dropped")
              expect(new Set(dropped.map((d) => d._tag === "reasoning_dropped" ? d.provider : "")).size).toBe(
                dropped.length
              )
            }
          }),
          { numRuns: 20 }
        )
      ),
    { timeout: 240_000 }
  )
})
