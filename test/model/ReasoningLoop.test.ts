/**
 * Tool loops with reasoning on, over real HTTP to the strict fake (`ProviderRules`): the loop stores each reply's
 * reasoning with its turn and the adapters send it back as the providers' rules require, through retries and a
 * failover, so no request is refused. Last, the property: random routes and faults (rate limits, server errors
 * that fail over, cut replies, context overflows that prune) never make a request the strict fakes refuse.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it as vitest, layer } from "@effect/vitest"
import { Effect, FastCheck as fc, Redacted } from "effect"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import type { TurnEntry } from "../../src/domain/Message.js"
import * as Anthropic from "../../src/model/Anthropic.js"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as StormGuard from "../../src/model/StormGuard.js"
import * as Harness from "../../src/testing/Harness.js"
import type { Behaviour, RecordedRequest } from "../support/FakeProvider.js"
import * as Fake from "../support/FakeProvider.js"
import * as Tools from "../support/tools.js"

type Json = Record<string, unknown>

/**
 * The tool results since the last user message of the person (not one that carries results): a new burst's prompt
 * starts the count again, as a new question would for a model.
 */
const resultsThisTurn = (request: RecordedRequest): number => {
  if (request.wire !== "anthropic") return Fake.toolResults(request)
  const messages = (request.body.messages ?? []) as ReadonlyArray<{ role: string; content: unknown }>
  const blocks = (m: { content: unknown }) => Array.isArray(m.content) ? m.content as ReadonlyArray<Json> : []
  const start = messages.map((m) => m.role === "user" && !blocks(m).some((b) => b.type === "tool_result"))
    .lastIndexOf(true)
  return messages.slice(start).reduce((n, m) => n + blocks(m).filter((b) => b.type === "tool_result").length, 0)
}

/**
 * A model that calls the first offered tool `turns` times (different arguments each time, so no repeat rail trips),
 * then answers; with `reasoning` on every reply (thinking, or reasoning text), and the report when finalizing.
 */
const toolLoop =
  (turns: number, reasoning: (step: string) => Partial<Fake.ReplySpec>) => (request: RecordedRequest) => {
    if (Fake.isFinalize(request)) {
      return request.wire === "anthropic"
        ? Fake.reply({
          ...reasoning("report"),
          toolCalls: [{ name: Anthropic.reportTool, arguments: Fake.demoReport }]
        })
        : Fake.reply({ ...reasoning("report"), text: JSON.stringify(Fake.demoReport) })
    }
    const done = resultsThisTurn(request)
    const tool = Fake.offeredTools(request)[0]
    if (tool !== undefined && done < turns) {
      return Fake.reply({
        ...reasoning(`step ${done + 1}`),
        text: `Step ${done + 1}.`,
        toolCalls: [{ name: tool.name, arguments: { q: `step-${done + 1}` } }]
      })
    }
    return Fake.reply({ ...reasoning("answer"), text: "Nothing is wrong." })
  }

/** Plays `instead` for the requests numbered in `at`, `base` for every other. */
const interrupt = (base: (r: RecordedRequest) => Behaviour, at: Record<number, Behaviour>) => (r: RecordedRequest) =>
  at[r.n] ?? base(r)

const thinks = (step: string) => ({ thinking: `Thinking about ${step}.` })

const assistants = (request: RecordedRequest | undefined) =>
  ((request?.body.messages ?? []) as ReadonlyArray<{ role: string; content: unknown }>).filter((m) =>
    m.role === "assistant"
  )
const firstBlock = (message: { content: unknown }) => ((message.content as ReadonlyArray<Json>)[0] ?? {}).type

const reasoningOf = (turns: ReadonlyArray<{ readonly entry: TurnEntry }>) =>
  turns.flatMap(({ entry }) =>
    entry.kind === "assistant" ? [entry.reasoning?.map((p) => `${p.provider}:${p.type}`) ?? []] : []
  )

