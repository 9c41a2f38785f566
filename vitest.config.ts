import { defaultServerConditions } from "vite"
import { defineConfig } from "vitest/config"

// `corral` and `corral/testing` (the examples' self-imports) resolve to src/ through the `corral-source` export
// condition, so the tests run the TypeScript sources with no build step.
const conditions = ["corral-source", ...defaultServerConditions]

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions } },
  test: {
    include: ["test/**/*.test.ts"],
    setupFiles: ["test/support/replayEverySession.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    sequence: { concurrent: false }
  }
})
