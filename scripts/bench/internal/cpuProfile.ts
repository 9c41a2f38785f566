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

/**
 * The components of a served turn (issue 44), in the order the account prints them. A sample is charged to the
 * component of the INNERMOST frame on its stack that belongs to one: walking from the running function toward the
 * root, frames of Effect's runtime, of `effect`'s Schema, of Corral's shared `src/domain` and `src/internal`, and of
 * Node's internals are passed over (they work for whoever called them), and the first other frame decides. So a
 * Schema decode called by the store is the store's, a socket write made by the SSE writer is "events out", and the
 * Effect run-loop's own work between two steps of a fiber — with no component's frame above it — is its own row.
 */
export const components = [
  "HTTP in (routing, body, auth, request gate, handlers)",
  "loop and rails (session, rails, service)",
  "provider client (request, HTTP, body, decoding)",
  "MCP and tool calls",
  "store (statements, encoding, driver)",
  "events out (SSE encoding and writes, live events)",
  "telemetry and metrics",
  "GC",
  "Effect runtime, no component on the stack (fiber scheduling)",
  "Node I/O, no component on the stack (sockets, timers)",
  "other"
] as const
export type Component = typeof components[number]

/** The component a frame's source decides, or undefined for a frame that is passed over. */
const componentOf = (source: string, functionName: string): Component | undefined => {
  if (source === "") {
    if (functionName === "(garbage collector)") return "GC"
    return undefined
  }
  const lib = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(source)
  if (lib !== null) {
    const [, pkg, rest] = lib as unknown as [string, string, string]
    if (pkg === "effect") return undefined
    if (pkg.startsWith("@effect/sql") || pkg === "pg" || pkg.startsWith("pg-") || pkg === "@electric-sql/pglite") {
      return "store (statements, encoding, driver)"
    }
    if (pkg === "@effect/platform" || pkg === "@effect/platform-node" || pkg === "@effect/platform-node-shared") {
      return /HttpClient|FetchHttpClient|NodeHttpClient|Undici/.test(rest)
        ? "provider client (request, HTTP, body, decoding)"
        : "HTTP in (routing, body, auth, request gate, handlers)"
    }
    if (pkg === "undici") return "provider client (request, HTTP, body, decoding)"
    if (pkg === "@modelcontextprotocol/sdk" || pkg === "ajv" || pkg === "zod") return "MCP and tool calls"
    if (pkg.startsWith("@opentelemetry") || pkg === "@effect/opentelemetry") return "telemetry and metrics"
    if (pkg === "find-my-way-ts" || pkg === "multipasta") return "HTTP in (routing, body, auth, request gate, handlers)"
    return "other"
  }
  const corral = /\/src\/(.+)$/.exec(source)
  if (corral !== null) {
    const path = corral[1]!
    if (path.startsWith("domain/") || path.startsWith("internal/")) return undefined
    if (path === "server/Sse.ts" || path.startsWith("events/")) {
      return "events out (SSE encoding and writes, live events)"
    }
    if (path === "server/MetricsRoute.ts" || path.startsWith("telemetry/")) return "telemetry and metrics"
    if (path.startsWith("server/mcp/") || path.startsWith("tools/")) return "MCP and tool calls"
    if (path.startsWith("server/")) return "HTTP in (routing, body, auth, request gate, handlers)"
    if (path.startsWith("model/")) return "provider client (request, HTTP, body, decoding)"
    if (path.startsWith("store/")) return "store (statements, encoding, driver)"
    return "loop and rails (session, rails, service)"
  }
  if (source.includes("scripts/bench/") || source.includes("test/support/")) return "other"
  if (source.startsWith("node:")) {
    if (/^node:_http_(server|incoming)/.test(source)) return "HTTP in (routing, body, auth, request gate, handlers)"
    if (/^node:_http_client/.test(source)) return "provider client (request, HTTP, body, decoding)"
    return undefined
  }
  return "other"
}

/** What `account` returns: time per component, and per component the frames that decided it (the top few). */
export interface Account {
  /** Sampled time counted (idle excluded), µs. */
  readonly totalUs: number
  readonly rows: ReadonlyArray<{
    readonly component: Component
    readonly us: number
    readonly frames: ReadonlyArray<{ readonly label: string; readonly us: number }>
  }>
}

