/**
 * `npx tsx scripts/bench/embedded-burst.ts [--root <checkout>] [--starts 2000] [--runs 1] [--probe-ms 50]`: the embedded
 * store under a burst, measured from outside (issue 42). Starts `corral serve` from `<root>`'s CLI bundle
 * (dist/cli/bundle/main.js, built by `node scripts/build-cli.mjs` there; the flags bin/corral.js passes) on the
 * embedded PGlite in a NEW data directory, and per run prints one `RESULT <json>` line with:
 *
 * - `readyMs`, `idleRssMiB`: spawn to the first `/readyz` 200, and the server's RSS 3 s after that (new directory);
 * - the burst: `starts` `POST /v1/sessions` (the demo agent, no `wait`) sent at once, their statuses, and how long until
 *   the last answered;
 * - `/healthz` probed every `--probe-ms` from before the burst until the last start answered, each with a 5 s bound:
 *   p50 / p99 / max latency, how many took over 100 ms, how many got no answer within 5 s;
 * - SIGTERM sent when the last start answered: `termToExitMs`, the exit code, and the lines of sessions the drain
 *   could not settle (documented bound: `server.shutdownTimeoutMs` 10 s + 2 s).
 *
 * With `--log FILE`, the server's output of the last run is written there. With `--existing`, the second start of each run reuses the directory (an existing directory's ready time and RSS).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import http from "node:http"
import { tmpdir } from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const arg = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? fallback : process.argv[index + 1] ?? fallback
}
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const root = path.resolve(arg("root", here))
const starts = Number(arg("starts", "2000"))
const runs = Number(arg("runs", "1"))
const probeMs = Number(arg("probe-ms", "50"))
const existing = process.argv.includes("--existing")
const logFile = arg("log", "")
const nodeFlags = ["--max-semi-space-size=64", "--liftoff-only"]

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const rssMiB = (pid: number): number => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024)
}

const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

interface Server {
  readonly child: ChildProcess
  readonly url: string
  readonly readyMs: number
  readonly log: () => string
}

const start = async (dir: string): Promise<Server> => {
  const started = performance.now()
  const child = spawn(process.execPath, [...nodeFlags, path.join(root, "dist/cli/bundle/main.js"), "serve"], {
    cwd: dir,
    env: { ...process.env, CORRAL_CONFIG: path.join(dir, "corral.json") },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let log = ""
  child.stdout!.on("data", (chunk: Buffer) => log += chunk.toString())
  child.stderr!.on("data", (chunk: Buffer) => log += chunk.toString())
  for (const deadline = Date.now() + 120_000; Date.now() < deadline; await sleep(20)) {
    if (child.exitCode !== null) throw new Error(`corral serve exited (${child.exitCode}):\n${log}`)
    const url = /listening on (http:\/\/[\d.]+:\d+)/.exec(log)?.[1]
    if (url === undefined) continue
    const ready = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false)
    if (ready) return { child, url, readyMs: Math.round(performance.now() - started), log: () => log }
  }
  child.kill("SIGKILL")
  throw new Error(`corral serve was not ready within 120 s:\n${log}`)
}

/**
 * One GET on a connection of its own (node:http, no agent), so a probe never queues behind the burst's requests in
 * this process's HTTP client: true when answered 200 within 5 s.
 */
const probe = (url: string): Promise<boolean> =>
  new Promise((resolve) => {
    const request = http.get(url, { agent: false, timeout: 5_000 }, (response) => {
      response.resume()
      response.once("end", () => resolve(response.statusCode === 200))
    })
    request.once("timeout", () => request.destroy(new Error("timeout")))
    request.once("error", () => resolve(false))
  })

const exitOf = (child: ChildProcess): Promise<number | null> =>
  child.exitCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once("exit", resolve))

const once = async (run: number) => {
  const dir = mkdtempSync(path.join(tmpdir(), "corral-embedded-burst-"))
  writeFileSync(
    path.join(dir, "corral.json"),
    JSON.stringify({ server: { port: 0 }, database: { dataDir: path.join(dir, "data") }, demo: { delayMs: 0 } })
  )
  try {
    let server = await start(dir)
    await sleep(3_000)
    const fresh = { readyMs: server.readyMs, idleRssMiB: rssMiB(server.child.pid!) }
    let reopened: { readyMs: number; idleRssMiB: number } | undefined
    if (existing) {
      server.child.kill("SIGTERM")
      await exitOf(server.child)
      server = await start(dir)
      await sleep(3_000)
      reopened = { readyMs: server.readyMs, idleRssMiB: rssMiB(server.child.pid!) }
    }

    const probes: Array<number> = []
    /** [ms after the burst began, latency] of probes over 100 ms or unanswered (latency -1). */
    const slow: Array<readonly [number, number]> = []
    let burstStarted = Number.NaN
    let unanswered = 0
    let probing = true
    const prober = (async () => {
      while (probing) {
        const sent = performance.now()
        const ok = await probe(`${server.url}/healthz`)
        const took = performance.now() - sent
        if (ok) probes.push(took)
        else unanswered++
        if (!ok || took > 100) slow.push([Math.round(sent - burstStarted), ok ? Math.round(took) : -1])
        await sleep(probeMs)
      }
    })()
    await sleep(500)

    burstStarted = performance.now()
    const statuses = new Map<string, number>()
    await Promise.all(Array.from({ length: starts }, async (_, i) => {
      const status = await fetch(`${server.url}/v1/sessions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ agentId: "demo", scope: `burst-${i % 50}`, prompt: "Why is checkout failing?" }),
        signal: AbortSignal.timeout(120_000)
      }).then((r) => String(r.status), (error: Error) => error.name)
      statuses.set(status, (statuses.get(status) ?? 0) + 1)
    }))
    const burstMs = Math.round(performance.now() - burstStarted)
    probing = false
    await prober

    const termSent = performance.now()
    const rssAtTerm = rssMiB(server.child.pid!)
    server.child.kill("SIGTERM")
    const killer = setTimeout(() => server.child.kill("SIGKILL"), 120_000)
    const code = await exitOf(server.child)
    clearTimeout(killer)
    const termToExitMs = Math.round(performance.now() - termSent)
    if (logFile !== "") writeFileSync(logFile, server.log())
    const sorted = [...probes].sort((a, b) => a - b)
    const unsettled = server.log().split("\n").filter((line) => /did not settle|could not settle|unsettled/i.test(line))
    const result = {
      run,
      root,
      fresh,
      ...(reopened === undefined ? {} : { existing: reopened }),
      starts,
      statuses: Object.fromEntries(statuses),
      burstMs,
      healthz: {
        probes: probes.length,
        p50Ms: Math.round(percentile(sorted, 50)),
        p99Ms: Math.round(percentile(sorted, 99)),
        maxMs: Math.round(sorted.at(-1) ?? Number.NaN),
        over100Ms: sorted.filter((ms) => ms > 100).length,
        noAnswerIn5s: unanswered,
        slow
      },
      rssAtTermMiB: rssAtTerm,
      termToExitMs,
      exitCode: code,
      unsettledLines: unsettled.length
    }
    console.log(`RESULT ${JSON.stringify(result)}`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

for (let run = 1; run <= runs; run++) await once(run)
