/**
 * The `corral` command line end to end, as child processes of `bin/corral.js`: help on every command, `run --demo`
 * (exit code and report), `replay` of what it stored, `migrate`, `agents publish`, and the error paths.
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
import { corral, corralRun, eventually } from "../support/ServerHarness.js"

const tempDir = Effect.acquireRelease(
  Effect.sync(() => mkdtempSync(join(tmpdir(), "corral-cli-"))),
  (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
)

const quick = { CORRAL_DEMO_DELAY_MS: "0" }

describe("corral CLI", () => {
  it.live("prints help for itself and for every command", () =>
    Effect.gen(function*() {
      const top = yield* corralRun(["--help"])
      expect(top.code).toBe(0)
      for (const command of Cli.commands) expect(top.stdout).toContain(command.name)
      for (const name of ["CORRAL_CONFIG", "CORRAL_PORT", "DATABASE_URL", "CORRAL_API_KEYS", "CORRAL_DATA_DIR"]) {
        expect(top.stdout).toContain(name)
      }
      const run = yield* corralRun(["run", "--help"])
      expect(run.code).toBe(0)
      expect(run.stdout).toContain("Usage: corral run")
      // Every other command's help, without a process each: the dispatcher answers --help from the same text.
      for (const entry of Cli.commands) {
        const command = yield* Effect.promise(entry.load)
        expect(command.help).toContain(`Usage: corral ${entry.name}`)
        expect(yield* Cli.program([entry.name, "--help"])).toBe(0)
      }
      expect(yield* Cli.program(["frobnicate"])).toBe(1)
      expect(yield* Cli.program(["run", "--demo", "--frob", "x"])).toBe(1)
      expect(yield* Cli.program(["run", "--scope"])).toBe(1)
    }), { timeout: 180_000 })

  it.scopedLive(
    "migrates a fresh database, runs the demo end to end (exit 0, report printed), replays it",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const env = { ...quick, CORRAL_DATA_DIR: join(dir, "data") }
        const migrated = yield* corralRun(["migrate"], env)
        expect(migrated.code, migrated.stderr).toBe(0)
        // A new embedded directory starts from the build's snapshot when there is one (`npm run build` has run in
        // this checkout: docs/storage.md), already migrated; without one, initdb and every migration.
        if (migrated.stdout.includes("created from the snapshot")) {
          expect(migrated.stdout).toContain("nothing to apply")
        } else expect(migrated.stdout).toContain("applied 0001_init")

        const run = yield* corralRun(["run", "--demo", "Why is checkout failing?"], env)
        expect(run.code, run.stderr).toBe(0)
        expect(run.stdout).toContain("user       Why is checkout failing?")
        expect(run.stdout).toContain("running    demo_status")
        expect(run.stdout).toContain("exit       completed")
        expect(run.stdout).toContain("report     (model)")
        expect(run.stdout).toContain("pool exhausted")
        const id = /replay with: corral replay (ses_[0-9a-f]+)/.exec(run.stdout)?.[1]
        expect(id).toBeDefined()

        const replay = yield* corralRun(["replay", id!], env)
        expect(replay.code, replay.stderr).toBe(0)
        expect(replay.stdout).toContain(`session ${id}`)
        expect(replay.stdout).toContain("assistant")
        expect(replay.stdout).toContain("exit       completed")

        // --verify re-runs the burst against its record: the rails decide the same way again.
        const verified = yield* corralRun(["replay", id!, "--verify"], env)
        expect(verified.code, verified.stdout + verified.stderr).toBe(0)
        expect(verified.stdout).toMatch(/burst 1 run_[0-9a-f]+ completed: verified: \d+ attempt/)
        expect(verified.stdout).toContain("no divergence")

        // A rail changed since the recording (here: the per-burst ceiling the burst ran under) makes it diverge.
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          const [trajectory] = yield* store.trajectories("local", id!)
          const record = trajectory!.replay!
          yield* store.saveTrajectory({
            ...trajectory!,
            replay: { ...record, limits: { ...record.limits, modelCallsPerBurst: 1 } }
          })
        }).pipe(
          Effect.provide(SqlStore.layer().pipe(Layer.provide(Embedded.layerEmbedded({ dataDir: join(dir, "data") })))),
          Effect.scoped
        )
        const diverged = yield* corralRun(["replay", id!, "--verify"], env)
        expect(diverged.code, diverged.stdout + diverged.stderr).toBe(1)
        expect(diverged.stdout).toMatch(/burst 1 run_[0-9a-f]+: DIVERGED at \S+/)
        expect(diverged.stdout).toContain("recorded: ")
        expect(diverged.stdout).toContain("replay: diverged")

        const again = yield* corralRun(["migrate"], env)
        expect(again.code, again.stderr).toBe(0)
        expect(again.stdout).toContain("nothing to apply")
      }),
    { timeout: 300_000 }
  )

  // The rest runs the same dispatcher in-process (configuration through a ConfigProvider, as from the environment).
  const inProcess = (argv: ReadonlyArray<string>, env: Record<string, string>) =>
    Cli.program(argv).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

  it.scopedLive(
    "exits 2 when the burst ends otherwise than completed (a write waits, Ctrl-C cancels)",
    () =>
      Effect.gen(function*() {
        expect(yield* inProcess(["run", "--demo", "--memory", "Please fix checkout"], quick)).toBe(2)
        expect(yield* inProcess(["run", "--demo", "--memory", "Why is search slow?"], quick)).toBe(0)

        // Ctrl-C cancels the burst, still prints how it landed, and exits 2.
        const child = corral(["run", "--demo", "--memory", "Why is checkout failing?"], {
          CORRAL_DEMO_DELAY_MS: "2000"
        })
        yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))
        yield* eventually(
          "the first tool call",
          Effect.sync(() => child.stdout().includes("running    demo_status") ? true : undefined),
          "90 seconds"
        )
        child.process.kill("SIGINT")
        const code = yield* Effect.promise(() => child.exited)
        expect(code, child.stderr()).toBe(2)
        expect(child.stdout()).toContain("interrupted: cancelling the burst")
        expect(child.stdout()).toContain("exit       cancelled")
        expect(child.stdout()).toContain("report     (fallback")
      }),
    { timeout: 180_000 }
  )

  it.scopedLive(
    "publishes an agent file, refuses an invalid one or an invalid configuration (exit 1)",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const good = join(dir, "triage.json")
        const bad = join(dir, "bad.json")
        writeFileSync(
          good,
          JSON.stringify({ id: "triage", version: 1, name: "Triage", instructions: "Investigate.", tier: "demo" })
        )
        writeFileSync(bad, JSON.stringify({ id: "Bad", version: 0, tools: ["rm_rf"], tier: "gold" }))
        const memory = { CORRAL_STORE: "memory" }
        expect(yield* inProcess(["agents", "publish", good], memory)).toBe(0)
        expect(yield* inProcess(["agents", "publish", bad], memory)).toBe(1)
        expect(yield* inProcess(["agents", "publish"], memory)).toBe(1)
        expect(yield* inProcess(["run", "--agent", bad, "--scope", "s", "hello"], memory)).toBe(1)
        expect(yield* inProcess(["run", "--agent", good, "--demo", "--scope", "s", "Why is auth failing?"], memory))
          .toBe(0)
        expect(yield* inProcess(["migrate"], memory)).toBe(0)
        expect(yield* inProcess(["replay", "ses_missing"], memory)).toBe(1)
        expect(yield* inProcess(["migrate"], { CORRAL_PORT: "http" })).toBe(1)

        // The wording of a refusal, as a person reads it on stderr.
        const refused = yield* corralRun(["agents", "publish", bad], memory)
        expect(refused.code).toBe(1)
        for (const path of ["id", "version", "name", "instructions"]) expect(refused.stderr).toContain(`- ${path}:`)
        const badConfig = yield* corralRun(["migrate"], { CORRAL_PORT: "http", CORRAL_LIMITS: "{\"toolCalls\": 999}" })
        expect(badConfig.code).toBe(1)
        expect(badConfig.stderr).toContain("CORRAL_PORT")
        expect(badConfig.stderr).toContain("limits.toolCalls (from CORRAL_LIMITS)")
      }),
    { timeout: 180_000 }
  )
})
