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

const assistants = (turns: ReadonlyArray<{ readonly entry: { readonly kind: string } }>) =>
  turns.flatMap((t) => t.entry.kind === "assistant" ? [t.entry as { readonly reasoning?: ReadonlyArray<unknown> }] : [])

describe("corral run on reasoning models", () => {
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
