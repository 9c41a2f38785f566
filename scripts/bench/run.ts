/**
 * `npm run bench:workload`: runs the workload (../shared/bench/WORKLOAD.md) on the floor (`floor.ts`) and on Corral
 * (`workload.ts`) in the process layout of §6–§8 — one fresh `node --expose-gc --import tsx` process per
 * (program, scenario, repetition), floor and Corral alternating so that machine drift hits both alike — forwards
 * every `RESULT` line, then prints medians / min / max, the ratios corral ÷ floor and the targets of issue 3:
 * A per-turn overhead ≤ 10× the floor, B wall time ≤ 5× the floor, C bytes per live session ≤ 1.5× the floor.
 *
 * Usage: `npm run bench:workload [-- --scenario A|B|C] [--quick] [--reps N] [--only corral|floor]
 * [--store memory|embedded|postgres] [--tracer off] [--passivate]`. `--quick` is a smoke run (small sizes, one
 * repetition). Exits 1 when any process failed its checks; a missed target is reported, not an error.
 */
import { spawn } from "node:child_process"
import { cpus, loadavg } from "node:os"
import { fileURLToPath } from "node:url"

type Scenario = "A" | "B" | "C"
type Program = "floor" | "corral"

interface Result {
  readonly framework: string
  readonly scenario: Scenario
  readonly [field: string]: unknown
}

const root = fileURLToPath(new URL("../..", import.meta.url))
const files: Record<Program, string> = { floor: "scripts/bench/floor.ts", corral: "scripts/bench/workload.ts" }
const defaultReps: Record<Scenario, number> = { A: 5, B: 3, C: 3 }
const timeoutMs: Record<Scenario, number> = { A: 5 * 60_000, B: 5 * 60_000, C: 20 * 60_000 }

const parse = (argv: ReadonlyArray<string>) => {
  const flags = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith("--")) continue
    const next = argv[i + 1]
    if (next === undefined || next.startsWith("--")) flags.set(arg.slice(2), "true")
    else {
      flags.set(arg.slice(2), next)
      i++
    }
  }
  return flags
}

/** Runs one program once; resolves with its RESULT, or with the reason it failed. */
const runOnce = (program: Program, scenario: Scenario, extra: ReadonlyArray<string>) =>
  new Promise<{ readonly result?: Result; readonly failure?: string }>((resolve) => {
    // This process's `--conditions` pass on, so `npm run bench:workload` (sources) measures the sources and a plain
    // run the package build (scripts/bench/workload.ts).
    const conditions = process.execArgv.filter((arg) => arg.startsWith("--conditions"))
    const args = ["--expose-gc", ...conditions, "--import", "tsx", files[program], "--scenario", scenario, ...extra]
    const child = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs[scenario])
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      const lines = stdout.split("\n").filter((line) => line.startsWith("RESULT "))
      if (code !== 0 || lines.length !== 1) {
        const why = signal !== null ? `killed by ${signal}` : `exit code ${code}, ${lines.length} RESULT lines`
        return resolve({ failure: `${why}\n${stderr.trim().split("\n").slice(-15).join("\n")}` })
      }
      process.stdout.write(`${lines[0]}\n`)
      resolve({ result: JSON.parse(lines[0]!.slice(7)) as Result })
    })
  })

const numbers = (results: ReadonlyArray<Result>, field: string): Array<number> =>
  results.flatMap((r) => {
    const value = r[field]
    return Array.isArray(value)
      ? value.filter((v): v is number => typeof v === "number")
      : typeof value === "number"
      ? [value]
      : []
  })

interface Stats {
  readonly median: number
  readonly min: number
  readonly max: number
  readonly n: number
}

const stats = (values: ReadonlyArray<number>): Stats | undefined => {
  if (values.length === 0) return undefined
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  const median = sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]!, n: sorted.length }
}

const fmt = (n: number): string =>
  n >= 1000 ? Math.round(n).toLocaleString("en-US") : n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2)

const cell = (s: Stats | undefined): string => s === undefined ? "—" : `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`

