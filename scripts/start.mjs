/* global URL */
/**
 * `npm start`: `corral serve` from this checkout, started the way the installed command starts — the CLI bundle
 * (dist/cli/bundle, scripts/build-cli.mjs) run by plain Node with the command's flags (package.json passes them; see
 * bin/corral.js) — rebuilt first whenever it is missing or older than the sources or the installed dependencies, so an
 * edit is never hidden behind a stale bundle.
 *
 * Why not tsx: compiling a few hundred TypeScript modules at every start made `npm start` ready in 6.6 s (warm) and
 * idle at ~510–530 MB RSS, against ~1.5 s and ~230–245 MB for the bundle (docs/benchmarks.md at 09f4c1e, "Issue 14, eighth pass").
 * The rebuild is one esbuild run (a few seconds); a start on unchanged sources only walks src/ for modification times.
 * Arguments after `npm start --` go to `corral serve` (e.g. `npm start -- --port 9000 --memory`).
 */
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const bundle = join(root, "dist", "cli", "bundle", "main.js")
/** Written after a build this script ran (build-cli.mjs empties the bundle's folder first). */
const stamp = join(root, "dist", "cli", "bundle", ".start-build")

/** The latest modification time among the sources and the installed dependencies' lock. */
const latestInput = () => {
  let latest = 0
  const src = join(root, "src")
  for (const name of readdirSync(src, { recursive: true })) latest = Math.max(latest, statSync(join(src, name)).mtimeMs)
  for (const file of ["package.json", join("node_modules", ".package-lock.json")]) {
    const path = join(root, file)
    if (existsSync(path)) latest = Math.max(latest, statSync(path).mtimeMs)
  }
  return latest
}

if (!existsSync(bundle) || !existsSync(stamp) || statSync(stamp).mtimeMs < latestInput()) {
  process.stderr.write("npm start: building the CLI bundle from src/ (scripts/build-cli.mjs)\n")
  try {
    execFileSync(process.execPath, [join(root, "scripts", "build-cli.mjs")], { cwd: root, stdio: "inherit" })
  } catch {
    process.stderr.write("npm start: the bundle did not build (its errors are above)\n")
    process.exit(1)
  }
  writeFileSync(stamp, `${new Date().toISOString()}\n`)
}

process.argv.splice(2, 0, "serve")
await import(pathToFileURL(bundle).href)
