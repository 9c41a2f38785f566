/**
 * `corral serve --cluster` refuses a store other nodes cannot share, at once and saying what to do: without
 * `DATABASE_URL` it would run on the embedded PGlite (one process's database, whose advisory locks do not exclude)
 * or in memory. Child processes of `bin/corral.js`, as an operator runs them.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { corralRun } from "../support/ServerHarness.js"

const inTempDir = <A, E>(body: (dir: string) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), "corral-cluster-cli-"))),
    body,
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

describe("corral serve --cluster", () => {
  it.live(
    "without DATABASE_URL: exits 1 at once, naming DATABASE_URL and why the embedded store will not do",
    () =>
      inTempDir((dir) =>
        Effect.gen(function*() {
          const started = Date.now()
          const run = yield* corralRun(
            ["serve", "--cluster", "--port", "0"],
            { CORRAL_DATA_DIR: join(dir, "data") },
            60_000
          )
          expect(run.code, run.stdout + run.stderr).toBe(1)
          expect(run.stderr).toContain("cluster mode needs a Postgres database shared by every node: set DATABASE_URL")
          expect(run.stderr).toContain("embedded PGlite")
          // It never got as far as listening.
          expect(run.stdout + run.stderr).not.toContain("listening on")
          expect(Date.now() - started).toBeLessThan(30_000)
        })
      ),
    { timeout: 90_000 }
  )

  it.live("on the memory store (CORRAL_CLUSTER=true --memory): refused the same way", () =>
    Effect.gen(function*() {
      const run = yield* corralRun(["serve", "--memory", "--port", "0"], { CORRAL_CLUSTER: "true" })
      expect(run.code, run.stdout + run.stderr).toBe(1)
      expect(run.stderr).toContain("cluster mode needs a Postgres database shared by every node: set DATABASE_URL")
      expect(run.stderr).toContain("memory store")
    }), { timeout: 90_000 })

  it.live("--help says what cluster mode needs and which variables place the runner", () =>
    Effect.gen(function*() {
      const help = yield* corralRun(["serve", "--help"])
      expect(help.code).toBe(0)
      for (
        const text of ["--cluster", "DATABASE_URL", "CORRAL_CLUSTER_HOST", "CORRAL_CLUSTER_PORT", "docs/cluster.md"]
      ) {
        expect(help.stdout).toContain(text)
      }
    }), { timeout: 90_000 })
})
