/**
 * `--import` hook for the MCP conformance CLI (@modelcontextprotocol/conformance 0.1.16) on Node 20: the CLI imports
 * `{ globSync } from "fs"`, which Node added in 22. Node fixes a builtin's ESM export names when it first loads it,
 * so patching the `fs` object is not enough: a loader hook instead answers the CLI's `fs` import with a module that
 * re-exports `node:fs` plus a small `globSync` (the CLI only uses it to find result files: `*`, `**`, `?`).
 * Installed only when `fs.globSync` is missing, so it is a no-op on Node ≥ 22.
 *
 * Usage: NODE_OPTIONS="--import ./scripts/conformance/client-globsync.mjs" npx conformance ...
 */
import fs from "node:fs"
import { register } from "node:module"

const shim = `
import fs from "node:fs"
import path from "node:path"
export * from "node:fs"
export default fs
const toRegExp = (pattern) => {
  let out = ""
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === "*" && pattern[i + 1] === "*") {
      out += ".*"
      i++
      if (pattern[i + 1] === "/") i++
    } else if (c === "*") out += "[^/]*"
    else if (c === "?") out += "[^/]"
    else out += c.replace(/[.+^$\{}()|[\\]\\\\]/g, "\\\\$&")
  }
  return new RegExp("^" + out + "$")
}
const walk = (root, dir, found) => {
  let entries
  try {
    entries = fs.readdirSync(path.join(root, dir), { withFileTypes: true })
  } catch {
    return
  }
  for (const entry of entries) {
    const rel = dir === "" ? entry.name : dir + "/" + entry.name
    found.push(rel)
    if (entry.isDirectory()) walk(root, rel, found)
  }
}
export const globSync = (patterns, options = {}) => {
  const cwd = options.cwd === undefined ? process.cwd() : String(options.cwd)
  const results = new Set()
  for (const pattern of Array.isArray(patterns) ? patterns : [patterns]) {
    const absolute = path.isAbsolute(pattern)
    const base = absolute ? "/" : cwd
    const re = toRegExp(absolute ? pattern.slice(1) : pattern)
    const all = []
    walk(base, "", all)
    for (const candidate of all) if (re.test(candidate)) results.add(absolute ? "/" + candidate : candidate)
  }
  return [...results]
}
`

const hooks = `
const SHIM = ${JSON.stringify(`data:text/javascript,${encodeURIComponent(shim)}`)}
export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL?.includes("/@modelcontextprotocol/conformance/")) {
    return { url: SHIM, shortCircuit: true }
  }
  return next(specifier, context)
}
`

if (typeof fs.globSync !== "function") {
  register(`data:text/javascript,${encodeURIComponent(hooks)}`, import.meta.url)
}
