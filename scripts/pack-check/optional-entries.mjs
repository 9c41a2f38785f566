// In a project with only `corral` and `effect` installed (npm i --legacy-peer-deps): each entry that needs an
// optional peer must fail to import with corral's MissingPeerDependency, naming the entry and the install line with
// the stated range — not Node's bare ERR_MODULE_NOT_FOUND from inside dist/. Exits 1 on the first that does not.
import { readFileSync } from "node:fs"

const { peerDependencies } = JSON.parse(readFileSync("node_modules/corral/package.json", "utf8"))
const expected = {
  "corral/cluster": "@effect/cluster",
  "corral/sql": "@effect/sql-pg",
  "corral/providers": "@effect/platform-node"
}
for (const [entry, peer] of Object.entries(expected)) {
  const outcome = await import(entry).then(() => undefined, (error) => error)
  if (
    outcome?.name !== "MissingPeerDependency" || !outcome.message.startsWith(`${entry} needs `) ||
    !outcome.message.includes(`${peer}@${peerDependencies[peer]}`)
  ) {
    console.error(`pack-check: import("${entry}") without its peers should name them and the install line; got:`)
    console.error(outcome ?? "no error")
    process.exit(1)
  }
  console.log(`${entry}: ${outcome.message}`)
}
