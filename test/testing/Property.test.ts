/**
 * `Harness.property`: a property test whose runs are slow still ends inside vitest's default 5 s per test, with the
 * runs that fit, and still fails on a counterexample.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { Harness } from "../../src/testing/index.js"

// Real time (fast-check's clock), not the TestClock: the bound is on what the machine takes.
const slowRun = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

let runs = 0
let started = 0

describe("Harness.property", () => {
  it.effect.prop(
    "ends a property of 1,000 runs of 50 ms each inside vitest's default 5 s, after the runs that fit in `within`",
    { n: fc.integer() },
    () =>
      Effect.gen(function*() {
        if (runs === 0) started = Date.now()
        runs++
        yield* slowRun(50)
      }),
    // 1,000 × 50 ms is 50 s: without the bound this test times out at vitest's default.
    { ...Harness.property({ numRuns: 1_000, within: "1 second" }), timeout: 5_000 }
  )

  it("made some runs, stopped at `within`, and did not start another after it", () => {
    expect(runs).toBeGreaterThan(1)
    expect(runs).toBeLessThan(1_000)
    expect(Date.now() - started).toBeLessThan(4_000)
  })

  it("still fails on a counterexample found in time", async () => {
    const outcome = await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: 100 }), async (n) => n < 50),
      Harness.property({ numRuns: 1_000, seed: 1 }).fastCheck
    ).then(() => "passed", (error: unknown) => String(error))
    expect(outcome).toMatch(/Property failed/)
  })
})
