// Mutation testing (`npm run mutate`, outside CI): StrykerJS plants one small bug at a time (a comparison off by one,
// a condition negated, a statement dropped) in the rails, the session and the provider chain, and runs the tests
// that cover it (vitest.mutate.config.ts). A mutant no test kills is a behaviour a bug could change unnoticed:
// docs/mutation.md keeps the score and what was done about each survivor (a test added, or why it is equivalent).
// Narrow a run with `npm run mutate -- --mutate "src/rails/**/*.ts"` and, for the tests, CORRAL_MUTATE_TESTS.
/** @type {import("@stryker-mutator/api/core").PartialStrykerOptions} */
export default {
  testRunner: "vitest",
  plugins: ["@stryker-mutator/vitest-runner"],
  vitest: { configFile: "vitest.mutate.config.ts" },
  coverageAnalysis: "perTest",
  // A static mutant (module-level code: the built-in checks' names, the seed limits) is covered by no single test, so
  // Stryker reloads the module and runs EVERY included test against it: ~1 min each for the rails alone. They are
  // left out by default; `-- --ignoreStatic false` (with a narrow CORRAL_MUTATE_TESTS) runs them.
  ignoreStatic: true,
  mutate: ["src/rails/**/*.ts", "src/session/**/*.ts", "src/model/ProviderChain.ts"],
  // Two cores shared with the rest of the work: one test process at a time.
  concurrency: 1,
  timeoutMS: 5_000,
  ignorePatterns: [".corral", "dist", "coverage", "reports", "docs", "examples", "scripts/bench/.out"],
  tempDirName: ".stryker-tmp",
  reporters: ["clear-text", "progress", "html", "json"],
  htmlReporter: { fileName: "reports/mutation/index.html" },
  jsonReporter: { fileName: "reports/mutation/mutation.json" },
  cleanTempDir: "always"
}