layer(NodeHttpClient.layerUndici, { excludeTestServices: true })("Reasoning in tool loops over real HTTP", (it) => {
  describe("Anthropic with thinking", () => {
    it.scoped("three tool turns, each with signed thinking sent back first, through a 429 retry: nothing refused", () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({
          fallback: interrupt(toolLoop(3, thinks), { 3: Fake.rateLimited({ ms: 5 }) })
        })
        const claude = StormGuard.wrap(
          yield* Anthropic.make({
            name: "claude",
            model: "claude-test",
            baseUrl: fake.anthropicBaseUrl,
            apiKey: Redacted.make("sk-ant-test"),
            thinking: { type: "enabled", budgetTokens: 2048 }
          })
        )
        const run = yield* Harness.runBurst({ spec: Harness.agent({ tools: ["echo"] }) }).pipe(
          Effect.provide(Harness.layer({ providers: [claude], tools: Tools.all }))
        )

        expect(fake.refusals).toEqual([])
        expect(run.reason).toBe<ExitReason>("completed")
        expect(run.report.data).toEqual(Fake.demoReport)
        // The loop's calls streamed (thinking_delta, signature_delta); the finalize call did not.
        expect(fake.requests.map((r) => r.stream)).toEqual([...Array(fake.requests.length - 1).fill(true), false])
        // user, 3 × (assistant + results), the answer.
        expect(run.turns.map((t) => t.entry.kind)).toEqual([
          "user",
          ...Array(3).fill(["assistant", "tool_results"]).flat(),
          "assistant"
        ])
        expect(reasoningOf(run.turns)).toEqual(Array(4).fill(["claude:thinking"]))
        // Every request thought, and every assistant message sent back started with its signed thinking block.
        expect(fake.requests.every((r) => (r.body.thinking as Json | undefined)?.type === "enabled")).toBe(true)
        for (const request of fake.requests) {
          for (const message of assistants(request)) expect(firstBlock(message)).toBe("thinking")
        }
        // The 429 was retried with the same transcript; the finalize call offered the report tool without forcing.
        expect(fake.requests[2]?.body.messages).toEqual(fake.requests[3]?.body.messages)
        expect(fake.requests.at(-1)?.body.tool_choice).toEqual({ type: "auto" })
        // Prompt caching paid off: later calls read the prefix earlier ones wrote.
        expect(run.trajectory.usage.cacheReadTokens).toBeGreaterThan(0)
      }))

    it.scoped("a failover from OpenAI mid-cycle: the cycle goes on without thinking, the next burst thinks again", () =>
      Effect.gen(function*() {
        const serverError = Fake.status(500, { error: { message: "upstream exploded", type: "server_error" } }, {
          "retry-after-ms": "5"
        })
        const primary = yield* Fake.make({
          fallback: (r) =>
            r.n === 1
              ? Fake.reply({
                reasoningText: "I will call echo.",
                toolCalls: [{ name: "echo", arguments: { q: "from-openai" } }]
              })
              : serverError
        })
        const secondary = yield* Fake.make({ fallback: toolLoop(3, thinks) })
        const openai = StormGuard.wrap(
          yield* OpenAiCompat.make({
            name: "openai",
            model: "gpt-5",
            baseUrl: primary.openAiBaseUrl,
            apiKey: Redacted.make("sk-test"),
            reasoning: { effort: "low" },
            maxOutputTokens: 4000,
            maxAttempts: 1
          })
        )
        const claude = StormGuard.wrap(
          yield* Anthropic.make({
            name: "claude",
            model: "claude-test",
            baseUrl: secondary.anthropicBaseUrl,
            apiKey: Redacted.make("sk-ant-test"),
            thinking: { type: "enabled", budgetTokens: 2048 }
          })
        )
        const spec = Harness.agent({ tools: ["echo"] })
        // One store for both bursts, so the stored session replays whole.
        const [first, second] = yield* Harness.runBurst({ spec }).pipe(
          Effect.flatMap((landed) =>
            Effect.map(
              Harness.runBurst({ spec, session: landed.session, history: landed.messages, prompt: "Look again." }),
              (next) => [landed, next] as const
            )
          ),
          Effect.provide(Harness.layer({ providers: [openai, claude], tools: Tools.all }))
        )

        expect([primary.refusals, secondary.refusals]).toEqual([[], []])
        expect([first.reason, second.reason]).toEqual<Array<ExitReason>>(["completed", "completed"])
        expect(primary.requests[0]?.body).toMatchObject({ max_completion_tokens: 4000, reasoning_effort: "low" })
        // The first request to Claude continued OpenAI's open cycle: no thinking, and OpenAI's reasoning left out.
        const takeover = secondary.requests[0]
        expect(takeover?.body.thinking).toBeUndefined()
        expect(JSON.stringify(takeover?.body)).not.toContain("I will call echo.")
        expect(first.trajectory.decisions?.filter((d) => d._tag === "reasoning_dropped")).toMatchObject([
          { provider: "claude", parts: 1 }
        ])
        // The next burst opens with a user message: thinking again, three signed turns sent back verbatim.
        const thought = secondary.requests.filter((r) => r.body.thinking !== undefined)
        expect(thought.length).toBeGreaterThanOrEqual(4)
        const secondTurns = second.turns.filter((t) => t.seq > first.turns.at(-1)!.seq)
        expect(reasoningOf(secondTurns)).toEqual(Array(4).fill(["claude:thinking"]))
        const last = secondary.requests.at(-2)
        expect(assistants(last).filter((m) => firstBlock(m) === "thinking").length).toBeGreaterThanOrEqual(3)
      }))
  })

  describe("OpenAI Chat Completions with reasoning", () => {
    it.scoped("gpt-5 with an effort and a cap: three tool turns with reasoning tokens, retried once, nothing refused", () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({
          fallback: interrupt(toolLoop(3, () => ({ usage: { output: 40, reasoning: 32 } })), {
            2: Fake.rateLimited({ ms: 5 })
          })
        })
        const openai = StormGuard.wrap(
          yield* OpenAiCompat.make({
            name: "openai",
            model: "gpt-5",
            baseUrl: fake.openAiBaseUrl,
            apiKey: Redacted.make("sk-test"),
            reasoning: { effort: "medium" },
            maxOutputTokens: 8000
          })
        )
        const run = yield* Harness.runBurst({ spec: Harness.agent({ tools: ["echo"] }) }).pipe(
          Effect.provide(Harness.layer({ providers: [openai], tools: Tools.all }))
        )
        expect(fake.refusals).toEqual([])
        expect(run.reason).toBe<ExitReason>("completed")
        expect(run.report.data).toEqual(Fake.demoReport)
        expect(run.turns.filter((t) => t.entry.kind === "tool_results")).toHaveLength(3)
        expect(fake.requests.every((r) => r.body.max_completion_tokens === 8000 && r.body.max_tokens === undefined))
          .toBe(true)
        expect(run.trajectory.usage.reasoningTokens).toBe(32 * fake.requests.filter((r) => r.n !== 2).length)
      }))

    it.scoped("a compatible server's reasoning text: replayed when asked, never to a server that refuses it", () =>
      Effect.gen(function*() {
        const reasons = (step: string) => ({ reasoningText: `Reasoning about ${step}.` })
        const replaying = yield* Fake.make({ fallback: toolLoop(3, reasons) })
        const refusing = yield* Fake.make({ fallback: toolLoop(3, reasons), refuseReasoningContent: true })
        const make = (name: string, fake: Fake.FakeProvider, replayReasoning: boolean) =>
          OpenAiCompat.make({ name, model: "deepseek-reasoner", baseUrl: fake.openAiBaseUrl, replayReasoning })
        const spec = Harness.agent({ tools: ["echo"] })
        const replayed = yield* Harness.runBurst({ spec }).pipe(
          Effect.provide(Harness.layer({ providers: [yield* make("compat", replaying, true)], tools: Tools.all }))
        )
        const kept = yield* Harness.runBurst({ spec }).pipe(
          Effect.provide(Harness.layer({ providers: [yield* make("deepseek", refusing, false)], tools: Tools.all }))
        )
        expect([replaying.refusals, refusing.refusals]).toEqual([[], []])
        expect([replayed.reason, kept.reason]).toEqual<Array<ExitReason>>(["completed", "completed"])
        expect(reasoningOf(kept.turns)).toEqual(Array(4).fill(["deepseek:reasoning_text"]))
        const sentBack = assistants(replaying.requests.at(-2)).map((m) => (m as Json).reasoning_content)
        expect(sentBack).toEqual(["Reasoning about step 1.", "Reasoning about step 2.", "Reasoning about step 3."])
        expect(JSON.stringify(refusing.requests.map((r) => r.body))).not.toContain("reasoning_content")
      }))
  })
})

