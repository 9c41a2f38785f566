/**
 * `tsx --conditions=corral-source scripts/bench/adapter.ts [--before <checkout>] [--calls 200] [--rounds 6]
 * [--stream-path]`:
 * CPU per provider call through the adapters against `scripts/fake-provider.ts` (a child process, so only the
 * client's CPU is counted), over real HTTP, one call at a time. Variants run interleaved in one process — this
 * machine drifts, only same-run ratios count: undici directly (the floor), this checkout's adapters and, with
 * `--before`, another checkout's (a `git worktree` of the build to compare; it shares `node_modules`).
 */
import { HttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, ManagedRuntime } from "effect"
import { spawn } from "node:child_process"
import os from "node:os"
import path from "node:path"
import { fileURLToPath } from "node:url"
import { request as undiciRequest } from "undici"
import type { ModelProvider, ModelRequest } from "../../src/model/ModelProvider.js"

const arg = (name: string): string | undefined => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? undefined : process.argv[index + 1]
}
const calls = Number(arg("calls") ?? 200)
const rounds = Number(arg("rounds") ?? 6)
const before = arg("before")
const here = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

const startFake = (): Promise<{ readonly url: string; readonly stop: () => void }> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", path.join(here, "scripts/fake-provider.ts")], {
      cwd: here,
      stdio: ["ignore", "pipe", "inherit"]
    })
    let out = ""
    child.stdout.on("data", (data: Buffer) => {
      out += data.toString("utf8")
      const match = /listening on (http:\/\/\S+)/.exec(out)
      if (match?.[1] !== undefined) resolve({ url: match[1], stop: () => child.kill("SIGTERM") })
    })
    child.on("exit", (code) => reject(new Error(`fake provider exited (${code})`)))
  })

type Maker = (options: Record<string, unknown>) => Effect.Effect<ModelProvider, never, HttpClient.HttpClient>
const load = async (root: string): Promise<{ readonly openai: Maker; readonly anthropic: Maker }> => {
  const openai = await import(path.join(root, "src/model/OpenAiCompat.ts")) as { make: Maker }
  const anthropic = await import(path.join(root, "src/model/Anthropic.ts")) as { make: Maker }
  return { openai: openai.make, anthropic: anthropic.make }
}

const request: ModelRequest = { system: "You are a bench.", messages: [{ kind: "user", text: "Hello?" }], tools: [] }

const main = async () => {
  const fake = await startFake()
  const runtime = ManagedRuntime.make(NodeHttpClient.layerUndici)
  const builds: Array<[string, { readonly openai: Maker; readonly anthropic: Maker }]> = [["after", await load(here)]]
  if (before !== undefined) builds.unshift(["before", await load(path.resolve(before))])

  const variants: Array<{ readonly name: string; readonly call: () => Promise<unknown> }> = []
  const body = (stream: boolean) =>
    JSON.stringify({
      model: "fake-model",
      stream,
      messages: [{ role: "system", content: "You are a bench." }, { role: "user", content: "Hello?" }]
    })
  for (const stream of [false, true]) {
    variants.push({
      name: `undici ${stream ? "stream" : "whole"}`,
      call: async () => {
        const response = await undiciRequest(`${fake.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: body(stream)
        })
        return response.body.text()
      }
    })
  }
  // `--stream-path`: this checkout's adapters made to read bodies as a `Stream` (the path other clients take), by
  // hiding the Node body behind a proxy of each response: what the Node reader buys on its own.
  const streamPath = process.argv.includes("--stream-path")
  const hideNodeBody = HttpClient.transformResponse(Effect.map((response) =>
    new Proxy(response, {
      get: (target, key) => key === "original" || key === "source" ? undefined : Reflect.get(target, key)
    })
  ))
  const configs: Array<[string, Maker, boolean]> = []
  for (const [build, makers] of builds) {
    for (const wire of ["openai", "anthropic"] as const) {
      configs.push([`${build} ${wire}`, makers[wire], false])
      if (build === "after" && streamPath) configs.push([`after-stream-path ${wire}`, makers[wire], true])
    }
  }
  for (const [name, maker, hidden] of configs) {
    const wire = name.endsWith("openai") ? "openai" : "anthropic"
    const provider = await runtime.runPromise(
      maker({ name: wire, model: "fake-model", baseUrl: wire === "openai" ? `${fake.url}/v1` : fake.url }).pipe(
        Effect.provideServiceEffect(
          HttpClient.HttpClient,
          Effect.map(HttpClient.HttpClient, (client) => hidden ? hideNodeBody(client) : client)
        )
      )
    )
    for (const stream of [false, true]) {
      variants.push({
        name: `${name} ${stream ? "stream" : "whole"}`,
        call: () => runtime.runPromise(provider.complete(stream ? { ...request, onDelta: () => undefined } : request))
      })
    }
  }

  const samples = new Map<string, Array<number>>()
  for (const variant of variants) for (let i = 0; i < 20; i++) await variant.call() // warm-up
  for (let round = 0; round < rounds; round++) {
    // Rotate the order each round so no variant always runs first after a GC-heavy one.
    const order = variants.map((_, i) => variants[(i + round) % variants.length]!)
    for (const variant of order) {
      const start = process.cpuUsage()
      for (let i = 0; i < calls; i++) await variant.call()
      const used = process.cpuUsage(start)
      const list = samples.get(variant.name) ?? []
      list.push((used.user + used.system) / calls)
      samples.set(variant.name, list)
    }
  }
  const median = (xs: ReadonlyArray<number>) => {
    const sorted = [...xs].sort((a, b) => a - b)
    return sorted[Math.floor(sorted.length / 2)]!
  }
  console.log(
    `CPU µs per call, ${rounds} rounds of ${calls} calls, load average ${
      os.loadavg().map((x) => x.toFixed(1)).join(" ")
    }`
  )
  for (const variant of variants) {
    const list = samples.get(variant.name)!
    console.log(
      `${variant.name.padEnd(28)} median ${median(list).toFixed(0).padStart(5)}  min ${
        Math.min(...list).toFixed(0).padStart(5)
      }  all ${list.map((x) => x.toFixed(0)).join(" ")}`
    )
  }
  if (before !== undefined) {
    for (const wire of ["openai", "anthropic"]) {
      for (const mode of ["whole", "stream"]) {
        const a = samples.get(`after ${wire} ${mode}`)!
        const b = samples.get(`before ${wire} ${mode}`)!
        const ratios = a.map((x, i) => x / b[i]!)
        console.log(`after/before ${wire} ${mode}: per-round ratios ${ratios.map((r) => r.toFixed(2)).join(" ")}`)
        const s = samples.get(`after-stream-path ${wire} ${mode}`)
        if (s !== undefined) {
          console.log(`  stream-path/before: ${s.map((x, i) => (x / b[i]!).toFixed(2)).join(" ")}`)
        }
      }
    }
  }
  await runtime.dispose()
  fake.stop()
}

void main()
