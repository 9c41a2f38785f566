#!/usr/bin/env node
/* global URL */
// The `corral` command. Installed from the package it runs the built CLI (dist/cli/main.js) with plain Node. In a
// clone of the repository (a .git next to bin/, or no build at all) it runs the TypeScript sources through tsx (a
// dev dependency), so a fresh clone needs no build step and an edit is never hidden behind a stale dist/.
import { existsSync } from "node:fs"

const here = (path) => new URL(path, import.meta.url)
const built = here("../dist/cli/main.js")
const source = here("../src/cli/main.ts")
const fromSource = existsSync(source) && (existsSync(here("../.git")) || !existsSync(built))
if (fromSource) {
  const { register } = await import("tsx/esm/api")
  register()
  await import(source.href)
} else {
  await import(built.href)
}
