#!/usr/bin/env node
/**
 * `node scripts/house-check.mjs [--report]`: the house rules of issue 45 that a script can check, over `src/`.
 *
 * - Sizes: no top-level definition (function, class, `const` holding a closure) over 150 lines, no file over 500
 *   lines. Data tables are exempt by name (`DATA_TABLES` below). A size finding fails the check (CI runs it without
 *   `--report`); `--report` lists the findings and fails only on layering.
 * - Layers (docs/architecture.md, "The house"): a module imports only from its own folder and the folders below
 *   it (`layers`); an import that runs back up fails the check.
 *
 * Prints each finding with its file and line; exits 1 on a layering finding (and on a size finding without
 * `--report`).
 */
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath, URL } from "node:url"
import ts from "typescript"

const root = fileURLToPath(new URL("..", import.meta.url))
const src = join(root, "src")
const report = process.argv.includes("--report")
const sizesOnly = process.argv.includes("--sizes")

const MAX_DEFINITION = 150
const MAX_FILE = 500
/** Definitions that are data, not code (a table of names and defaults reads as one). */
const DATA_TABLES = new Set(["src/internal/envVars.ts:all"])

const files = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : []
  )

const findings = { size: [], layer: [] }
for (const file of files(src)) {
  const rel = relative(root, file)
  const text = readFileSync(file, "utf8")
  const lines = text.split("\n").length
  if (lines > MAX_FILE) findings.size.push(`${rel}: ${lines} lines (at most ${MAX_FILE})`)
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  for (const statement of source.statements) {
    const start = source.getLineAndCharacterOfPosition(statement.getStart(source)).line
    const end = source.getLineAndCharacterOfPosition(statement.getEnd()).line
    const span = end - start + 1
    if (span <= MAX_DEFINITION) continue
    const name = ts.isVariableStatement(statement)
      ? statement.declarationList.declarations.map((d) => d.name.getText(source)).join(",")
      : statement.name?.getText(source) ?? ts.SyntaxKind[statement.kind]
    if (DATA_TABLES.has(`${rel}:${name}`)) continue
    findings.size.push(`${rel}:${start + 1} ${name}: ${span} lines (at most ${MAX_DEFINITION})`)
  }
}

/**
 * The layers, lowest first (docs/architecture.md, "The house"). A module may import from its own folder and from any
 * folder on a LOWER layer; folders on one layer are independent of each other. A top-level file of `src/` is its own
 * "folder".
 */
const layers = [
  ["domain", "internal"],
  ["rails"],
  ["telemetry"],
  ["store", "model", "tools", "knowledge"],
  ["events"],
  ["session"],
  ["Corral.ts"],
  ["Agent.ts", "cluster", "config", "testing"],
  ["index.ts", "providers.ts", "sql.ts", "mcp.ts", "cluster.ts", "telemetry.ts", "entries"],
  ["server"],
  ["cli"]
]
const layerOf = new Map(layers.flatMap((folders, level) => folders.map((folder) => [folder, level])))
const folderOf = (file) => relative(src, file).split("/")[0]

if (!sizesOnly) {
  for (const file of files(src)) {
    const from = folderOf(file)
    const text = readFileSync(file, "utf8")
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
    for (const statement of source.statements) {
      if (!(ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement))) continue
      const spec = statement.moduleSpecifier
      if (spec === undefined || !ts.isStringLiteral(spec) || !spec.text.startsWith(".")) continue
      const target = join(file, "..", spec.text)
      if (!target.startsWith(src)) continue
      const to = folderOf(target.replace(/\.js$/, ".ts"))
      if (to === from) continue
      const a = layerOf.get(from)
      const b = layerOf.get(to)
      const line = source.getLineAndCharacterOfPosition(statement.getStart(source)).line + 1
      if (a === undefined || b === undefined) {
        findings.layer.push(
          `${relative(root, file)}:${line} imports ${spec.text}: ${
            a === undefined ? from : to
          } has no layer (add it to \`layers\`)`
        )
      } else if (b >= a) {
        findings.layer.push(
          `${relative(root, file)}:${line} imports ${spec.text}: ${from} (layer ${a}) may not import ${to} (layer ${b}${
            b === a ? ", the same layer" : ", above it"
          })`
        )
      }
    }
  }
}

for (const line of findings.size) console.log(`size  ${line}`)
for (const line of findings.layer) console.log(`layer ${line}`)
console.log(`${findings.size.length} size finding(s), ${findings.layer.length} layering finding(s)`)
process.exitCode = findings.layer.length > 0 || (findings.size.length > 0 && !report) ? 1 : 0
