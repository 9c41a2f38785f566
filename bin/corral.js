#!/usr/bin/env -S node --max-semi-space-size=64 --liftoff-only
/* global URL */
// `--max-semi-space-size=64` (MB, V8's young generation; Node's default is 16): a server with hundreds of sessions in
// flight allocates short-lived objects fast enough that a 16 MB nursery promotes many still-live ones to the old
// generation, to die there and be collected by the costlier major GC. 64 MB took 15–25 % off the server's CPU per
// model turn at 1,000 sessions at once (docs/benchmarks.md, "The young generation"); it is a ceiling, not a
// reservation (the nursery grows to it only under load; idle RSS is unchanged).
// `--liftoff-only`: WebAssembly runs on V8's baseline compiler, never tiered up to TurboFan. Corral's WebAssembly is
// the embedded store (PGlite's Postgres) and undici's HTTP parser (llhttp); both are mostly run a little, where
// TurboFan's compiling on two cores costs more than its faster code saves: a warm `corral run --demo` took 1.3–1.7 s
// instead of 1.8–2.1 s, `corral serve` idled at 244–254 MB RSS instead of 318–321 MB (the TurboFan code), and 400
// sessions at once on Postgres cost 12–18 % less server CPU per turn; at 300 at once on the embedded store CPU per
// turn did not move and the peak RSS was ~150 MB higher (docs/benchmarks.md at 09f4c1e, "Issue 14, eighth pass").
// The `corral` command. Installed from the package it runs the built CLI with plain Node: the bundle
// (dist/cli/bundle/main.js, see scripts/build-cli.mjs: far fewer modules to load at start), else dist/cli/main.js. In a
// clone of the repository (a .git next to bin/, or no build at all) it runs the TypeScript sources through tsx (a
// dev dependency), so a fresh clone needs no build step and an edit is never hidden behind a stale dist/.
import { existsSync } from "node:fs"

const here = (path) => new URL(path, import.meta.url)
const bundled = here("../dist/cli/bundle/main.js")
const built = existsSync(bundled) ? bundled : here("../dist/cli/main.js")
const source = here("../src/cli/main.ts")
const fromSource = existsSync(source) && (existsSync(here("../.git")) || !existsSync(built))
if (fromSource) {
  const { register } = await import("tsx/esm/api")
  register()
  await import(source.href)
} else {
  await import(built.href)
}
