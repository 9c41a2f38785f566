import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

interface Run {
  readonly code: number
  readonly results: ReadonlyArray<Record<string, unknown>>
  readonly stderr: string
}

/**
 * Runs `scripts/bench/workload.ts --quick` in a fresh process, as the benchmark does, and parses its RESULT lines —
 * over the sources (`--conditions=corral-source`), as every test runs Corral: the benchmark's default, the package
 * build in dist/, is what scripts/pack-check.sh builds and checks.
 */
const workload = (scenario: "A" | "B" | "C", sessions: number) =>
  Effect.async<Run>((resume) => {
    const args = [
      "--expose-gc",
      "--conditions=corral-source",
      "--import",
      "tsx",
      "scripts/bench/workload.ts",
      "--scenario",
      scenario,
      "--quick"
    ]
    const child = execFile(
      process.execPath,
      [...args, "--sessions", String(sessions), "--warmup", "2"],
      { cwd: root, timeout: 55_000, maxBuffer: 4 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
        const results = stdout.split("\n").filter((line) => line.startsWith("RESULT ")).map((line) =>
          JSON.parse(line.slice(7)) as Record<string, unknown>
        )
        resume(Effect.succeed({ code, results, stderr }))
      }
    )
    return Effect.sync(() => child.kill())
  })

describe("workload benchmark program", () => {
  // One fresh process per scenario, all three at once: the cost is process start-up (a few seconds on an idle
  // machine), not the tiny workloads; the generous timeout only absorbs a machine busy with other work.
  it.live("runs A, B and C in --quick mode: one RESULT line each, every check passed", () =>
    Effect.gen(function*() {
      const [a, b, c] = yield* Effect.all([workload("A", 10), workload("B", 20), workload("C", 20)], {
        concurrency: "unbounded"
      })
      for (const run of [a, b, c]) {
        expect(run.stderr).toBe("")
        expect(run.code).toBe(0)
        expect(run.results).toHaveLength(1)
      }
      expect(a.results[0]).toMatchObject({ framework: "corral", scenario: "A", checks: "passed", batches: 1 })
      expect(a.results[0]!.batch_us_per_turn).toEqual([a.results[0]!.us_per_turn])
      expect(String(a.results[0]!.notes)).toContain("Corral from its TypeScript sources")
      expect(b.results[0]).toMatchObject({ framework: "corral", scenario: "B", checks: "passed", sessions: 20 })
      expect(b.results[0]!.peak_rss_mb).toBeGreaterThan(0)
      expect(c.results[0]).toMatchObject({ framework: "corral", scenario: "C", checks: "passed", sessions: 20 })
      expect(c.results[0]!.bytes_per_session).toBeGreaterThan(0)
    }), 60_000)
})