// ---------------------------------------------------------------------------------------------------------------
// The property over random tool loops

type Fault = "ok" | "rate_limit" | "server" | "cut" | "overflow"
const fault: fc.Arbitrary<Fault> = fc.constantFrom<Fault>("ok", "ok", "ok", "rate_limit", "server", "cut", "overflow")

const overflow = (wire: Fake.Wire): Behaviour =>
  wire === "anthropic"
    ? Fake.status(400, {
      type: "error",
      error: { type: "invalid_request_error", message: "prompt is too long: 210000 tokens > 200000 maximum" }
    })
    : Fake.status(400, {
      error: {
        message:
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
        type: "invalid_request_error",
        param: "messages",
        code: "context_length_exceeded"
      }
    })

/** `base`, except that request n meets `faults[n - 1]`. */
const faulty = (
  faults: ReadonlyArray<Fault>,
  reasoning: (step: string) => Partial<Fake.ReplySpec>,
  base: (r: RecordedRequest) => Behaviour
) =>
(r: RecordedRequest): Behaviour => {
  switch (faults[r.n - 1] ?? "ok") {
    case "rate_limit":
      return Fake.rateLimited({ ms: 5 })
    case "server":
      return Fake.status(500, { error: { message: "upstream exploded", type: "server_error" } }, {
        "retry-after-ms": "5"
      })
    case "cut":
      return Fake.reply({
        ...reasoning("cut"),
        text: "The cause is proba",
        finish: r.wire === "anthropic" ? "max_tokens" : "length"
      })
    case "overflow":
      return overflow(r.wire === "anthropic" ? "anthropic" : "openai")
    case "ok":
      return base(r)
  }
}