/**
 * The account of the profile's samples by component (see `components`), over the window of `options` (as
 * `summarise`); idle samples are not counted.
 */
export const account = (options: Omit<Options, "top" | "units">): Account => {
  const profile = JSON.parse(readFileSync(options.profileFile, "utf8")) as Profile
  const payload = JSON.parse(readFileSync(`${options.bundleFile}.map`, "utf8")) as SourceMapPayload
  const map = new SourceMap(payload)
  const bundleName = `/${options.bundleFile.split("/").pop()!}`
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const nodeById = new Map(profile.nodes.map((node) => [node.id, node]))

  /** A frame's source (TypeScript source for the bundle's frames) and a label naming its function and line. */
  const frameOf = (frame: CallFrame): { source: string; label: string } => {
    if (frame.url.endsWith(bundleName)) {
      const entry = map.findEntry(frame.lineNumber, frame.columnNumber)
      const original = "originalSource" in entry ? entry.originalSource.replace(/^(\.\.\/)+/, "/") : "?"
      const line = "originalLine" in entry ? entry.originalLine + 1 : 0
      const short = original.replace(/.*?\/(src|scripts|node_modules|test)\//, "$1/")
      return { source: original, label: `${short}:${line} ${frame.functionName || "(anonymous)"}` }
    }
    const source = frame.url.replace(/^file:\/\//, "")
    const short = source.replace(/.*\/node_modules\//, "node_modules/")
    return {
      source,
      label: frame.url === ""
        ? frame.functionName
        : `${short}:${frame.lineNumber + 1} ${frame.functionName || "(anonymous)"}`
    }
  }

  // Per node: the component its stack decides and the deciding frame's label; or, when no frame from it to the root
  // decides one, whether an Effect runtime frame is among them.
  type Decision = { readonly component: Component; readonly label: string } | { readonly effectAbove: boolean }
  const decided = new Map<number, Decision>()
  const decide = (id: number): Decision => {
    const path: Array<{ id: number; effect: boolean }> = []
    let result: Decision | undefined
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      result = decided.get(at)
      if (result !== undefined) break
      const frame = nodeById.get(at)!.callFrame
      const { label, source } = frameOf(frame)
      const component = componentOf(source, frame.functionName)
      if (component !== undefined) {
        result = { component, label }
        break
      }
      path.push({ id: at, effect: source.includes("node_modules/effect/") })
    }
    // Down the path from the root side: each frame's decision is its ancestors', or "none, Effect above or not".
    let above: Decision = result ?? { effectAbove: false }
    for (let i = path.length - 1; i >= 0; i--) {
      const { effect, id: at } = path[i]!
      if ("effectAbove" in above && effect && !above.effectAbove) above = { effectAbove: true }
      decided.set(at, above)
    }
    return above
  }

  const byComponent = new Map<Component, { us: number; frames: Map<string, number> }>()
  let total = 0
  let at = profile.startTime
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0
    at += dt
    if (options.fromUs !== undefined && at < options.fromUs) return
    if (options.toUs !== undefined && at > options.toUs) return
    const frame = nodeById.get(id)!.callFrame
    if (frame.functionName === "(idle)") return
    total += dt
    const decision = decide(id)
    const component: Component = "component" in decision
      ? decision.component
      : decision.effectAbove
      ? "Effect runtime, no component on the stack (fiber scheduling)"
      : "Node I/O, no component on the stack (sockets, timers)"
    const label = "label" in decision ? decision.label : frameOf(frame).label
    const row = byComponent.get(component) ?? { us: 0, frames: new Map<string, number>() }
    row.us += dt
    row.frames.set(label, (row.frames.get(label) ?? 0) + dt)
    byComponent.set(component, row)
  })
  return {
    totalUs: total,
    rows: components.flatMap((component) => {
      const row = byComponent.get(component)
      if (row === undefined) return []
      const frames = [...row.frames].sort((a, b) => b[1] - a[1]).slice(0, 4).map(([label, us]) => ({ label, us }))
      return [{ component, us: row.us, frames }]
    })
  }
}
