/**
 * Summaries of a V8 `.cpuprofile` taken of an esbuild bundle: SELF time by function (mapped back to the TypeScript
 * source through the bundle's source map) and by area (GC, the Effect runtime, each Corral folder, ajv, pg, …).
 *
 * Why a bundle: tsx emits each module as one line, so a profile of the sources run through tsx names files but not
 * functions. The profiling scripts (`profile.ts` for scenario A, `server.ts --profile` for the server path) bundle
 * their entry with esbuild (node_modules stay external, so Effect, ajv and pg run exactly as installed) with a
 * source map, profile the bundle, and hand the profile to `summarise`.
 */
import { build } from "esbuild"
import { readFileSync } from "node:fs"
import { SourceMap } from "node:module"
import type { SourceMapPayload } from "node:module"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
  readonly columnNumber: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
  /** Microseconds on the monotonic clock (the clock of `process.hrtime`). */
  readonly startTime: number
}

/** Corral's own package entries, bundled from their sources (so the profile names Corral's functions). */
const corralEntries = (root: string): Record<string, string> => ({
  "corral": `${root}/src/index.ts`,
  "corral/testing": `${root}/src/testing/index.ts`,
  "corral/providers": `${root}/src/providers.ts`,
  "corral/sql": `${root}/src/sql.ts`,
  "corral/mcp": `${root}/src/mcp.ts`
})

/**
 * Bundles `entry` to `outfile` (ESM, node20, packages external, external source map); `root`: Corral's checkout,
 * whose package entries (`import ... from "corral"`) are bundled from its sources rather than left external.
 */
export const bundle = (entry: string, outfile: string, root?: string) =>
  build({
    entryPoints: [entry],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    ...(root === undefined ? {} : { alias: corralEntries(root) }),
    sourcemap: "external",
    outfile,
    logLevel: "warning"
  })

/** The area a source belongs to, for the subtotals. */
const areaOf = (source: string): string => {
  if (source.startsWith("(")) return source
  if (source.includes("node_modules/effect/")) return "effect runtime (node_modules/effect)"
  if (source.includes("node_modules/@effect/platform")) return "@effect/platform (HTTP server)"
  if (source.includes("node_modules/@effect/sql")) return "@effect/sql"
  if (source.includes("node_modules/pg") || source.includes("node_modules/pg-")) return "pg (driver)"
  if (source.includes("node_modules/@electric-sql/pglite")) return "PGlite (embedded Postgres)"
  if (source.includes("node_modules/@modelcontextprotocol")) return "MCP SDK"
  if (source.includes("node_modules/ajv")) return "ajv (argument validation)"
  if (source.includes("node_modules/undici")) return "undici (provider HTTP)"
  const corral = /\/src\/([^/]+)\//.exec(source) ?? /\/src\/([^/]+)\.ts$/.exec(source)
  if (corral !== null) return `corral src/${corral[1]}${source.endsWith(`${corral[1]}.ts`) ? "" : "/"}`
  if (source.includes("scripts/bench/")) return "benchmark (fake model, echo tool, harness)"
  if (source.startsWith("node:") || source === "") return "node internals"
  return "other"
}

/** What `summarise` takes. */
export interface Options {
  readonly profileFile: string
  /** The profiled bundle; its source map is `${bundleFile}.map`. */
  readonly bundleFile: string
  /** The unit the "µs per" column divides by (turns). */
  readonly units: number
  readonly top: number
  /** Count samples only from this monotonic time (µs) on; default: from the first sample running Corral's code. */
  readonly fromUs?: number
  /** Count samples only up to this monotonic time (µs). */
  readonly toUs?: number
}

/** The profile's self time by area and by function, as markdown tables; `totalUs` is the time counted. */
export const summarise = (options: Options): { readonly lines: ReadonlyArray<string>; readonly totalUs: number } => {
  const profile = JSON.parse(readFileSync(options.profileFile, "utf8")) as Profile
  const payload = JSON.parse(readFileSync(`${options.bundleFile}.map`, "utf8")) as SourceMapPayload & {
    readonly sourcesContent?: ReadonlyArray<string | null>
  }
  const map = new SourceMap(payload)
  const bundleName = `/${options.bundleFile.split("/").pop()!}`
  const sourceLines = new Map<string, ReadonlyArray<string>>()
  payload.sources.forEach((source, i) => sourceLines.set(source, (payload.sourcesContent?.[i] ?? "").split("\n")))

  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const nodeById = new Map(profile.nodes.map((node) => [node.id, node]))
  const runsCorral = (id: number): boolean => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = nodeById.get(at)?.callFrame
      if (frame?.url.endsWith(bundleName)) {
        const entry = map.findEntry(frame.lineNumber, frame.columnNumber)
        if ("originalSource" in entry && entry.originalSource.includes("/src/")) return true
      }
    }
    return false
  }
  const selfById = new Map<number, number>()
  let total = 0
  let started = false
  let at = profile.startTime
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0
    at += dt
    if (options.fromUs !== undefined) {
      if (at < options.fromUs || (options.toUs !== undefined && at > options.toUs)) return
    } else {
      // Start-up (module loading) is not per-turn cost: count from the first sample whose stack runs Corral's code.
      started ||= runsCorral(id)
      if (!started) return
    }
    total += dt
    selfById.set(id, (selfById.get(id) ?? 0) + dt)
  })

  const byFunction = new Map<string, { us: number; area: string }>()
  const byArea = new Map<string, number>()
  for (const node of profile.nodes) {
    const us = selfById.get(node.id)
    if (us === undefined) continue
    const frame = node.callFrame
    let source = frame.url === "" ? `(${frame.functionName})` : frame.url
    let label: string
    if (frame.url.endsWith(bundleName)) {
      const entry = map.findEntry(frame.lineNumber, frame.columnNumber)
      const original = "originalSource" in entry ? entry.originalSource : "?"
      const lineNo = "originalLine" in entry ? entry.originalLine : 0
      source = original.replace(/^(\.\.\/)+/, "/")
      const text = (sourceLines.get(original)?.[lineNo] ?? "").trim().slice(0, 70)
      label = `${source.replace(/.*?\/(src|scripts|node_modules)\//, "$1/")}:${lineNo + 1}  ${
        frame.functionName || text
      }`
    } else {
      label = frame.url === ""
        ? `(${frame.functionName})`
        : `${frame.url.replace(/.*\/node_modules\//, "node_modules/")}:${frame.lineNumber + 1}  ${
          frame.functionName || "(anonymous)"
        }`
    }
    const area = areaOf(source.replace(/^file:\/\//, ""))
    const current = byFunction.get(label)
    byFunction.set(label, { us: (current?.us ?? 0) + us, area })
    byArea.set(area, (byArea.get(area) ?? 0) + us)
  }

  const pct = (us: number) => `${((us / total) * 100).toFixed(1)}%`
  const per = (us: number) => (options.units > 0 ? (us / options.units).toFixed(2) : "—")
  const out: Array<string> = []
  out.push("| area | self time | µs per turn |", "| --- | --- | --- |")
  for (const [area, us] of [...byArea].sort((a, b) => b[1] - a[1])) out.push(`| ${area} | ${pct(us)} | ${per(us)} |`)
  out.push("", "| function (source line) | area | self time | µs per turn |", "| --- | --- | --- | --- |")
  for (const [label, { area, us }] of [...byFunction].sort((a, b) => b[1].us - a[1].us).slice(0, options.top)) {
    out.push(`| \`${label.replaceAll("|", "\\|")}\` | ${area} | ${pct(us)} | ${per(us)} |`)
  }
  return { lines: out, totalUs: total }
}
