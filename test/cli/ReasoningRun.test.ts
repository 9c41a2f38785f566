/**
 * `corral run` of a tool-using agent on today's reasoning models, end to end: the configuration as a user writes it
 * (`corral.json` with `thinking` / `reasoning`), a real stdio MCP tool, and strict fakes over real HTTP that refuse
 * what the real APIs refuse (test/support/FakeProvider.ts, FakeResponses.ts). Each run must complete with no request
 * refused, the reasoning parts stored with their turns and `replay --verify` verifying them.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Cli from "../../src/cli/Cli.js"
import * as Embedded from "../../src/store/Embedded.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import * as Fake from "../support/FakeProvider.js"
import * as FakeResponses from "../support/FakeResponses.js"
import { fixture } from "../support/McpServers.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "corral-reasoning-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const inProcess = (argv: ReadonlyArray<string>, env: Record<string, string>) =>
  Cli.program(argv).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

/** Writes corral.json (one provider, the default tier) and an agent using the fixture's `echo` tool. */
const files = (dir: string, provider: Record<string, unknown>) => {
  const config = join(dir, "corral.json")
  const agent = join(dir, "agent.json")
  writeFileSync(
    config,
    JSON.stringify({
      providers: { main: provider },
      tiers: { default: ["main"] },
      mcpServers: { fx: fixture(["--only", "echo"], { effects: { echo: "read" } }) }
    })
  )
  writeFileSync(
    agent,
    JSON.stringify({ id: "triage", version: 1, name: "Triage", instructions: "Investigate.", tools: ["echo"] })
  )
  return { config, agent }
}

/** The stored session of the run in `dataDir` (the only one), its turns. */
const stored = (dataDir: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const [session] = (yield* store.listSessions("local", { limit: 5 })).sessions
    const turns = yield* store.turns("local", session!.id)
    return { id: session!.id, turns }
  }).pipe(
    Effect.provide(SqlStore.layer().pipe(Layer.provide(Embedded.layerEmbedded({ dataDir })))),
    Effect.scoped
  )

// The tool results a Chat Completions or Messages request carries: how many tool turns the loop has done.
const toolTurns = (request: Fake.RecordedRequest): number =>
  (request.body.messages as ReadonlyArray<{ readonly role?: string; readonly content?: unknown }>).filter((m) =>
    m.role === "tool" ||
    (Array.isArray(m.content) && m.content.some((b: { readonly type?: string }) => b.type === "tool_result"))
  ).length

/** Three tool turns, each with its reasoning (thinking when the request asks for it), then an answer; finalize. */
const reasoningLoop = (request: Fake.RecordedRequest): Fake.Behaviour => {
  const done = toolTurns(request)
  if (request.body.tools === undefined || done >= 3) {
    const final = Fake.demo(request)
    if (final._tag !== "Reply" || final.reply.toolCalls !== undefined) return final
    return Fake.reply({ ...final.reply, thinking: "That is enough evidence.", reasoningText: "Enough evidence." })
  }
  return Fake.reply({
    text: done === 0 ? "Let me look." : "",
    thinking: `Turn ${done + 1}: what do the logs say?`,
    reasoningText: `Turn ${done + 1}: check the logs.`,
    toolCalls: [{ name: "echo", arguments: { message: `turn ${done + 1}` } }],
    usage: { input: 200, output: 120, reasoning: 80 }
  })
}

const assistants = (turns: ReadonlyArray<{ readonly entry: { readonly kind: string } }>) =>
  turns.flatMap((t) => t.entry.kind === "assistant" ? [t.entry as { readonly reasoning?: ReadonlyArray<unknown> }] : [])

