/**
 * `tsx --conditions=corral-source scripts/bench/serverLayer.ts --before <checkout> [--pairs 8] | --cold <checkout>`: CPU to build and
 * release `Server.layer` (memory store, port 0) in this process, this checkout's against another's, interleaved. A
 * start-up cost of the server's own, without the module loading and the process start that `startup.ts` includes.
 */
import { Effect, Layer } from "effect"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import type * as ConfigModule from "../../src/config/Config.js"
import type * as ServerModule from "../../src/server/Server.js"

const arg = (name: string): string | undefined => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? undefined : process.argv[index + 1]
}
const pairs = Number(arg("pairs") ?? 8)
const before = arg("before")
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

const load = async (root: string) => {
  const Server = await import(path.join(root, "src/server/Server.ts")) as typeof ServerModule
  const Config = await import(path.join(root, "src/config/Config.ts")) as typeof ConfigModule
  const settings: ConfigModule.Settings = {
    ...Config.defaults,
    database: { _tag: "Memory" },
    server: { ...Config.defaults.server, port: 0 }
  }
  return () => Effect.runPromise(Effect.scoped(Layer.build(Server.layer(settings))))
}

// `--cold <checkout>`: only the first build of `Server.layer` in this process, what a start pays (run it in
// fresh processes, alternating checkouts).
const cold = arg("cold")

const main = async () => {
  if (cold !== undefined) {
    const build = await load(path.resolve(cold))
    const start = process.cpuUsage()
    await build()
    const used = process.cpuUsage(start)
    console.log(`cold ${cold} ${((used.user + used.system) / 1000).toFixed(0)}`)
    process.exit(0)
  }
  if (before === undefined) throw new Error("--before <checkout> is required")
  const builds: Array<[string, () => Promise<unknown>]> = [["before", await load(path.resolve(before))], [
    "after",
    await load(here)
  ]]
  for (const [, build] of builds) await build() // first builds pay one-time costs (JIT, schema caches)
  const samples = new Map<string, Array<number>>()
  for (let pair = 0; pair < pairs; pair++) {
    for (const [name, build] of pair % 2 === 0 ? builds : [...builds].reverse()) {
      const start = process.cpuUsage()
      await build()
      const used = process.cpuUsage(start)
      samples.set(name, [...(samples.get(name) ?? []), (used.user + used.system) / 1000])
    }
  }
  const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  console.log(
    `Server.layer build + release, CPU ms, ${pairs} pairs, load ${os.loadavg().map((x) => x.toFixed(1)).join(" ")}`
  )
  for (const [name, list] of samples) {
    console.log(`${name.padEnd(7)} median ${median(list).toFixed(0)} (${list.map((x) => x.toFixed(0)).join(" ")})`)
  }
  process.exit(0)
}

void main()
