/**
 * `npm run bench:telemetry`: what telemetry costs a turn (issue 16: ≤ 20 % more CPU with an exporter on). Scenario A
 * of the workload (`workload.ts`) in fresh processes, the variants rotated each round so that the machine's drift
 * hits them alike: spans off (no telemetry layer), and every span exported over OTLP/HTTP (protobuf, and JSON with
 * `--json`) to a sink this script starts (`otlp-sink.ts`). Each timed batch ends when every span it made has been
 * exported (`Telemetry.flush`); the queue is large enough that nothing is dropped. Reports CPU µs per turn per
 * variant (median of the processes), the ratio of the medians, and the median of the per-round ratios — only ratios
 * within this one run mean anything on this machine.
 *
 * Usage: `npm run bench:telemetry [-- --rounds N] [--sessions N] [--json] [--base DIR]`. `--base DIR` adds the same
 * variants of another checkout (its own `scripts/bench/workload.ts`, e.g. a `git worktree` of an earlier commit) to
 * every round, so a change is measured against what it replaces in the same run.
 */
import { spawn } from "node:child_process"
import { loadavg } from "node:os"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))
const argv = process.argv.slice(2)
const flag = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`)
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : fallback
}
const rounds = Number(flag("rounds", "6"))
const sessions = flag("sessions", "1500")
const port = 43_000 + Math.floor(Math.random() * 2000)
const sink = `http://127.0.0.1:${port}`

const base = argv.includes("--base") ? flag("base", "") : undefined
const own: ReadonlyArray<{ readonly name: string; readonly args: ReadonlyArray<string> }> = [
  { name: "off", args: [] },
  { name: "protobuf", args: ["--otlp", sink, "--protocol", "http/protobuf"] },
  ...(argv.includes("--json") ? [{ name: "json", args: ["--otlp", sink, "--protocol", "http/json"] }] : [])
]
const variants: ReadonlyArray<{ readonly name: string; readonly args: ReadonlyArray<string>; readonly cwd: string }> = [
  ...own.map((v) => ({ ...v, cwd: root })),
  ...(base === undefined ? [] : own.map((v) => ({ ...v, name: `base ${v.name}`, cwd: base })))
]

const run = (args: ReadonlyArray<string>, cwd = root) =>
  new Promise<number>((resolve, reject) => {
    const child = spawn(process.execPath, ["--expose-gc", "--import", "tsx", "scripts/bench/workload.ts", ...args], {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, OTEL_BSP_MAX_QUEUE_SIZE: "200000", OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "8192" }
    })
    let out = ""
    let err = ""
    child.stdout.setEncoding("utf8").on("data", (c: string) => (out += c))
    child.stderr.setEncoding("utf8").on("data", (c: string) => (err += c))
    child.on("close", (code) => {
      const line = out.split("\n").find((l) => l.startsWith("RESULT "))
      if (code !== 0 || line === undefined) return reject(new Error(`workload failed (${code}): ${err.slice(-2000)}`))
      if (/dropped/i.test(err)) return reject(new Error(`spans were dropped: ${err.slice(-500)}`))
      resolve((JSON.parse(line.slice(7)) as { cpu_us_per_turn: number }).cpu_us_per_turn)
    })
  })

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

const main = async () => {
  const sinkProcess = spawn(process.execPath, ["--import", "tsx", "scripts/bench/otlp-sink.ts", String(port)], {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"]
  })
  await new Promise<void>((resolve) => sinkProcess.stdout.once("data", () => resolve()))
  try {
    // Builds dist/ when the sources are newer, outside the measured rounds.
    await run(["--scenario", "A", "--quick", "--sessions", "5", "--warmup", "5"])
    if (base !== undefined) await run(["--scenario", "A", "--quick", "--sessions", "5", "--warmup", "5"], base)
    const load = loadavg()[0]!.toFixed(2)
    const cpu = new Map<string, Array<number>>(variants.map((v) => [v.name, []]))
    for (let round = 0; round < rounds; round++) {
      const order = variants.map((_, i) => variants[(i + round) % variants.length]!)
      const line: Array<string> = []
      for (const v of order) {
        const us = await run(["--scenario", "A", "--sessions", sessions, ...v.args], v.cwd)
        cpu.get(v.name)!.push(us)
        line.push(`${v.name} ${us.toFixed(0)}`)
      }
      process.stdout.write(`round ${round + 1}/${rounds}: ${line.join(", ")} CPU µs per turn\n`)
    }
    const offOf = (name: string) => cpu.get(name.startsWith("base ") ? "base off" : "off")!
    process.stdout.write(
      `\nscenario A, ${sessions} sessions a batch, ${rounds} rounds, load ${load} → ${loadavg()[0]!.toFixed(2)}\n`
    )
    for (const v of variants) {
      const xs = cpu.get(v.name)!
      const off = offOf(v.name)
      const perRound = xs.map((x, i) => x / off[i]!)
      process.stdout.write(
        `${v.name.padEnd(9)} CPU µs per turn median ${median(xs).toFixed(0)} (${Math.min(...xs).toFixed(0)}–${
          Math.max(...xs).toFixed(0)
        })` +
          (v.name.endsWith("off")
            ? "\n"
            : `, ÷ off ${(median(xs) / median(off)).toFixed(3)} (median per round ${median(perRound).toFixed(3)})\n`)
      )
    }
  } finally {
    sinkProcess.kill("SIGTERM")
  }
}

void main().catch((error: unknown) => {
  process.stderr.write(`${String(error)}\n`)
  process.exitCode = 1
})
