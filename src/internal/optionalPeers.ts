/**
 * Optional peers: the entries that need packages not every program installs (`corral/cluster`, `corral/sql`,
 * `corral/mcp`, `corral/telemetry`, `corral/providers`; and the embedded database, for `corral/sql`'s `dataDir` and
 * `corral serve` without a database URL) check them before loading (`load`, `check`), so that a missing package fails
 * with an error naming the entry, every missing package and the install line — not Node's `ERR_MODULE_NOT_FOUND … '@effect/cluster'` from deep
 * inside dist/, which says neither who needed it nor why, and names only the first of several. `corral` itself
 * needs none of them.
 */
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

/**
 * What each entry needs beyond `effect` and the package's own dependencies, in install order. Every name here is an
 * optional peer in package.json (test/entries/OptionalPeers.test.ts keeps the two equal).
 */
export const entryPeers = {
  "corral/cluster": ["@effect/cluster", "@effect/rpc", "@effect/workflow", "@effect/sql", "@effect/experimental"],
  "corral/sql": ["@effect/sql", "@effect/sql-pg", "@effect/experimental", "pg"],
  // `corral/sql` with a `dataDir`, and `corral serve` without a database URL.
  "the embedded database": ["@electric-sql/pglite"],
  "corral/mcp": ["@modelcontextprotocol/sdk"],
  "corral/telemetry": [
    "@effect/opentelemetry",
    "@opentelemetry/api",
    "@opentelemetry/resources",
    "@opentelemetry/semantic-conventions",
    "@opentelemetry/sdk-trace-base",
    "@opentelemetry/sdk-metrics",
    "@opentelemetry/otlp-exporter-base",
    "@opentelemetry/otlp-transformer",
    "@opentelemetry/exporter-metrics-otlp-http",
    "@opentelemetry/exporter-metrics-otlp-proto"
  ],
  "corral/providers": ["@effect/platform-node"]
} as const

/** The part of the program that needs an optional peer. */
export type Entry = keyof typeof entryPeers

/** An optional peer dependency is not installed: `message` names the entry, the packages and the install line. */
export class MissingPeerDependency extends Error {
  readonly code = "CORRAL_MISSING_PEER"
  constructor(readonly entry: Entry, readonly missing: ReadonlyArray<string>, readonly install: string) {
    super(
      `${entry} needs ${list(missing)}, not installed (optional peer ${
        missing.length === 1 ? "dependency" : "dependencies"
      } of corral; the \`corral\` entry needs none). Install ${missing.length === 1 ? "it" : "them"}: ${install}`
    )
    this.name = "MissingPeerDependency"
  }
}

const list = (names: ReadonlyArray<string>): string =>
  names.length === 1 ? names[0]! : `${names.slice(0, -1).join(", ")} and ${names[names.length - 1]!}`

/**
 * The ranges corral states for its peers, from its own package.json: the nearest one named `corral` above this
 * module (dist/internal/ in the package, a chunk of the CLI bundle, or src/internal/ in the repository). Read only
 * when a peer is missing.
 */
const ranges = (): Record<string, string> => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const file = join(dir, "package.json")
    if (existsSync(file)) {
      try {
        const manifest = JSON.parse(readFileSync(file, "utf8")) as {
          readonly name?: string
          readonly peerDependencies?: Record<string, string>
        }
        if (manifest.name === "corral") return manifest.peerDependencies ?? {}
      } catch {
        // Not a manifest we can read: keep looking above.
      }
    }
    const parent = dirname(dir)
    if (parent === dir) return {}
    dir = parent
  }
}

/** The package a failed import could not find, from Node's `ERR_MODULE_NOT_FOUND` ("Cannot find package 'x'"). */
export const notFoundPackage = (error: unknown): string | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  const { code, message } = error as { readonly code?: unknown; readonly message?: unknown }
  if (code !== "ERR_MODULE_NOT_FOUND" || typeof message !== "string") return undefined
  return /Cannot find package '((?:@[^/']+\/)?[^/']+)/.exec(message)?.[1]
}

/**
 * In the CLI's bundle (scripts/build-cli.mjs defines it): the packages the bundle leaves external. Every other peer is
 * inside the bundle, so it is there whether or not the project installed it.
 */
declare const CORRAL_BUNDLE_EXTERNAL: ReadonlyArray<string> | undefined
const bundleExternal = typeof CORRAL_BUNDLE_EXTERNAL === "undefined" ? undefined : CORRAL_BUNDLE_EXTERNAL

/**
 * Whether Node finds package `name` from here (where corral's own modules resolve their imports). Resolving reads
 * a few `package.json` files and loads nothing. A package whose `exports` has no main entry is still installed.
 */
const installed = (name: string): boolean => {
  if (bundleExternal !== undefined && !bundleExternal.includes(name)) return true
  if (typeof import.meta.resolve === "function") {
    try {
      import.meta.resolve(name)
      return true
    } catch (error) {
      return notFoundPackage(error) === undefined
    }
  }
  // Loaders without `import.meta.resolve` (vitest's): the package's directory on Node's lookup path.
  const paths = createRequire(import.meta.url).resolve.paths(name) ?? []
  return paths.some((dir) => existsSync(join(dir, name, "package.json")))
}

/** Those of `names` that Node does not find from here. */
export const notInstalled = (names: ReadonlyArray<string>): Array<string> => names.filter((name) => !installed(name))

const errorFor = (entry: Entry, missing: ReadonlyArray<string>): MissingPeerDependency => {
  const stated = ranges()
  const install = `npm install ${missing.map((name) => stated[name] ? `${name}@${stated[name]}` : name).join(" ")}`
  return new MissingPeerDependency(entry, missing, install)
}

/** The error naming every peer of `entry` that is not installed; `undefined` when all are. */
export const check = (entry: Entry): MissingPeerDependency | undefined => {
  const missing = notInstalled(entryPeers[entry])
  return missing.length === 0 ? undefined : errorFor(entry, missing)
}

/** Throws `check(entry)`'s error when a peer of `entry` is missing. */
export const requirePeers = (entry: Entry): void => {
  const error = check(entry)
  if (error !== undefined) throw error
}

/**
 * The error for `entry` when `error` (a failed import) is a missing optional peer of it, naming every one of its
 * peers that is missing; `undefined` when it is something else.
 */
export const missingPeer = (entry: Entry, error: unknown): MissingPeerDependency | undefined => {
  const peers: ReadonlyArray<string> = entryPeers[entry]
  const culprit = notFoundPackage(error)
  if (culprit === undefined || !peers.includes(culprit)) return undefined
  return errorFor(entry, peers.filter((name) => name === culprit || !installed(name)))
}

/**
 * Imports an entry's implementation once every peer of `entry` is found; a missing one rejects with
 * `MissingPeerDependency` naming all that are missing (before anything is loaded), as does a peer that the check
 * found but Node could not load.
 */
export const load = <A>(entry: Entry, importer: () => Promise<A>): Promise<A> => {
  const missing = check(entry)
  if (missing !== undefined) return Promise.reject(missing)
  return importer().catch((error: unknown) => {
    throw missingPeer(entry, error) ?? error
  })
}
