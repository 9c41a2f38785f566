/* global URL */
/**
 * `npm run build` step two: the `corral` command as an esbuild bundle (dist/cli/bundle/), which is what the installed
 * `bin/corral.js` runs. Why: start-up of the server and of `corral run` is dominated by loading modules — Effect,
 * @effect/platform and the rest are a few hundred ES modules, each resolved, read and linked by Node's loader — and a
 * bundle is a handful of files. `--help` stays instant: the entry's `import()`s become separate chunks (splitting),
 * loaded only by commands that need them.
 *
 * Left external: PGlite (it loads its WASM and data files next to its own module) and pg's optional native binding;
 * every other package is inside, so the CLI needs none of corral's optional peers but PGlite, and that only for the
 * embedded database (without it, a command that opens one fails with the line that installs it).
 * The library entries (`corral`, `corral/testing`, …) are NOT bundled: an embedder's program shares one Effect with
 * Corral (peer dependency). The CLI is a program of its own, so its copy inside the bundle is never mixed with another.
 */
import { build } from "esbuild"
import { cpSync, rmSync } from "node:fs"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("..", import.meta.url))
const outdir = `${root}dist/cli/bundle`
// PGlite loads its WASM and data files next to its own module; pg-native is pg's optional native binding.
const external = ["@electric-sql/pglite", "pg-native"]
rmSync(outdir, { recursive: true, force: true })
await build({
  // The embedded database's worker thread is a file of its own (store/internal/pgliteHost.ts looks for it here).
  entryPoints: { main: `${root}src/cli/main.ts`, pgliteWorker: `${root}src/store/internal/pgliteWorker.ts` },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  sourcemap: "linked",
  // Maps give stack traces their original files and lines; the sources themselves are not shipped (the package has
  // no src/), so the maps do not carry them either.
  sourcesContent: false,
  // Whitespace and syntax only: identifiers keep their names, so a stack trace still reads without the map.
  minifyWhitespace: true,
  minifySyntax: true,
  external: [...external, "@electric-sql/pglite/*"],
  // What the optional-peer check (src/internal/optionalPeers.ts) must still look for: every other optional peer
  // (MCP's SDK, OpenTelemetry, pg, @effect/platform-node…) is inside the bundle, so `npm i corral effect` is enough
  // for the CLI but for the embedded database (PGlite: its error names the install line, or use a database URL).
  define: { CORRAL_BUNDLE_EXTERNAL: JSON.stringify(external) },
  // CommonJS dependencies (pg, ajv, …) call `require` for Node's built-ins; an ES module has none.
  banner: {
    js:
      "import { createRequire as __corralRequire } from 'node:module'; const require = __corralRequire(import.meta.url);"
  },
  chunkNames: "chunks/[name]-[hash]",
  logLevel: "warning"
})
// The viewer's static files are read next to the module that serves them (a chunk of this bundle).
cpSync(`${root}src/server/viewer`, `${outdir}/chunks/viewer`, { recursive: true })
