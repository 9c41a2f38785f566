/**
 * Where scenario A's time goes: runs the workload (`internal/workloadBody.ts`, Corral bundled from its sources)
 * under `node --cpu-prof` and summarises the profile's SELF time by function (mapped back to the TypeScript source)
 * and by area (GC, the Effect runtime, each Corral folder, ajv, the benchmark's own fake model and tool).
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
import { spawnSync } from "node:child_process"
import { mkdirSync, readdirSync, rmSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as CpuProfile from "./internal/cpuProfile.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
// Inside node_modules so the bundle resolves effect/ajv from the project, and so git never sees it.
const work = join(root, "node_modules", ".cache", "corral-bench")
const bundleFile = join(work, "workload.mjs")

const argv = process.argv.slice(2)
const split = argv.indexOf("--")
const own = split === -1 ? argv : argv.slice(0, split)
const workloadArgs = split === -1 ? ["--scenario", "A"] : argv.slice(split + 1)
const topIndex = own.indexOf("--top")
const top = topIndex === -1 ? 40 : Number(own[topIndex + 1])

const main = async () => {
  rmSync(work, { recursive: true, force: true })
  mkdirSync(work, { recursive: true })
  // The workload itself, not its entry (`workload.ts` would build dist/ for the package names; here they are
  // bundled from the sources, so the profile names Corral's functions).
  await CpuProfile.bundle(join(root, "scripts/bench/internal/workloadBody.ts"), bundleFile, root.replace(/\/$/, ""))
  const profileDir = join(work, "profile")
  const run = spawnSync(
    process.execPath,
    ["--expose-gc", "--cpu-prof", `--cpu-prof-dir=${profileDir}`, bundleFile, ...workloadArgs],
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
  const summary = CpuProfile.summarise({ profileFile: join(profileDir, file), bundleFile, units: turns, top })
  const out = [
    `scenario ${String(result.scenario)}: ${String(result.us_per_turn)} µs/turn measured; profile ${
      (summary.totalUs / 1e6).toFixed(2)
    } s from the first sample in Corral's code, over ${sessions} sessions (${turns} turns, warm-up included)`,
    "",
    ...summary.lines
  ]
  process.stdout.write(`${out.join("\n")}\n`)
}

void main()
