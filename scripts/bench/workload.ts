/**
 * The entry of Corral's implementation of the peers workload (../shared/bench/WORKLOAD.md §10; the workload itself
 * is scripts/bench/internal/workloadBody.ts, whose header has every option).
 *
 * Measures Corral as a user installs it: the workload imports `corral` and `corral/testing` by their package names,
 * and with Node's default conditions those resolve to the build in dist/ (tsc's JavaScript, what `npm pack` ships).
 * So before importing the workload this entry makes sure dist/ is there and no older than the sources: if it is
 * missing, or a file under src/ changed since the last build this entry made, it runs `npm run build` once (its
 * output on stderr; a failed build exits 2 and says so). With `--conditions=corral-source` (how `npm run
 * bench:workload` and the profiler run it) the names resolve to the TypeScript sources instead and nothing is built.
 *
 * Run: `node --expose-gc --import tsx scripts/bench/workload.ts --scenario A|B|C [options of workloadBody.ts]`.
 * Builds are not locked: run one workload process at a time (as the peers harness does) after changing sources.
 */
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../..", import.meta.url))
/** Written after a build this entry ran: its time is the build's. */
const stamp = join(root, "dist", ".workload-build")

const fromSources = [...process.execArgv, process.env["NODE_OPTIONS"] ?? ""].some((arg) =>
  arg.includes("corral-source")
)

/** The newest modification time of any file under `dir`. */
const newest = (dir: string): number => {
  let latest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs)
  }
  return latest
}

if (!fromSources && (!existsSync(stamp) || statSync(stamp).mtimeMs < newest(join(root, "src")))) {
  process.stderr.write("workload: dist/ is missing or older than src/: npm run build\n")
  try {
    execFileSync("npm", ["run", "build"], { cwd: root, stdio: ["ignore", process.stderr, process.stderr] })
  } catch (error) {
    process.stderr.write(`workload: the build failed (${String(error)}); nothing was measured\n`)
    process.exit(2)
  }
  writeFileSync(stamp, `${new Date().toISOString()}\n`)
}

await import("./internal/workloadBody.js")
