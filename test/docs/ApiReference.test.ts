/**
 * docs/api.md is generated from the entry modules (scripts/api-reference.ts). Prevents the reference drifting from
 * the code: an export added, renamed or retyped without regenerating the page fails here, and so does an entry export
 * that carries no TSDoc (it would show up in the reference with no description).
 */
import * as fs from "node:fs"
import { beforeAll, describe, expect, it } from "vitest"
import { outputPath, render, sections } from "../../scripts/api-reference.js"

describe("docs/api.md", () => {
  let computed: ReturnType<typeof sections> = []
  beforeAll(() => {
    computed = sections()
  }, 180_000)

  it("is what scripts/api-reference.ts generates (run `npm run api-reference` after changing an entry point)", () => {
    expect(fs.readFileSync(outputPath, "utf8")).toBe(render(computed))
  })

  it("lists every entry point with its exports", () => {
    expect(computed.map((section) => section.specifier)).toEqual([
      "corral",
      "corral/providers",
      "corral/sql",
      "corral/mcp",
      "corral/telemetry",
      "corral/cluster",
      "corral/testing"
    ])
    const names = computed.flatMap((section) => section.rows.map((row) => `${section.specifier}:${row.name}`))
    expect(names).toEqual(expect.arrayContaining([
      "corral:Corral",
      "corral:ToolRegistry.define",
      "corral/providers:OpenAiCompat.make",
      "corral/sql:layerSql",
      "corral/mcp:layerConfig",
      "corral/telemetry:Telemetry.layer",
      "corral/testing:runScript"
    ]))
  })

  it("has TSDoc on every export of every entry module", () => {
    expect(computed.flatMap((section) => section.undocumented.map((name) => `${section.specifier}: ${name}`)))
      .toEqual([])
  })
})
