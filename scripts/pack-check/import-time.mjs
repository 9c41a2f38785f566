// What importing each entry named on the command line costs, in a fresh `node` per run (the module cache is what is
// measured), from the project this runs in: the ES modules loaded (files, node: built-ins excluded), and the median
// of `runs` runs of the wall time and the CPU time (user + system: steadier than wall time on a loaded machine) of the
// `import()` alone, node's own start-up excluded. Usage: node import-time.mjs [--runs N] corral corral/sql effect
import { execFileSync } from "node:child_process"

const args = process.argv.slice(2)
const at = args.indexOf("--runs")
const runs = at === -1 ? 5 : Number(args.splice(at, 2)[1])
// Counts the modules Node loads from files, through a loader hook (its own thread), reported on exit.
const counter = `data:text/javascript,${
  encodeURIComponent(
    "let n = 0; export async function load(url, context, next) { if (url.startsWith('file:')) n++; " +
      "return next(url, context) }; export function initialize(port) { port.on('message', () => port.postMessage(n)) }"
  )
}`
// The hook slows loading down, so the count is a run of its own, apart from the timed ones.
const count = (specifier) => `
  import { register } from "node:module"
  import { MessageChannel } from "node:worker_threads"
  const { port1, port2 } = new MessageChannel()
  register(${JSON.stringify(counter)}, { data: port2, transferList: [port2] })
  await import(${JSON.stringify(specifier)})
  port1.on("message", (modules) => { console.log(modules); port1.close() })
  port1.postMessage("count")`
const time = (specifier) => `
  const cpu = process.cpuUsage(), t = performance.now()
  await import(${JSON.stringify(specifier)})
  const wall = performance.now() - t, used = process.cpuUsage(cpu)
  console.log(JSON.stringify({ wall, cpu: (used.user + used.system) / 1000 }))`
const run = (source) => execFileSync(process.execPath, ["--input-type=module", "-e", source], { encoding: "utf8" })
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
for (const specifier of args) {
  const modules = Number(run(count(specifier)).trim())
  const samples = []
  for (let i = 0; i < runs; i++) samples.push(JSON.parse(run(time(specifier)).trim().split("\n").at(-1)))
  console.log(
    `import ${specifier}: ${modules} modules, median wall ${median(samples.map((s) => s.wall)).toFixed(0)} ms, ` +
      `median CPU ${median(samples.map((s) => s.cpu)).toFixed(0)} ms (${runs} runs)`
  )
}
