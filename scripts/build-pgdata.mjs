/* global URL */
/**
 * `npm run build` step (after tsc, before the CLI bundle): the embedded database's snapshot, `dist/store/pgdata.tar.br`
 * — a PGlite data directory initialised (initdb) and migrated with every migration of this build, closed cleanly and
 * packed (dist/store/EmbeddedSnapshot.js). A new data directory starts from it instead of running initdb
 * (store/internal/pgSnapshot.ts; docs/storage.md).
 *
 * Making one runs initdb (tens of seconds on a loaded machine), so the result is kept in
 * node_modules/.cache/corral-pgdata/ under a key of what it depends on — the installed PGlite's version and the
 * compiled migrations and snapshot code — and copied from there while they are unchanged.
 */
import { createHash } from "node:crypto"
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const store = join(root, "dist", "store")
const target = join(store, "pgdata.tar.br")

const pgliteVersion = () => {
  let dir = dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite"))
  while (!existsSync(join(dir, "package.json"))) dir = dirname(dir)
  return JSON.parse(readFileSync(join(dir, "package.json"), "utf8")).version
}

const hash = createHash("sha256").update(`pglite ${pgliteVersion()}\n`)
const inputs = [
  join(store, "Migrations.js"),
  join(store, "EmbeddedSnapshot.js"),
  join(store, "Embedded.js"),
  join(store, "internal", "pgSnapshot.js"),
  ...readdirSync(join(store, "migrations")).filter((name) => name.endsWith(".js")).sort().map((name) =>
    join(store, "migrations", name)
  )
]
for (const file of inputs) hash.update(`${file.slice(store.length)}\n`).update(readFileSync(file))
const key = hash.digest("hex").slice(0, 16)
const cacheDir = join(root, "node_modules", ".cache", "corral-pgdata")
const cached = join(cacheDir, `pgdata-${key}.tar.br`)

const started = Date.now()
if (existsSync(cached)) {
  copyFileSync(cached, target)
  console.log(`build-pgdata: ${target} from the cache (${key})`)
} else {
  const { Effect } = await import("effect")
  const EmbeddedSnapshot = await import(pathToFileURL(join(store, "EmbeddedSnapshot.js")).href)
  const manifest = await Effect.runPromise(EmbeddedSnapshot.make(target))
  mkdirSync(cacheDir, { recursive: true })
  const partial = `${cached}.${process.pid}.partial`
  copyFileSync(target, partial)
  renameSync(partial, cached)
  console.log(
    `build-pgdata: ${target} made in ${((Date.now() - started) / 1000).toFixed(1)} s ` +
      `(PGlite ${manifest.pglite}, migrations up to ${manifest.migrations.at(-1)}; cached as ${key})`
  )
}
