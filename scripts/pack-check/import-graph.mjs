// The packages Node actually loads when a program imports each entry named on the command line (a fresh `node` per
// entry, a loader hook recording every module it loads from a file), checked against corral's optional peers: an
// entry may load only the optional peers listed after its name (`corral/providers:@effect/platform-node`), none for
// `corral` and `corral/testing`. Run where every peer is installed, so that a stray import would load, not fail.
// Prints each entry's packages; exits 1 when an entry loads an optional peer it should not.
// Usage: node import-graph.mjs corral corral/testing corral/providers:@effect/platform-node
import { execFileSync } from "node:child_process"
import { readFileSync } from "node:fs"

const { peerDependenciesMeta } = JSON.parse(readFileSync("node_modules/corral/package.json", "utf8"))
const optional = Object.keys(peerDependenciesMeta).filter((name) => peerDependenciesMeta[name].optional)
// Records the URL of every module loaded from a file, reported when asked (the hooks run in a thread of their own).
const recorder = `data:text/javascript,${
  encodeURIComponent(
    "const urls = []; export async function load(url, context, next) { if (url.startsWith('file:')) urls.push(url); " +
      "return next(url, context) }; export function initialize(port) { port.on('message', () => port.postMessage(urls)) }"
  )
}`
const program = (specifier) => `
  import { register } from "node:module"
  import { MessageChannel } from "node:worker_threads"
  const { port1, port2 } = new MessageChannel()
  register(${JSON.stringify(recorder)}, { data: port2, transferList: [port2] })
  await import(${JSON.stringify(specifier)})
  port1.on("message", (urls) => { console.log(JSON.stringify(urls)); port1.close() })
  port1.postMessage("urls")`
// The package a file belongs to: the name after its last node_modules/ (so a nested copy counts as its package).
const packageOf = (url) => {
  const path = decodeURIComponent(url)
  const at = path.lastIndexOf("/node_modules/")
  return at === -1 ? undefined : /^((?:@[^/]+\/)?[^/]+)/.exec(path.slice(at + "/node_modules/".length))?.[1]
}
let failed = false
for (const argument of process.argv.slice(2)) {
  const [entry, allowedList = ""] = argument.split(":")
  const allowed = allowedList.split(",").filter((name) => name.length > 0)
  const urls = JSON.parse(execFileSync(process.execPath, ["--input-type=module", "-e", program(entry)], {
    encoding: "utf8"
  }))
  const packages = [...new Set(urls.map(packageOf).filter((name) => name !== undefined))].sort()
  const stray = packages.filter((name) => optional.includes(name) && !allowed.includes(name))
  console.log(
    `pack-check: import("${entry}") loads ${urls.length} modules from ${packages.length} packages: ${
      packages.join(", ")
    }`
  )
  if (stray.length > 0) {
    console.error(`pack-check: import("${entry}") loads optional peers it must not need: ${stray.join(", ")}`)
    failed = true
  }
}
if (failed) process.exit(1)
