/**
 * The server-path benchmark's small fast case: `scripts/bench/server.ts` with a handful of sessions on the embedded
 * store, in a fresh process as `npm run bench:server` runs it — a real `corral serve`, the fake model over HTTP, an
 * MCP stdio tool, SSE followers. It must land every session `completed` and report figures that add up.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))

describe("server benchmark program", () => {
  it.live(
    "lands every session through the HTTP API and reports sessions/s, CPU per turn, landing times and RSS",
    () =>
      Effect.gen(function*() {
        const run = yield* Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
          const child = execFile(
            process.execPath,
            [
              "--conditions=corral-source",
              "--import",
              "tsx",
              "scripts/bench/server.ts",
              "--sessions",
              "6",
              "--warmup",
              "2",
              "--store",
              "embedded"
            ],
            { cwd: root, timeout: 170_000, maxBuffer: 4 * 1024 * 1024 },
            (error, stdout, stderr) => {
              const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
              resume(Effect.succeed({ code, stdout, stderr }))
            }
          )
          return Effect.sync(() => child.kill())
        })
        const line = run.stdout.split("\n").find((l) => l.startsWith("RESULT "))
        expect(line, `${run.stdout}\n${run.stderr}`).toBeDefined()
        expect(run.code).toBe(0)
        const result = JSON.parse(line!.slice(7)) as Record<string, unknown>
        expect(result).toMatchObject({
          store: "embedded",
          sessions: 6,
          landed: 6,
          failed: 0,
          exit_reasons: { completed: 6 }
        })
        // 3–5 model turns per session plus its finalize call.
        expect(result.model_turns).toBeGreaterThanOrEqual(6 * 4)
        expect(result.model_turns).toBeLessThanOrEqual(6 * 6)
        for (const key of ["sessions_per_s", "server_cpu_ms_per_turn", "land_p50_ms", "peak_rss_mb"]) {
          expect(result[key], key).toBeGreaterThan(0)
        }
        expect(result.land_p99_ms).toBeGreaterThanOrEqual(result.land_p50_ms as number)
      }),
    180_000
  )
})