describe("corral run on reasoning models", () => {
  it.scopedLive(
    "Claude with extended thinking: three signed thinking blocks carried back verbatim, cache breakpoints, replay verified",
    () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({ fallback: reasoningLoop })
        const dir = yield* tempDir
        const { agent, config } = files(dir, {
          api: "anthropic",
          baseUrl: fake.anthropicBaseUrl,
          model: "claude-sonnet-4-5",
          maxOutputTokens: 16_000,
          thinking: { budgetTokens: 4_000 }
        })
        const env = { CORRAL_CONFIG: config, CORRAL_DATA_DIR: join(dir, "data") }
        const code = yield* inProcess(["run", "--agent", agent, "--scope", "s", "Why is checkout failing?"], env)
        expect(fake.refusals).toEqual([])
        expect(code).toBe(0)
        // Three tool turns, the answer, the finalize call: every one with thinking on and cache breakpoints.
        expect(fake.requests.length).toBe(5)
        for (const r of fake.requests) {
          expect(r.body.thinking).toEqual({ type: "enabled", budget_tokens: 4_000 })
          expect(JSON.stringify(r.body)).toContain("\"cache_control\":{\"type\":\"ephemeral\"}")
        }
        const { id, turns } = yield* stored(join(dir, "data"))
        expect(assistants(turns).filter((t) => (t.reasoning?.length ?? 0) > 0).length).toBe(4)
        // The fourth request's last assistant message starts with the third turn's thinking block, signed.
        const messages = fake.requests[3]!.body.messages as ReadonlyArray<
          { readonly role: string; readonly content: ReadonlyArray<Record<string, unknown>> }
        >
        const lastAssistant = messages.filter((m) => m.role === "assistant").at(-1)!
        expect(lastAssistant.content[0]).toEqual({
          type: "thinking",
          thinking: "Turn 3: what do the logs say?",
          signature: fake.sign("Turn 3: what do the logs say?")
        })
        expect(yield* inProcess(["replay", id, "--verify"], env)).toBe(0)
      }),
    { timeout: 180_000 }
  )

  it.scopedLive(
    "gpt-5 on Chat Completions with reasoning effort: max_completion_tokens, reasoning tokens counted, replay verified",
    () =>
      Effect.gen(function*() {
        const fake = yield* Fake.make({ fallback: reasoningLoop })
        const dir = yield* tempDir
        const { agent, config } = files(dir, {
          api: "openai",
          baseUrl: fake.openAiBaseUrl,
          model: "gpt-5",
          reasoning: { effort: "high" },
          maxOutputTokens: 8_000
        })
        const env = { CORRAL_CONFIG: config, CORRAL_DATA_DIR: join(dir, "data") }
        const code = yield* inProcess(["run", "--agent", agent, "--scope", "s", "Why is checkout failing?"], env)
        expect(fake.refusals).toEqual([])
        expect(code).toBe(0)
        expect(fake.requests.length).toBe(5)
        for (const r of fake.requests) {
          expect(r.body.reasoning_effort).toBe("high")
          expect(r.body.max_completion_tokens).toBe(8_000)
          expect(r.body.max_tokens).toBeUndefined()
        }
        const { id } = yield* stored(join(dir, "data"))
        const trajectories = yield* Effect.gen(function*() {
          const store = yield* SessionStore
          return yield* store.trajectories("local", id)
        }).pipe(
          Effect.provide(SqlStore.layer().pipe(Layer.provide(Embedded.layerEmbedded({ dataDir: join(dir, "data") })))),
          Effect.scoped
        )
        expect(trajectories[0]!.usage.reasoningTokens).toBe(3 * 80)
        expect(yield* inProcess(["replay", id, "--verify"], env)).toBe(0)
      }),
    { timeout: 180_000 }
  )

  it.scopedLive(
    "gpt-5 on the Responses API with reasoning effort: three tool turns, reasoning carried, replay verified",
    () =>
      Effect.gen(function*() {
        const fake = yield* FakeResponses.make({ fallback: FakeResponses.demo(3) })
        const dir = yield* tempDir
        const { agent, config } = files(dir, {
          api: "openai-responses",
          baseUrl: fake.baseUrl,
          model: "gpt-5",
          reasoning: { effort: "medium" }
        })
        const env = { CORRAL_CONFIG: config, CORRAL_DATA_DIR: join(dir, "data") }
        const code = yield* inProcess(["run", "--agent", agent, "--scope", "s", "Why is checkout failing?"], env)
        expect(fake.refusals).toEqual([])
        expect(code).toBe(0)
        // Three tool turns and the answer, then the finalize call.
        expect(fake.requests.length).toBe(5)
        expect(fake.requests.every((r) => r.body.store === false && r.body.reasoning !== undefined)).toBe(true)
        const { id, turns } = yield* stored(join(dir, "data"))
        const withReasoning = assistants(turns).filter((t) => (t.reasoning?.length ?? 0) > 0)
        expect(withReasoning.length).toBe(4)
        // Each later request carried the earlier turns' reasoning items back, before their calls.
        const last = fake.requests[3]!.body.input as ReadonlyArray<{ readonly type?: string }>
        expect(last.filter((item) => item.type === "reasoning").length).toBe(3)
        expect(yield* inProcess(["replay", id, "--verify"], env)).toBe(0)
      }),
    { timeout: 180_000 }
  )
})
