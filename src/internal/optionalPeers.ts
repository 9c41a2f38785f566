/**
 * Optional peers: the entries that need packages not every program installs (`corral/cluster`, `corral/sql`,
 * `corral/providers`) are loaded through `load`, so that a missing package fails with an error naming the entry,
 * the missing packages and the install line — not Node's `ERR_MODULE_NOT_FOUND … '@effect/cluster'` from deep
 * inside dist/, which says neither who needed it nor why. `corral` itself needs none of them.
 */
import { readFileSync } from "node:fs"

/** What an entry needs beyond `effect` and the package's own dependencies, in install order. */
export const entryPeers = {
  "corral/cluster": ["@effect/cluster", "@effect/rpc", "@effect/sql", "@effect/experimental"],
  "corral/sql": ["@effect/sql", "@effect/sql-pg", "@effect/experimental"],
  "corral/providers": ["@effect/platform-node"],
  "Telemetry.layer": ["@effect/opentelemetry"]
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

/** The ranges corral states for its peers (its own package.json, read only when a peer is missing). */
const ranges = (): Record<string, string> => {
  try {
    const manifest = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
      readonly peerDependencies?: Record<string, string>
    }
    return manifest.peerDependencies ?? {}
  } catch {
    return {}
  }
}

/** The package a failed import could not find, from Node's `ERR_MODULE_NOT_FOUND` ("Cannot find package 'x'"). */
export const notFoundPackage = (error: unknown): string | undefined => {
  if (typeof error !== "object" || error === null) return undefined
  const { code, message } = error as { readonly code?: unknown; readonly message?: unknown }
  if (code !== "ERR_MODULE_NOT_FOUND" || typeof message !== "string") return undefined
  return /Cannot find package '((?:@[^/']+\/)?[^/']+)/.exec(message)?.[1]
}

const installed = (name: string): boolean => {
  try {
    import.meta.resolve(name)
    return true
  } catch (error) {
    return notFoundPackage(error) === undefined
  }
}

/**
 * The error for `entry` when `error` (a failed import) is a missing optional peer of it, naming every one of its
 * peers that is missing; `undefined` when it is something else.
 */
export const missingPeer = (entry: Entry, error: unknown): MissingPeerDependency | undefined => {
  const peers: ReadonlyArray<string> = entryPeers[entry]
  const culprit = notFoundPackage(error)
  if (culprit === undefined || !peers.includes(culprit)) return undefined
  const missing = peers.filter((name) => name === culprit || !installed(name))
  const stated = ranges()
  const install = `npm install ${missing.map((name) => stated[name] ? `${name}@${stated[name]}` : name).join(" ")}`
  return new MissingPeerDependency(entry, missing, install)
}

/** Imports an entry's implementation; a missing optional peer rejects with `MissingPeerDependency`. */
export const load = <A>(entry: Entry, importer: () => Promise<A>): Promise<A> =>
  importer().catch((error: unknown) => {
    throw missingPeer(entry, error) ?? error
  })
