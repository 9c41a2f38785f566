/**
 * `npm run bench:embedded-start -- [--runs 3] [--settle-ms 3000] [--root <checkout>]`: how fast and how heavy
 * `npm start` is on the embedded store (issue 42: a new directory ready ≤ 2 s, idle ≤ 300 MiB). Each run starts the
 * server exactly as `npm start` does (package.json's `start` command line: scripts/start.mjs, which runs the CLI
 * bundle's `serve`, rebuilt first when stale, outside the runs; `npm run build` makes the snapshot it loads) in a NEW
 * temporary data directory, then again in that same, now existing, directory, and measures for each:
 *
 * - `readyMs`: spawn to the first `/readyz` 200;
 * - `idleRssMiB`: the process's RSS (`VmRSS`, the database's worker thread included) `--settle-ms` after ready;
 * - how the new directory was made (`snapshot` or `initdb`, from the server's log line).
 *
 * Prints a line per start, then the median, min and max of each, with the load average before and after (a loaded
 * machine inflates both figures; docs/benchmarks.md says which).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const arg = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? fallback : process.argv[index + 1] ?? fallback
}
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const root = path.resolve(arg("root", here))
const runs = Number(arg("runs", "3"))
const settleMs = Number(arg("settle-ms", "3000"))

/** `npm start`'s command line (package.json), with this Node for `node`. */
const startCommand = (): ReadonlyArray<string> => {
  const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
    scripts: { start: string }
  }
  const [node, ...rest] = manifest.scripts.start.split(/\s+/)
  if (node !== "node") throw new Error(`npm start is not a node command line: ${manifest.scripts.start}`)
  return rest
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const rssMiB = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024)
}

const load = () => loadavg().map((n) => n.toFixed(2)).join(" ")

const exitOf = (child: ChildProcess): Promise<number | null> =>
  child.exitCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once("exit", resolve))

interface Start {
  readonly readyMs: number
  readonly idleRssMiB: number
  readonly made: "snapshot" | "initdb" | "existing"
}

/** One `npm start` in `dir` (its corral.json): ready time, idle RSS, how the directory was made; then SIGTERM. */
const once = async (dir: string): Promise<Start> => {
  const started = performance.now()
  const child = spawn(process.execPath, [...startCommand()], {
    cwd: root,
    env: { ...process.env, CORRAL_CONFIG: path.join(dir, "corral.json") },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let log = ""
  child.stdout!.on("data", (chunk: Buffer) => log += chunk.toString())
  child.stderr!.on("data", (chunk: Buffer) => log += chunk.toString())
  try {
    let readyMs = Number.NaN
    for (const deadline = Date.now() + 180_000; Date.now() < deadline; await sleep(10)) {
      if (child.exitCode !== null) throw new Error(`npm start exited (${child.exitCode}):\n${log}`)
      const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(log)?.[1]
      if (url === undefined) continue
      const ready = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false)
      if (ready) {
        readyMs = Math.round(performance.now() - started)
        break
      }
    }
    if (Number.isNaN(readyMs)) throw new Error(`npm start was not ready within 180 s:\n${log}`)
    if (log.includes("npm start: building")) throw new Error("npm start rebuilt the bundle: run npm run build first")
    await sleep(settleMs)
    const made = /created from the snapshot/.test(log)
      ? "snapshot"
      : /created by initdb/.test(log)
      ? "initdb"
      : "existing"
    return { readyMs, idleRssMiB: rssMiB(child.pid!), made }
  } finally {
    child.kill("SIGTERM")
    const killer = setTimeout(() => child.kill("SIGKILL"), 30_000)
    await exitOf(child)
    clearTimeout(killer)
  }
}

const summary = (values: ReadonlyArray<number>) => {
  const sorted = [...values].sort((a, b) => a - b)
  return `median ${sorted[Math.floor(sorted.length / 2)]}, min ${sorted[0]}, max ${sorted.at(-1)}`
}

const main = async () => {
  console.log(`embedded-start: ${root}, ${runs} runs, RSS ${settleMs} ms after ready; load before: ${load()}`)
  // scripts/start.mjs rebuilds the bundle when it is older than the sources: done here, once, outside any run.
  execFileSync(process.execPath, [...startCommand(), "--help"], { cwd: root, stdio: ["ignore", "ignore", "inherit"] })
  const fresh: Array<Start> = []
  const existing: Array<Start> = []
  for (let run = 1; run <= runs; run++) {
    const dir = mkdtempSync(path.join(tmpdir(), "corral-embedded-start-"))
    try {
      writeFileSync(
        path.join(dir, "corral.json"),
        JSON.stringify({ server: { port: 0 }, database: { dataDir: path.join(dir, "data") }, demo: { delayMs: 0 } })
      )
      const a = await once(dir)
      fresh.push(a)
      console.log(`run ${run} new directory:      ready ${a.readyMs} ms, idle RSS ${a.idleRssMiB} MiB (${a.made})`)
      const b = await once(dir)
      existing.push(b)
      console.log(`run ${run} existing directory: ready ${b.readyMs} ms, idle RSS ${b.idleRssMiB} MiB (${b.made})`)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  console.log(
    `new directory:      ready ms ${summary(fresh.map((s) => s.readyMs))}; ` +
      `idle RSS MiB ${summary(fresh.map((s) => s.idleRssMiB))}`
  )
  console.log(
    `existing directory: ready ms ${summary(existing.map((s) => s.readyMs))}; ` +
      `idle RSS MiB ${summary(existing.map((s) => s.idleRssMiB))}`
  )
  console.log(`load after: ${load()}`)
}

await main()
