/**
 * Generates docs/api.md from the entry modules with the TypeScript compiler API: every export of each package
 * entry point (`export * as X` namespaces listed one level down), its kind, a one-line signature as the checker
 * prints it, and the first paragraph of its TSDoc.
 *
 * Prevents a hand-written reference that drifts from the code: `--check` (and test/docs/ApiReference.test.ts) fails
 * when docs/api.md differs from what the sources say, or when an entry export carries no TSDoc.
 *
 *   npx tsx --conditions=corral-source scripts/api-reference.ts          # write docs/api.md
 *   npx tsx --conditions=corral-source scripts/api-reference.ts --check  # exit 1 on drift or an undocumented export
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import ts from "typescript"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")
export const outputPath = path.join(root, "docs", "api.md")

/** The package entry points, in the order the reference lists them. */
const entries: ReadonlyArray<readonly [specifier: string, file: string]> = [
  ["corral", "src/index.ts"],
  ["corral/providers", "src/providers.ts"],
  ["corral/sql", "src/sql.ts"],
  ["corral/mcp", "src/mcp.ts"],
  ["corral/telemetry", "src/telemetry.ts"],
  ["corral/cluster", "src/cluster.ts"],
  ["corral/testing", "src/testing/index.ts"]
]

const maxSignature = 180

interface Row {
  readonly name: string
  readonly kind: string
  readonly signature: string
  readonly doc: string
}

interface Section {
  readonly specifier: string
  readonly intro: string
  readonly rows: ReadonlyArray<Row>
  /** Exports of the entry module itself (not namespace members) without TSDoc. */
  readonly undocumented: ReadonlyArray<string>
  /** Namespace members without TSDoc (listed, not failing `--check`). */
  readonly undocumentedMembers: ReadonlyArray<string>
}

/** First paragraph of a TSDoc text, on one line. */
const firstParagraph = (text: string): string => (text.trim().split(/\n\s*\n/)[0] ?? "").replace(/\s+/g, " ").trim()

const oneLine = (text: string): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length > maxSignature ? `${flat.slice(0, maxSignature - 1)}…` : flat
}

/** The texts of the `/** … *\/` comments right above `node`, in order (tags cut off). */
const leadingDocs = (node: ts.Node): Array<string> => {
  const text = node.getSourceFile().text
  return (ts.getLeadingCommentRanges(text, node.pos) ?? [])
    .map((range) => text.slice(range.pos, range.end))
    .filter((comment) => comment.startsWith("/**"))
    .map((comment) =>
      comment.slice(3, -2).split("\n").map((line) => line.replace(/^\s*\* ?/, "")).join("\n").split(/\n@/)[0] ?? ""
    )
}

/**
 * The TSDoc written on the export statement itself (`/** … *\/ export { A, B } from "…"`). A comment above the first
 * statement of the file is the module header, not the statement's, unless a second one follows it.
 */
const statementDoc = (statement: ts.Node): string => {
  const docs = leadingDocs(statement)
  const own = statement.getSourceFile().statements[0] === statement ? docs.slice(1) : docs
  return firstParagraph(own[own.length - 1] ?? "")
}

/** The statement an export symbol comes from (an `export { … }` / `export * as`, or a local declaration). */
const exportStatement = (symbol: ts.Symbol): ts.Node | undefined => {
  let node: ts.Node | undefined = symbol.declarations?.[0]
  while (node !== undefined && !ts.isSourceFile(node.parent) && !ts.isModuleBlock(node.parent)) node = node.parent
  return node
}

const kindOf = (symbol: ts.Symbol): string => {
  const f = symbol.flags
  const kinds: Array<string> = []
  if (f & ts.SymbolFlags.Module && symbol.declarations?.some(ts.isSourceFile)) return "namespace"
  if (f & ts.SymbolFlags.Class) kinds.push("class")
  else if (f & ts.SymbolFlags.Function) kinds.push("function")
  else if (f & ts.SymbolFlags.Variable) kinds.push("const")
  if (f & ts.SymbolFlags.Interface) kinds.push("interface")
  if (f & ts.SymbolFlags.TypeAlias) kinds.push("type")
  if (f & ts.SymbolFlags.Enum) kinds.push("enum")
  if (f & ts.SymbolFlags.Module && kinds.length === 0) kinds.push("namespace")
  return kinds.join(" + ") || "unknown"
}

