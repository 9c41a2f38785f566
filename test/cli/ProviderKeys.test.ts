/**
 * An `apiKeyEnv` naming an unset variable is never silent (issue 13 §6): `corral run` refuses it before the session
 * starts (exit 1, naming provider and variable) unless the provider's `baseUrl` is a loopback address; `corral
 * serve` starts and warns, naming both.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Cli from "../../src/cli/Cli.js"
import * as Fake from "../support/FakeProvider.js"
import { corral, corralRun, eventually } from "../support/ServerHarness.js"

const UNSET = "CORRAL_TEST_KEY_THAT_IS_NOT_SET"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "corral-keys-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

/** A corral.json with one provider `primary` reading its key from `UNSET`, and an agent routed to it. */
const files = (dir: string, baseUrl: string, extra: Record<string, unknown> = {}) => {
  const config = join(dir, "corral.json")
  const agent = join(dir, "agent.json")
  writeFileSync(
    config,
    JSON.stringify({
      providers: { primary: { api: "openai", baseUrl, apiKeyEnv: UNSET, model: "fake-model", ...extra } },
      tiers: { default: ["primary"] }
    })
  )
  writeFileSync(agent, JSON.stringify({ id: "triage", version: 1, name: "Triage", instructions: "Investigate." }))
  return { config, agent }
}

const inProcess = (argv: ReadonlyArray<string>, env: Record<string, string>) =>
  Cli.program(argv).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

describe("an apiKeyEnv naming an unset variable", () => {
  it.scopedLive(
    "corral run refuses it (exit 1, provider and variable named) unless the provider is on loopback",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const remote = files(dir, "https://llm.example.com/v1")
        const run = ["run", "--agent", remote.agent, "--scope", "s", "Why is checkout failing?"]
        expect(yield* inProcess(run, { CORRAL_CONFIG: remote.config, CORRAL_STORE: "memory" })).toBe(1)
        // With the key set, the same configuration passes the check (and the session then runs: exit 0 or 2, not 1
        // for the key). Here it reaches llm.example.com, which does not resolve: the burst ends provider_failed.
        const refused = yield* corralRun(run, { CORRAL_CONFIG: remote.config, CORRAL_STORE: "memory" })
        expect(refused.code).toBe(1)
        expect(refused.stderr).toContain("provider \"primary\"")
        expect(refused.stderr).toContain(UNSET)
        expect(refused.stdout).not.toContain("session ses_")

        // A loopback server may need no key: the session runs against it.
        const fake = yield* Fake.make()
        const local = files(yield* tempDir, fake.openAiBaseUrl)
        const code = yield* inProcess(
          ["run", "--agent", local.agent, "--scope", "s", "Why is checkout failing?"],
          { CORRAL_CONFIG: local.config, CORRAL_STORE: "memory" }
        )
        expect(code).toBe(0)
        expect(fake.requests.length).toBeGreaterThan(0)
      }),
    { timeout: 180_000 }
  )

  it.scopedLive(
    "corral serve refuses to start (the field named) unless the provider says apiKeyOptional: then it warns",
    () =>
      Effect.gen(function*() {
        const refused = corral(
          ["serve", "--port", "0"],
          { CORRAL_CONFIG: files(yield* tempDir, "https://llm.example.com/v1").config, CORRAL_STORE: "memory" },
          yield* tempDir
        )
        yield* Effect.addFinalizer(() => Effect.sync(() => refused.process.kill("SIGKILL")))
        const code = yield* eventually(
          "serve to exit",
          Effect.sync(() => refused.process.exitCode ?? undefined),
          "90 seconds"
        )
        expect(code).toBe(1)
        expect(refused.stderr()).toContain(`providers.primary.apiKeyEnv: ${UNSET} is not set`)
        expect(refused.stderr()).toContain("\"apiKeyOptional\": true")
        expect(refused.stdout()).not.toMatch(/listening on http/)

        const dir = yield* tempDir
        const { config } = files(dir, "https://llm.example.com/v1", { apiKeyOptional: true })
        const child = corral(["serve", "--port", "0"], { CORRAL_CONFIG: config, CORRAL_STORE: "memory" }, dir)
        yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
        const output = () => child.stdout() + child.stderr()
        yield* eventually(
          "the server to listen",
          Effect.sync(() => /listening on http/.test(output()) ? true : undefined),
          "90 seconds"
        )
        const warning = yield* eventually(
          "the warning",
          Effect.sync(() => output().split("\n").find((line) => line.includes(UNSET))),
          "10 seconds"
        )
        // A child's stdout is not a terminal: its log lines are JSON objects.
        const line = JSON.parse(warning) as { readonly level: string; readonly message: string }
        expect(line.message).toContain("provider \"primary\"")
        expect(line.level).toMatch(/WARN/i)
      }),
    { timeout: 180_000 }
  )
})