type Primary = "claude-manual" | "claude-adaptive" | "gpt-5" | "compat-replaying" | "compat-refusing"

const scenario = fc.record({
  primary: fc.constantFrom<Primary>("claude-manual", "claude-adaptive", "gpt-5", "compat-replaying", "compat-refusing"),
  backup: fc.boolean(),
  turns: fc.integer({ min: 1, max: 4 }),
  faults: fc.array(fault, { maxLength: 12 }),
  backupFaults: fc.array(fault, { maxLength: 12 })
})

const reasonsAbout = (step: string) => ({ reasoningText: `Reasoning about ${step}.` })

const play = (s: typeof scenario extends fc.Arbitrary<infer A> ? A : never) =>
  Effect.gen(function*() {
    const claudeLike = s.primary === "claude-manual" || s.primary === "claude-adaptive"
    const reasoning = claudeLike ? thinks : reasonsAbout
    const primaryFake = yield* Fake.make({
      fallback: faulty(s.faults, reasoning, toolLoop(s.turns, reasoning)),
      refuseReasoningContent: s.primary === "compat-refusing"
    })
    const backupFake = yield* Fake.make({ fallback: faulty(s.backupFaults, thinks, toolLoop(s.turns, thinks)) })
    const common = { apiKey: Redacted.make("sk-test"), maxAttempts: 2 }
    const primary = claudeLike
      ? yield* Anthropic.make({
        ...common,
        name: "primary",
        model: "claude-test",
        baseUrl: primaryFake.anthropicBaseUrl,
        thinking: s.primary === "claude-manual" ? { type: "enabled", budgetTokens: 2048 } : { type: "adaptive" }
      })
      : yield* OpenAiCompat.make({
        ...common,
        name: "primary",
        model: s.primary === "gpt-5" ? "gpt-5" : "deepseek-reasoner",
        baseUrl: primaryFake.openAiBaseUrl,
        maxOutputTokens: 4000,
        ...(s.primary === "gpt-5" ? { reasoning: { effort: "low" } } : {}),
        replayReasoning: s.primary === "compat-replaying"
      })
    const backup = yield* Anthropic.make({
      ...common,
      name: "backup",
      model: "claude-test",
      baseUrl: backupFake.anthropicBaseUrl,
      thinking: { type: "enabled", budgetTokens: 2048 }
    })
    const providers = s.backup ? [primary, backup] : [primary]
    const run = yield* Harness.runBurst({ spec: Harness.agent({ tools: ["echo"] }) }).pipe(
      Effect.provide(Harness.layer({ providers: providers.map((p) => StormGuard.wrap(p)), tools: Tools.all }))
    )
    return { run, refusals: [...primaryFake.refusals, ...backupFake.refusals] }
  })

describe("Reasoning in random tool loops", () => {
  vitest(
    "routes, retries, failovers, cut replies and prunes never make a request the strict fakes refuse",
    async () => {
      await fc.assert(
        fc.asyncProperty(scenario, async (s) => {
          const { refusals, run } = await Effect.runPromise(
            play(s).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici))
          )
          expect(refusals).toEqual([])
          expect(run.trajectory.errors.filter((e) => e.code === "provider.bad_request")).toEqual([])
        }),
        { numRuns: 25 }
      )
    },
    120_000
  )
})