const print = (checker: ts.TypeChecker, type: ts.Type, at: ts.Node | undefined, flags = 0): string =>
  checker.typeToString(
    type,
    at,
    ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseAliasDefinedOutsideCurrentScope | flags
  )

/** `<A, B>` for a generic interface or type alias, else "". */
const typeParameters = (declaration: ts.Declaration | undefined): string => {
  const params =
    declaration !== undefined && (ts.isInterfaceDeclaration(declaration) || ts.isTypeAliasDeclaration(declaration)) ?
      declaration.typeParameters :
      undefined
  return params === undefined ? "" : `<${params.map((p) => p.getText()).join(", ")}> `
}

const signatureOf = (checker: ts.TypeChecker, symbol: ts.Symbol): string => {
  const declaration = symbol.declarations?.[0]
  const f = symbol.flags
  if (f & ts.SymbolFlags.Module && symbol.declarations?.some(ts.isSourceFile)) {
    return oneLine(`{ ${checker.getExportsOfModule(symbol).map((m) => m.name).join(", ")} }`)
  }
  if (f & ts.SymbolFlags.Class) {
    const node = symbol.declarations?.find(ts.isClassDeclaration)
    const heritage = node?.heritageClauses?.map((clause) => clause.getText()).join(" ") ?? ""
    return oneLine(`class ${symbol.name}${heritage === "" ? "" : ` ${heritage}`}`)
  }
  if (f & (ts.SymbolFlags.Function | ts.SymbolFlags.Variable)) {
    return oneLine(print(checker, checker.getTypeOfSymbolAtLocation(symbol, declaration!), declaration))
  }
  if (f & ts.SymbolFlags.Interface) {
    const type = checker.getDeclaredTypeOfSymbol(symbol)
    const members = checker.getPropertiesOfType(type).map((p) => {
      const optional = p.flags & ts.SymbolFlags.Optional ? "?" : ""
      return `${p.name}${optional}: ${print(checker, checker.getTypeOfSymbolAtLocation(p, declaration!), declaration)}`
    })
    return oneLine(`${typeParameters(declaration)}{ ${members.join("; ")} }`)
  }
  if (f & ts.SymbolFlags.TypeAlias) {
    const printed = print(checker, checker.getDeclaredTypeOfSymbol(symbol), declaration, ts.TypeFormatFlags.InTypeAlias)
    return oneLine(`${typeParameters(declaration)}${printed}`)
  }
  return ""
}

const resolve = (checker: ts.TypeChecker, symbol: ts.Symbol): ts.Symbol =>
  symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol

const ownDoc = (checker: ts.TypeChecker, symbol: ts.Symbol): string =>
  firstParagraph(ts.displayPartsToString(symbol.getDocumentationComment(checker)))

const program = (): ts.Program => {
  const configPath = path.join(root, "tsconfig.json")
  const parsed = ts.getParsedCommandLineOfConfigFile(configPath, {}, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (d) => {
      throw new Error(ts.flattenDiagnosticMessageText(d.messageText, "\n"))
    }
  })
  if (parsed === undefined) throw new Error(`cannot read ${configPath}`)
  return ts.createProgram(entries.map(([, file]) => path.join(root, file)), parsed.options)
}

