import { describe, expect, it } from "@effect/vitest"
import { build } from "esbuild"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { entryPeers, missingPeer, MissingPeerDependency } from "../../src/internal/optionalPeers.js"

const root = fileURLToPath(new URL("../../", import.meta.url))
const manifest = JSON.parse(readFileSync(`${root}package.json`, "utf8")) as {
  readonly dependencies: Record<string, string>
  readonly peerDependencies: Record<string, string>
  readonly peerDependenciesMeta: Record<string, { readonly optional?: boolean }>
  readonly exports: Record<string, Record<string, string>>
}
const optional = Object.keys(manifest.peerDependenciesMeta).filter((name) =>
  manifest.peerDependenciesMeta[name]!.optional
)
const packageOf = (specifier: string) =>
  specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0]!

/** The packages an entry's module graph imports statically (what Node must find before any of it runs). */
const staticPackages = async (entry: string): Promise<ReadonlySet<string>> => {
  const result = await build({
    entryPoints: [`${root}${entry}`],
    bundle: true,
    write: false,
    metafile: true,
    platform: "node",
    format: "esm",
    logLevel: "silent",
    plugins: [{
      name: "packages-external",
      setup: (b) => b.onResolve({ filter: /^[^./]/ }, (args) => ({ path: args.path, external: true }))
    }]
  })
  const found = new Set<string>()
  for (const input of Object.values(result.metafile.inputs)) {
    for (const imported of input.imports) {
      if (imported.external && imported.kind === "import-statement") found.add(packageOf(imported.path))
    }
  }
  return found
}

describe("entries and optional peers", () => {
  it("declares every peer but effect optional, and @effect/platform a dependency (npm i corral effect is enough)", () => {
    expect(Object.keys(manifest.peerDependencies).filter((name) => !optional.includes(name))).toEqual(["effect"])
    expect(manifest.dependencies["@effect/platform"]).toBeDefined()
  })

  it.each(["src/index.ts", "src/testing/index.ts", "src/mcp.ts"])(
    "%s loads no optional peer (an in-memory embed needs only effect)",
    async (entry) => {
      const packages = await staticPackages(entry)
      expect([...packages].filter((name) => optional.includes(name))).toEqual([])
    },
    60_000
  )

  it.each(
    [["src/cluster.ts", "corral/cluster"], ["src/sql.ts", "corral/sql"], [
      "src/providers.ts",
      "corral/providers"
    ]] as const
  )(
    "%s loads only optional peers that the error of %s names when missing",
    async (entry, name) => {
      const named: ReadonlyArray<string> = entryPeers[name]
      const needed = [...await staticPackages(entry)].filter((p) => optional.includes(p))
      expect(needed.length).toBeGreaterThan(0)
      expect(needed.filter((p) => !named.includes(p))).toEqual([])
    },
    60_000
  )

  it.each(["cluster", "sql", "providers"] as const)(
    "the installed corral/%s (dist/entries) exports the same names as its typed module",
    async (file) => {
      const exported = manifest.exports[`./${file}`]!
      expect(exported.default).toBe(`./dist/entries/${file}.js`)
      expect(exported.types).toBe(`./dist/${file}.d.ts`)
      const wrapper: object = await import(`../../src/entries/${file}.ts`)
      const module: object = await import(`../../src/${file}.ts`)
      expect(Object.keys(wrapper).sort()).toEqual(Object.keys(module).sort())
    },
    60_000
  )

  it("turns Node's not-found error for a peer into one naming the entry, the package and the install line", () => {
    const nodeError = Object.assign(
      new Error(
        "Cannot find package '@effect/cluster' imported from /app/node_modules/corral/dist/cluster/SessionEntity.js"
      ),
      { code: "ERR_MODULE_NOT_FOUND" }
    )
    const error = missingPeer("corral/cluster", nodeError)
    expect(error).toBeInstanceOf(MissingPeerDependency)
    expect(error?.missing).toContain("@effect/cluster")
    expect(error?.message).toMatch(/^corral\/cluster needs @effect\/cluster/)
    expect(error?.message).toContain(`npm install @effect/cluster@${manifest.peerDependencies["@effect/cluster"]}`)
    // Anything else (another package, another failure) passes through unchanged.
    expect(missingPeer("corral/sql", nodeError)).toBeUndefined()
    expect(missingPeer("corral/cluster", new Error("boom"))).toBeUndefined()
  })
})
