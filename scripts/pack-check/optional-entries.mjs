// In a project with only `corral` and `effect` installed (npm i --legacy-peer-deps): each entry that needs optional
// peers must fail to import with corral's MissingPeerDependency, naming the entry, every one of its peers (none is
// installed here) and, as the install line, exactly the line the README's entries table gives for it — not Node's
// bare ERR_MODULE_NOT_FOUND from inside dist/. Exits 1 on the first that does not.
import { readmeInstalls } from "./readme-installs.mjs"

const lines = readmeInstalls()
for (const entry of ["corral/providers", "corral/sql", "corral/cluster", "corral/mcp", "corral/telemetry"]) {
  const outcome = await import(entry).then(() => undefined, (error) => error)
  if (
    outcome?.name !== "MissingPeerDependency" || !outcome.message.startsWith(`${entry} needs `) ||
    lines.get(entry) === undefined || outcome.install !== lines.get(entry) ||
    !outcome.message.endsWith(`: ${lines.get(entry)}`)
  ) {
    console.error(`pack-check: import("${entry}") without its peers should name them and the README's line`)
    console.error(`  (${lines.get(entry) ?? "no line in the README"}); got:`)
    console.error(outcome ?? "no error")
    process.exit(1)
  }
  console.log(`${entry}: ${outcome.message}`)
}