/** One row per metric: `target` is the allowed ratio corral ÷ floor, `undefined` for information only. */
const metrics: Record<Scenario, ReadonlyArray<{ field: string; label: string; target?: number }>> = {
  A: [
    { field: "batch_us_per_turn", label: "µs per turn (all batches)", target: 10 },
    { field: "batch_us_per_tool_call", label: "µs per tool call (all batches)" },
    { field: "batch_cpu_us_per_turn", label: "CPU µs per turn (diagnostic)" }
  ],
  B: [
    { field: "wall_ms", label: "wall ms, 1,000 sessions", target: 5 },
    { field: "turns_per_sec", label: "turns per second" },
    { field: "peak_rss_mb", label: "peak RSS MB (ru_maxrss)" }
  ],
  C: [
    { field: "bytes_per_session", label: "bytes per live session", target: 1.5 },
    { field: "heap_bytes_per_session", label: "heap bytes per live session" }
  ]
}

const main = async () => {
  const flags = parse(process.argv.slice(2))
  const quick = flags.get("quick") === "true"
  const only = flags.get("only")
  const chosen = flags.get("scenario")
  const scenarios: ReadonlyArray<Scenario> = chosen === "A" || chosen === "B" || chosen === "C"
    ? [chosen]
    : ["A", "B", "C"]
  const programs: ReadonlyArray<Program> = only === "floor" || only === "corral" ? [only] : ["floor", "corral"]
  const corralExtra = [
    ...(flags.has("store") ? ["--store", flags.get("store")!] : []),
    ...(flags.get("tracer") === "off" ? ["--tracer", "off"] : []),
    ...(flags.get("passivate") === "true" ? ["--passivate"] : []),
    ...(flags.has("otlp") ? ["--otlp", flags.get("otlp")!] : [])
  ]
  const started = new Date()
  const loadBefore = loadavg()
  const collected = new Map<string, Array<Result>>()
  const failures: Array<string> = []

  for (const scenario of scenarios) {
    const reps = flags.has("reps") ? Math.max(1, Number(flags.get("reps"))) : quick ? 1 : defaultReps[scenario]
    for (let rep = 1; rep <= reps; rep++) {
      for (const program of programs) {
        const extra = [...(quick ? ["--quick"] : []), ...(program === "corral" ? corralExtra : [])]
        process.stderr.write(`… ${program} scenario ${scenario}, repetition ${rep}/${reps}\n`)
        const { failure, result } = await runOnce(program, scenario, extra)
        if (result === undefined) {
          failures.push(`${program} ${scenario} #${rep}: FAILED (${failure ?? "no result"})`)
          continue
        }
        const key = `${program}/${scenario}`
        collected.set(key, [...(collected.get(key) ?? []), result])
      }
    }
  }

  const out: Array<string> = []
  out.push("")
  out.push(
    `Workload benchmark, ${started.toISOString()} · node ${process.version} · ${cpus().length}× ${
      cpus()[0]?.model.trim() ?? "cpu"
    } · load average ${loadBefore.map((l) => l.toFixed(2)).join(" ")} → ${
      loadavg().map((l) => l.toFixed(2)).join(" ")
    }${quick ? " · QUICK (smoke sizes, not comparable)" : ""}`
  )
  out.push("")
  out.push(
    "| scenario | metric | floor median (min–max) | corral median (min–max) | corral ÷ floor | target | verdict |"
  )
  out.push("| --- | --- | --- | --- | --- | --- | --- |")
  for (const scenario of scenarios) {
    for (const { field, label, target } of metrics[scenario]) {
      const floor = stats(numbers(collected.get(`floor/${scenario}`) ?? [], field))
      const corral = stats(numbers(collected.get(`corral/${scenario}`) ?? [], field))
      const ratio = floor !== undefined && corral !== undefined && floor.median > 0
        ? corral.median / floor.median
        : undefined
      const verdict = target === undefined || ratio === undefined
        ? ""
        : ratio <= target
        ? "pass"
        : `MISS (${fmt(ratio / target)}× over)`
      out.push(
        `| ${scenario} | ${label} | ${cell(floor)} | ${cell(corral)} | ${
          ratio === undefined ? "—" : `${fmt(ratio)}×`
        } | ${target === undefined ? "" : `≤ ${target}×`} | ${verdict} |`
      )
    }
  }
  for (const failure of failures) out.push(`\n${failure}`)
  process.stdout.write(`${out.join("\n")}\n`)
  process.exit(failures.length > 0 ? 1 : 0)
}

void main()
