import { defaultServerConditions } from "vite"
import { defineConfig } from "vitest/config"

// `corral` and `corral/testing` (the examples' self-imports) resolve to src/ through the `corral-source` export
// condition, so the tests run the TypeScript sources with no build step.
const conditions = ["corral-source", ...defaultServerConditions]

// Vitest hands the SSR conditions to Node as `--conditions`; `module` would make Node load @opentelemetry/api's
// `module` build, whose extensionless imports its ESM loader refuses. Without it Node loads what the CLI loads.
const ssrConditions = conditions.filter((c) => c !== "module")

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions: ssrConditions } },
  test: {
    include: ["test/**/*.test.ts"],
    setupFiles: ["test/support/replayEverySession.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    sequence: { concurrent: false }
  }
})
