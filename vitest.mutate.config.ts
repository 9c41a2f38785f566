import { defineConfig } from "vitest/config"
import base from "./vitest.config.js"

// The tests `npm run mutate` runs against each mutant (stryker.config.mjs): those of the code it mutates — the rails,
// the session, the provider chain — and not the whole suite, which on a 2-core machine would take hours per run.
// Stryker runs only the tests that cover a mutant (`coverageAnalysis: "perTest"`), so a wider list costs mostly in the
// dry run; the slowest files (SessionActor ~30 s, LoopProperties ~16 s, Durability ~9 s) are the ones to leave out
// when narrowing a run to one folder: `CORRAL_MUTATE_TESTS="test/rails/**/*.test.ts,test/session/Loop.test.ts"`.
const include = process.env.CORRAL_MUTATE_TESTS?.split(",") ?? [
  "test/rails/**/*.test.ts",
  "test/session/**/*.test.ts",
  "test/model/ProviderChain.test.ts",
  "test/model/Failover.test.ts"
]

// Not `mergeConfig`: it concatenates arrays, and the base's `include` (every test) would stay.
export default defineConfig({ ...base, test: { ...base.test, include } })
