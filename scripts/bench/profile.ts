/**
 * Where scenario A's time goes: runs `workload.ts` under `node --cpu-prof` and summarises the profile's SELF time by
 * function (mapped back to the TypeScript source) and by area (GC, the Effect runtime, each Corral folder, ajv, the
 * benchmark's own fake model and tool).
 *
 * Why a bundle: tsx emits each module as one line, so a profile of `node --import tsx workload.ts` names files but
 * not functions. This script bundles `workload.ts` with esbuild (tsx's own transformer; node_modules stay
 * external, so Effect and ajv run exactly as installed) with a source map, profiles the bundle, and maps every
 * sampled position back to its source line. "µs/turn" divides a function's self time by every turn the process
 * ran (warm-up included), so it is the steady-state cost per turn plus a little JIT warm-up.
 *
 * Usage: `npx tsx scripts/bench/profile.ts [--top 40] [-- <workload arguments, default --scenario A>]`.
 * The profile is written under node_modules/.cache/corral-bench/ and never committed.
 */
import { build } from "esbuild"
import { spawnSync } from "node:child_process"
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { SourceMap } from "node:module"
import type { SourceMapPayload } from "node:module"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

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
}

const root = fileURLToPath(new URL("../..", import.meta.url))
// Inside node_modules so the bundle resolves effect/ajv from the project, and so git never sees it.
const work = join(root, "node_modules", ".cache", "corral-bench")
const bundle = join(work, "workload.mjs")

const argv = process.argv.slice(2)
const split = argv.indexOf("--")
const own = split === -1 ? argv : argv.slice(0, split)
const workloadArgs = split === -1 ? ["--scenario", "A"] : argv.slice(split + 1)
const topIndex = own.indexOf("--top")
const top = topIndex === -1 ? 40 : Number(own[topIndex + 1])

/** The area a source belongs to, for the subtotals. */
const areaOf = (source: string): string => {
  if (source.startsWith("(")) return source
  if (source.includes("node_modules/effect/")) return "effect runtime (node_modules/effect)"
  if (source.includes("node_modules/ajv")) return "ajv (argument validation)"
  const corral = /\/src\/([^/]+)\//.exec(source) ?? /\/src\/([^/]+)\.ts$/.exec(source)
  if (corral !== null) return `corral src/${corral[1]}${source.endsWith(`${corral[1]}.ts`) ? "" : "/"}`
  if (source.includes("scripts/bench/")) return "benchmark (fake model, echo tool, harness)"
  if (source.startsWith("node:") || source === "") return "node internals"
  return "other"
}

const main = async () => {
  rmSync(work, { recursive: true, force: true })
  mkdirSync(work, { recursive: true })
  await build({
    entryPoints: [join(root, "scripts/bench/workload.ts")],
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    packages: "external",
    sourcemap: "external",
    outfile: bundle,
    logLevel: "warning"
  })
  const profileDir = join(work, "profile")
  const run = spawnSync(
    process.execPath,
    ["--expose-gc", "--cpu-prof", `--cpu-prof-dir=${profileDir}`, bundle, ...workloadArgs],
    { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] }
  )
  const line = run.stdout.split("\n").find((l) => l.startsWith("RESULT "))
  if (run.status !== 0 || line === undefined) throw new Error(`the workload failed (exit ${run.status})`)
  const result = JSON.parse(line.slice(7)) as Record<string, unknown>
  const sessions = Number(result.warmup_sessions ?? 0) +
    Number(result.batches ?? 0) * Number(result.batch_sessions ?? 0)
  const turns = sessions * 11

  const file = readdirSync(profileDir).find((f) => f.endsWith(".cpuprofile"))
  if (file === undefined) throw new Error("no .cpuprofile was written")
  const profile = JSON.parse(readFileSync(join(profileDir, file), "utf8")) as Profile
  const payload = JSON.parse(readFileSync(`${bundle}.map`, "utf8")) as SourceMapPayload & {
    readonly sourcesContent?: ReadonlyArray<string | null>
  }
  const map = new SourceMap(payload)
  const sourceLines = new Map<string, ReadonlyArray<string>>()
  payload.sources.forEach((source, i) => sourceLines.set(source, (payload.sourcesContent?.[i] ?? "").split("\n")))

  // Start-up (module loading, tsx-free but still ~0.5 s) is not per-turn cost: count samples only from the first
  // one whose stack runs Corral's code.
  const parent = new Map<number, number>()
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)
  const nodeById = new Map(profile.nodes.map((node) => [node.id, node]))
  const runsCorral = (id: number): boolean => {
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      if (nodeById.get(at)?.callFrame.url.endsWith("/workload.mjs")) {
        const frame = nodeById.get(at)!.callFrame
        const entry = map.findEntry(frame.lineNumber, frame.columnNumber)
        if ("originalSource" in entry && entry.originalSource.includes("/src/")) return true
      }
    }
    return false
  }
  const selfById = new Map<number, number>()
  let total = 0
  let started = false
  profile.samples.forEach((id, i) => {
    started ||= runsCorral(id)
    if (!started) return
    const dt = profile.timeDeltas[i] ?? 0
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
    if (frame.url.endsWith("/workload.mjs")) {
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
  const perTurn = (us: number) => (turns > 0 ? (us / turns).toFixed(2) : "—")
  const out: Array<string> = []
  out.push(
    `scenario ${String(result.scenario)}: ${String(result.us_per_turn)} µs/turn measured; profile ${
      (total / 1e6).toFixed(2)
    } s from the first sample in Corral's code, over ${sessions} sessions (${turns} turns, warm-up included)`
  )
  out.push("", "| area | self time | µs/turn |", "| --- | --- | --- |")
  for (const [area, us] of [...byArea].sort((a, b) => b[1] - a[1])) {
    out.push(`| ${area} | ${pct(us)} | ${perTurn(us)} |`)
  }
  out.push("", "| function (source line) | area | self time | µs/turn |", "| --- | --- | --- | --- |")
  for (const [label, { area, us }] of [...byFunction].sort((a, b) => b[1].us - a[1].us).slice(0, top)) {
    out.push(`| \`${label.replaceAll("|", "\\|")}\` | ${area} | ${pct(us)} | ${perTurn(us)} |`)
  }
  process.stdout.write(`${out.join("\n")}\n`)
}

void main()