const sectionOf = (checker: ts.TypeChecker, source: ts.SourceFile, specifier: string): Section => {
  const module = checker.getSymbolAtLocation(source)
  if (module === undefined) throw new Error(`${source.fileName} is not a module`)
  const rows: Array<Row> = []
  const undocumented: Array<string> = []
  const undocumentedMembers: Array<string> = []
  for (const exported of checker.getExportsOfModule(module)) {
    const target = resolve(checker, exported)
    const statement = exportStatement(exported)
    const doc = ownDoc(checker, target) || (statement === undefined ? "" : statementDoc(statement))
    if (doc === "") undocumented.push(exported.name)
    rows.push({ name: exported.name, kind: kindOf(target), signature: signatureOf(checker, target), doc })
    if (kindOf(target) !== "namespace") continue
    for (const member of checker.getExportsOfModule(target)) {
      const memberTarget = resolve(checker, member)
      const memberDoc = ownDoc(checker, memberTarget)
      const name = `${exported.name}.${member.name}`
      if (memberDoc === "") undocumentedMembers.push(name)
      rows.push({ name, kind: kindOf(memberTarget), signature: signatureOf(checker, memberTarget), doc: memberDoc })
    }
  }
  const first = source.statements[0]
  const intro = first === undefined ? "" : (leadingDocs(first)[0] ?? "").trim()
  return { specifier, intro, rows, undocumented, undocumentedMembers }
}

/** Every entry point's section, computed from the sources. */
export const sections = (): ReadonlyArray<Section> => {
  const built = program()
  const checker = built.getTypeChecker()
  return entries.map(([specifier, file]) => {
    const source = built.getSourceFile(path.join(root, file))
    if (source === undefined) throw new Error(`${file} is not in the program`)
    return sectionOf(checker, source, specifier)
  })
}

const cell = (text: string): string => text.replace(/\|/g, "\\|")
const code = (text: string): string => (text === "" ? "" : `\`${cell(text.replace(/`/g, "'"))}\``)

/** The markdown of docs/api.md for `computed` (all sections when omitted). */
export const render = (computed: ReadonlyArray<Section> = sections()): string => {
  const lines: Array<string> = [
    "# API reference: the entry points",
    "",
    "<!-- Generated by scripts/api-reference.ts from the entry modules' exports and their TSDoc; do not edit. -->",
    "Generated from the sources: do not edit by hand. Regenerate with `npm run api-reference`",
    "(`npx tsx --conditions=corral-source scripts/api-reference.ts`); `--check` fails when this page is stale.",
    "",
    `Signatures are the checker's printed types on one line, cut at ${maxSignature} characters with "…". A namespace`,
    "(`export * as X`) is followed by its members as `X.member`.",
    ""
  ]
  for (const section of computed) {
    lines.push(`## \`${section.specifier}\``, "")
    if (section.intro !== "") lines.push(section.intro, "")
    lines.push("| Export | Kind | Signature | What |", "| --- | --- | --- | --- |")
    for (const row of section.rows) {
      lines.push(`| \`${row.name}\` | ${row.kind} | ${code(row.signature)} | ${cell(row.doc)} |`)
    }
    lines.push("")
    const missing = [...section.undocumented, ...section.undocumentedMembers]
    if (missing.length > 0) lines.push(`Undocumented: ${missing.map((name) => `\`${name}\``).join(", ")}.`, "")
  }
  return lines.join("\n")
}

/** The generated text of docs/api.md. */
export const generate = (): string => render()

const main = (): void => {
  const computed = sections()
  const text = render(computed)
  if (!process.argv.includes("--check")) {
    fs.writeFileSync(outputPath, text)
    process.stdout.write(`wrote ${path.relative(root, outputPath)}\n`)
    return
  }
  const problems: Array<string> = []
  const current = fs.existsSync(outputPath) ? fs.readFileSync(outputPath, "utf8") : ""
  if (current !== text) problems.push("docs/api.md is stale: run `npm run api-reference`")
  for (const section of computed) {
    for (const name of section.undocumented) problems.push(`${section.specifier}: \`${name}\` has no TSDoc`)
  }
  for (const problem of problems) process.stderr.write(`${problem}\n`)
  process.exitCode = problems.length > 0 ? 1 : 0
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) main()
