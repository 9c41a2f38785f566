/**
 * `tsx scripts/bench/startup.ts [--before <checkout>] [--runs 5] [--bundle]`: how long `corral serve --memory` takes from
 * spawn to its first `/readyz` 200, and the CPU the process used by then (user + system, from /proc, 10 ms ticks).
 * With `--before`, runs that checkout's CLI in turn with this one's (interleaved: this machine drifts, only
 * same-run ratios count), and checks that both serve the same `/docs` page.
 */
import { spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"

const arg = (name: string): string | undefined => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? undefined : process.argv[index + 1]
}
const runs = Number(arg("runs") ?? 5)
// The installed command's path (dist/cli/bundle, `node scripts/build-cli.mjs` in each checkout) instead of tsx.
const bundle = process.argv.includes("--bundle")
const before = arg("before")
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")
const ticksPerSecond = 100

const cpuMs = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

interface Run {
  readonly wallMs: number
  readonly cpuMs: number
  readonly docs?: string
}

const once = async (root: string, port: number, docs: boolean): Promise<Run> => {
  const started = performance.now()
  const child = spawn(
    process.execPath,
    [
      path.join(root, bundle ? "dist/cli/bundle/main.js" : "bin/corral.js"),
      "serve",
      "--memory",
      "--port",
      String(port)
    ],
    {
      cwd: root,
      stdio: ["ignore", "ignore", "inherit"]
    }
  )
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false)
      if (ok) break
      if (child.exitCode !== null) throw new Error(`corral serve exited (${child.exitCode})`)
      await sleep(5)
    }
    const wallMs = performance.now() - started
    const cpu = cpuMs(child.pid!)
    if (!docs) return { wallMs, cpuMs: cpu }
    const page = await (await fetch(`http://127.0.0.1:${port}/docs`)).text()
    return { wallMs, cpuMs: cpu, docs: createHash("sha256").update(page).digest("hex").slice(0, 16) }
  } finally {
    child.kill("SIGTERM")
    await new Promise((resolve) => child.exitCode !== null ? resolve(undefined) : child.once("exit", resolve))
  }
}

const main = async () => {
  const builds: Array<[string, string]> = [["after", here]]
  if (before !== undefined) builds.unshift(["before", path.resolve(before)])
  const results = new Map<string, Array<Run>>()
  let port = 18_900
  for (const [, root] of builds) await once(root, port++, false) // warm tsx's cache
  for (let run = 0; run < runs; run++) {
    const order = run % 2 === 0 ? builds : [...builds].reverse()
    for (const [name, root] of order) {
      const result = await once(root, port++, run === 0)
      results.set(name, [...(results.get(name) ?? []), result])
    }
  }
  const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  console.log(
    `corral serve --memory (${
      bundle ? "bundle" : "bin/corral.js"
    }) to /readyz, ${runs} interleaved runs, load average ${os.loadavg().map((x) => x.toFixed(1)).join(" ")}`
  )
  for (const [name, list] of results) {
    console.log(
      `${name.padEnd(7)} wall ms median ${median(list.map((r) => r.wallMs)).toFixed(0)} (${
        list.map((r) => r.wallMs.toFixed(0)).join(" ")
      })  cpu ms median ${median(list.map((r) => r.cpuMs)).toFixed(0)} (${list.map((r) => r.cpuMs).join(" ")})  /docs ${
        list[0]?.docs
      }`
    )
  }
}

void main()
