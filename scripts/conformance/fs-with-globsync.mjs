/**
 * `node:fs` plus `globSync` (Node 22's, approximated with tinyglobby: patterns relative to `options.cwd`, dot files
 * included), for the conformance CLI on Node 20 (see `globsync.mjs`).
 */
import fs from "node:fs"
import { globSync as tinyGlobSync } from "tinyglobby"

export * from "node:fs"
export default fs

/** `fs.globSync(pattern, { cwd })`: the matching paths, relative to `cwd`. */
export const globSync = (pattern, options = {}) =>
  tinyGlobSync(pattern, { cwd: options.cwd ?? process.cwd(), dot: true })
