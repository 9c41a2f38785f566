import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"

describe("README", () => {
  it("shows the property-testing example exactly as the test suite runs it", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
    const example = readFileSync(new URL("./PropertyTesting.test.ts", import.meta.url), "utf8").trimEnd()
    expect(readme).toContain(example)
  })

  it("opens with the first agent exactly as CI runs it from the packed package (examples/first-agent.ts)", () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
    const example = readFileSync(new URL("../../examples/first-agent.ts", import.meta.url), "utf8").trimEnd()
    expect(readme).toContain(example)
    expect(readme.indexOf(example)).toBeLessThan(readme.indexOf("## Embedding Corral"))
  })
})
