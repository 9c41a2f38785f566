import { describe, expect, it } from "@effect/vitest"
import { build } from "esbuild"
import { readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import {
  check,
  entryPeers,
  load,
  missingPeer,
  MissingPeerDependency,
  notInstalled
} from "../../src/internal/optionalPeers.js"

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

/**
 * The packages an entry's module graph imports statically (what Node must find before any of it runs), or with
 * `dynamic` also those it imports on demand (`import()`).
 */
const staticPackages = async (entry: string, dynamic = false): Promise<ReadonlySet<string>> => {
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
      if (
        imported.external && (imported.kind === "import-statement" || dynamic && imported.kind === "dynamic-import")
      ) {
        found.add(packageOf(imported.path))
      }
    }
  }
  return found
}

describe("entries and optional peers", () => {
  it("declares every peer but effect optional, and only @effect/platform and ajv as dependencies", () => {
    expect(Object.keys(manifest.peerDependencies).filter((name) => !optional.includes(name))).toEqual(["effect"])
    // `npm i corral effect` installs these and what they need, nothing else: MCP, OpenTelemetry, PGlite and pg are
    // optional peers of the entries that use them.
    expect(Object.keys(manifest.dependencies).sort()).toEqual(["@effect/platform", "ajv"])
  })

  it("names in the entries' errors exactly the optional peers package.json declares (types aside)", () => {
    const named = new Set<string>(Object.values(entryPeers).flat())
    expect([...named].filter((name) => !optional.includes(name))).toEqual([])
    expect(optional.filter((name) => !named.has(name))).toEqual(["@types/pg"])
  })

  it.each(["src/index.ts", "src/testing/index.ts"])(
    "%s loads no package but effect, @effect/platform and ajv, not even on demand (an in-memory embed needs only effect)",
    async (entry) => {
      const packages = await staticPackages(entry, true)
      expect([...packages].filter((name) => optional.includes(name))).toEqual([])
      expect(
        [...packages].filter((name) =>
          !["effect", "@effect/platform", "ajv"].includes(name) && !name.startsWith("node:")
        )
      )
        .toEqual([])
    },
    60_000
  )

  it.each(
    [
      ["src/cluster.ts", "corral/cluster"],
      ["src/sql.ts", "corral/sql"],
      ["src/providers.ts", "corral/providers"],
      ["src/mcp.ts", "corral/mcp"]
    ] as const
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

  it(
    "src/telemetry.ts loads no optional peer until the layer is built, and then only those its error names",
    async () => {
      expect([...await staticPackages("src/telemetry.ts")].filter((p) => optional.includes(p))).toEqual([])
      const named: ReadonlyArray<string> = entryPeers["corral/telemetry"]
      const onDemand = [...await staticPackages("src/telemetry.ts", true)].filter((p) => optional.includes(p))
      expect(onDemand.length).toBeGreaterThan(0)
      expect(onDemand.filter((p) => !named.includes(p))).toEqual([])
    },
    60_000
  )

  it("finds every peer installed in the repository, and tells a package that is not from one that is", async () => {
    for (const entry of Object.keys(entryPeers) as Array<keyof typeof entryPeers>) expect(check(entry)).toBeUndefined()
    expect(notInstalled(["effect", "corral-no-such-package", "@effect/no-such-package"])).toEqual([
      "corral-no-such-package",
      "@effect/no-such-package"
    ])
    // With every peer found, `load` is the import itself.
    await expect(load("corral/mcp", () => import("../../src/mcp.js"))).resolves.toHaveProperty("layer")
  })

  it.each(["cluster", "sql", "providers", "mcp", "telemetry"] as const)(
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

  it("gives in the README's entries table, for every entry, exactly the install line its error gives", async () => {
    // @ts-expect-error a plain ES module of pack-check's (no declarations); it parses the table the same way there
    const { readmeInstalls } = (await import("../../scripts/pack-check/readme-installs.mjs")) as {
      readonly readmeInstalls: (path: string) => ReadonlyMap<string, string>
    }
    const lines = readmeInstalls(`${root}README.md`)
    const rowOf = (entry: string) => entry === "the embedded database" ? "corral/sql with { dataDir }" : entry
    for (const [entry, peers] of Object.entries(entryPeers)) {
      const full = `npm install ${peers.map((name) => `${name}@${manifest.peerDependencies[name]}`).join(" ")}`
      expect(lines.get(rowOf(entry)), entry).toBe(full)
    }
    expect(lines.size).toBe(Object.keys(entryPeers).length)
  })

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
