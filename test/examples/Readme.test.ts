import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"

describe("README", () => {
  it("shows the property-testing example exactly as the test suite runs it", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
    const example = readFileSync(new URL("./PropertyTesting.test.ts", import.meta.url), "utf8").trimEnd()
    expect(readme).toContain(example)
  })
})
