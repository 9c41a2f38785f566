/**
 * The embedded database's snapshot: a Postgres data directory initialised and migrated at build time
 * (scripts/build-pgdata.mjs → `dist/store/pgdata.tar.br`), unpacked into a NEW data directory instead of running
 * initdb there. initdb was 26 of the 27 s a new directory took to open on the loaded CI machine, and its WASM instance
 * held hundreds of MB (docs/benchmarks.md, issue 42); unpacking a few MB of files takes a fraction of a second.
 *
 * What it prevents:
 * - a half-written directory mistaken for a database: the snapshot is unpacked into `pgdata.loading` next to
 *   `pgdata` and renamed to `pgdata` only once complete (a rename is atomic), so a crash during a first start leaves
 *   either no `pgdata` or a whole one; a leftover `pgdata.loading` is discarded at the next start (the caller holds
 *   the data directory's lock, so nobody else is writing it);
 * - a snapshot that does not fit the code: it carries a manifest (its first tar entry, `corral-snapshot.json`) with
 *   the PGlite version that made it and the migrations applied. It is used only when PGlite's major.minor matches
 *   the installed one (the same compatibility an existing directory relies on across patch releases) and its
 *   migrations are a prefix of the code's: the rest are then applied by the normal migrate path at start. Otherwise
 *   initdb runs, and the reason is logged;
 * - a tarball that writes outside the directory: entry names with `..`, absolute paths or types other than file and
 *   directory are refused.
 *
 * The format is a plain ustar tarball (files and directories) compressed with Brotli at a 16 MB window: the three
 * databases initdb makes (template0, template1, postgres) are near-copies of each other further apart than gzip's
 * 32 KB window sees, so Brotli packs the 40 MB directory into ~1.5 MB where gzip -9 left 4.7 MB
 * (`brotli -dc pgdata.tar.br | tar t` lists it).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { mkdir, open, readdir, readFile, rename, rm, rmdir, stat } from "node:fs/promises"
import { createRequire } from "node:module"
import { dirname, join, relative, sep } from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { brotliCompress, brotliDecompress, constants } from "node:zlib"

/** What a snapshot says about itself. */
export interface Manifest {
  readonly format: 1
  /** The PGlite version that initialised it. */
  readonly pglite: string
  /** The migrations applied, in order (`<number>_<name>`, store/Migrations.ts). */
  readonly migrations: ReadonlyArray<string>
}

/** The snapshot's file name, under the package's `dist/store/`. */
export const fileName = "pgdata.tar.br"

/** The manifest's entry name inside the tarball (never unpacked into the directory). */
const manifestEntry = "corral-snapshot.json"

/** Where a snapshot is unpacked (or initdb writes) before it is renamed to the data directory. */
export const loadingPath = (pgdata: string): string => `${pgdata}.loading`

const compress = promisify(brotliCompress)
const decompress = promisify(brotliDecompress)

// ---------------------------------------------------------------------------------------------------- ustar

const block = 512

const writeString = (header: Buffer, offset: number, length: number, value: string) => {
  const bytes = Buffer.from(value, "utf8")
  if (bytes.length > length) throw new Error(`tar: "${value}" does not fit ${length} bytes`)
  bytes.copy(header, offset)
}

const writeOctal = (header: Buffer, offset: number, length: number, value: number) =>
  writeString(header, offset, length, value.toString(8).padStart(length - 1, "0") + "\0")

/** One ustar header: `name` (split into prefix and name when longer than 100 bytes), file ('0') or directory ('5'). */
const header = (name: string, type: "0" | "5", mode: number, size: number, mtimeS: number): Buffer => {
  const h = Buffer.alloc(block)
  let prefix = ""
  let rest = name
  if (Buffer.byteLength(name) > 100) {
    const cut = name.lastIndexOf("/", 155)
    if (cut <= 0) throw new Error(`tar: the path ${name} is too long`)
    prefix = name.slice(0, cut)
    rest = name.slice(cut + 1)
  }
  writeString(h, 0, 100, rest)
  writeOctal(h, 100, 8, mode & 0o7777)
  writeOctal(h, 108, 8, 0)
  writeOctal(h, 116, 8, 0)
  writeOctal(h, 124, 12, size)
  writeOctal(h, 136, 12, Math.floor(mtimeS))
  h.fill(0x20, 148, 156)
  writeString(h, 156, 1, type)
  writeString(h, 257, 6, "ustar\0")
  writeString(h, 263, 2, "00")
  writeString(h, 345, 155, prefix)
  let sum = 0
  for (const byte of h) sum += byte
  writeString(h, 148, 8, sum.toString(8).padStart(6, "0") + "\0 ")
  return h
}

const readString = (h: Buffer, offset: number, length: number): string => {
  const end = h.indexOf(0, offset)
  return h.toString("utf8", offset, end === -1 || end > offset + length ? offset + length : end)
}

const readOctal = (h: Buffer, offset: number, length: number): number => {
  const text = readString(h, offset, length).trim()
  if (!/^[0-7]*$/.test(text)) throw new Error("tar: a corrupt header (a number field is not octal)")
  return text === "" ? 0 : parseInt(text, 8)
}

/** An entry of a tarball: a file with its bytes, or a directory. */
export interface Entry {
  readonly name: string
  readonly type: "file" | "directory"
  readonly mode: number
  readonly data: Buffer
}

/** The entries of an uncompressed ustar tarball; throws on a corrupt header or an unsafe or unsupported entry. */
export const untar = (tar: Buffer): Array<Entry> => {
  const entries: Array<Entry> = []
  for (let at = 0; at + block <= tar.length;) {
    const h = tar.subarray(at, at + block)
    if (h.every((byte) => byte === 0)) break
    let sum = 0
    for (let i = 0; i < block; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]!
    if (sum !== readOctal(h, 148, 8)) throw new Error("tar: a corrupt header (checksum)")
    const prefix = readString(h, 345, 155)
    const name = (prefix === "" ? "" : `${prefix}/`) + readString(h, 0, 100)
    const size = readOctal(h, 124, 12)
    const flag = String.fromCharCode(h[156]!)
    const parts = name.split("/").filter((part) => part !== "" && part !== ".")
    if (name.startsWith("/") || parts.includes("..") || parts.length === 0) {
      throw new Error(`tar: the entry "${name}" points outside the directory`)
    }
    if (flag !== "0" && flag !== "\0" && flag !== "5") {
      throw new Error(`tar: the entry "${name}" is neither file nor directory`)
    }
    const start = at + block
    if (start + size > tar.length) throw new Error(`tar: the entry "${name}" is cut short`)
    entries.push({
      name: parts.join("/"),
      type: flag === "5" ? "directory" : "file",
      mode: readOctal(h, 100, 8),
      data: tar.subarray(start, start + size)
    })
    at = start + Math.ceil(size / block) * block
  }
  return entries
}

/** Every file and directory under `dir`, parents first, names sorted (paths relative, `/`-separated). */
const walk = async (dir: string): Promise<Array<string>> => {
  const out: Array<string> = []
  const visit = async (path: string) => {
    for (const entry of (await readdir(path, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const full = join(path, entry.name)
      out.push(relative(dir, full).split(sep).join("/"))
      if (entry.isDirectory()) await visit(full)
    }
  }
  await visit(dir)
  return out
}

/** A snapshot of the (closed) data directory `pgdata`: a Brotli-compressed ustar tarball, `manifest` first. */
export const pack = async (pgdata: string, manifest: Manifest): Promise<Buffer> => {
  const parts: Array<Buffer> = []
  const add = (name: string, type: "0" | "5", mode: number, data: Buffer, mtimeS: number) => {
    parts.push(header(name, type, mode, data.length, mtimeS))
    if (data.length > 0) parts.push(data, Buffer.alloc((block - (data.length % block)) % block))
  }
  const now = Date.now() / 1000
  add(manifestEntry, "0", 0o644, Buffer.from(JSON.stringify(manifest)), now)
  for (const name of await walk(pgdata)) {
    const full = join(pgdata, name)
    const info = await stat(full)
    if (info.isDirectory()) add(`${name}/`, "5", info.mode, Buffer.alloc(0), info.mtimeMs / 1000)
    else if (info.isFile()) add(name, "0", info.mode, await readFile(full), info.mtimeMs / 1000)
    else throw new Error(`snapshot: ${full} is neither file nor directory`)
  }
  parts.push(Buffer.alloc(block * 2))
  const tar = Buffer.concat(parts)
  return await compress(tar, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: 9,
      [constants.BROTLI_PARAM_LGWIN]: 24,
      [constants.BROTLI_PARAM_SIZE_HINT]: tar.length
    }
  })
}

/** A snapshot read: its manifest and the entries to unpack. */
export interface Snapshot {
  readonly manifest: Manifest
  readonly entries: ReadonlyArray<Entry>
}

/** Reads the snapshot `file`; rejects when it is not a snapshot (no manifest first, a corrupt tarball). */
export const read = async (file: string): Promise<Snapshot> => {
  // One output chunk for the whole tarball (~40 MB): a buffer that large is its own mapping, returned to the system
  // when it is collected. At zlib's 16 KB chunks the pieces stayed in the allocator's heap after the start (RSS
  // +50 MB for good; docs/benchmarks.md, issue 42).
  const entries = untar(await decompress(await readFile(file), { chunkSize: 64 * 1024 * 1024 }))
  const first = entries[0]
  if (first === undefined || first.name !== manifestEntry) throw new Error(`${file} has no ${manifestEntry}`)
  const manifest = JSON.parse(first.data.toString("utf8")) as Manifest
  if (manifest.format !== 1 || typeof manifest.pglite !== "string" || !Array.isArray(manifest.migrations)) {
    throw new Error(`${file}: an unknown manifest ${first.data.toString("utf8").slice(0, 200)}`)
  }
  return { manifest, entries: entries.slice(1) }
}

/** Why `manifest` cannot start a database for this code, or undefined when it can (see the header). */
export const unfit = (
  manifest: Manifest,
  installedPglite: string,
  codeMigrations: ReadonlyArray<string>
): string | undefined => {
  const series = (version: string) => version.split(".").slice(0, 2).join(".")
  if (series(manifest.pglite) !== series(installedPglite)) {
    return `it was made by PGlite ${manifest.pglite} and PGlite ${installedPglite} is installed`
  }
  const ahead = manifest.migrations.findIndex((name, i) => codeMigrations[i] !== name)
  if (ahead !== -1) {
    return `its migration ${manifest.migrations[ahead]} is not this code's ${codeMigrations[ahead] ?? "(none)"}`
  }
  return undefined
}

/**
 * Writes the entries into `into` (created), each file flushed to disk (fsync), then the directories: what is renamed
 * to `pgdata` afterwards is on disk, not only in the page cache. Directories are 0700 and files 0600 whatever the
 * tarball says: the database is the operator's alone (Postgres itself insists on that for its directory).
 */
export const unpack = async (entries: ReadonlyArray<Entry>, into: string): Promise<void> => {
  await mkdir(into, { recursive: true, mode: 0o700 })
  const dirs = new Set<string>([into])
  const files: Array<readonly [string, Buffer]> = []
  for (const entry of entries) {
    const path = join(into, ...entry.name.split("/"))
    const dir = entry.type === "directory" ? path : dirname(path)
    if (!dirs.has(dir)) {
      await mkdir(dir, { recursive: true, mode: 0o700 })
      dirs.add(dir)
    }
    if (entry.type === "file") files.push([path, entry.data])
  }
  // Eight at a time: a file's write and fsync wait on the disk, and the journal commits concurrent fsyncs together
  // (1,062 files one after another: 3.4 s on the loaded CI machine; eight at a time: 0.75 s).
  let next = 0
  const writer = async () => {
    for (let at = next++; at < files.length; at = next++) {
      const [path, data] = files[at]!
      const handle = await open(path, "w", 0o600)
      try {
        await handle.writeFile(data)
        await handle.sync()
      } finally {
        await handle.close()
      }
    }
  }
  await Promise.all(Array.from({ length: 8 }, writer))
  for (const dir of dirs) await syncDirectory(dir)
}

/** fsync of a directory (its entries' names); a file system that refuses it is left as it is. */
const syncDirectory = async (dir: string): Promise<void> => {
  const handle = await open(dir, "r").catch(() => undefined)
  if (handle === undefined) return
  await handle.sync().catch(() => undefined)
  await handle.close()
}

// ---------------------------------------------------------------------------------------------------- locating

/** The installed PGlite's version (its package.json, next to its entry module). */
export const installedPglite = (): string => {
  const require = createRequire(import.meta.url)
  let dir = dirname(require.resolve("@electric-sql/pglite"))
  for (;;) {
    const manifest = join(dir, "package.json")
    if (existsSync(manifest)) {
      const parsed = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version?: string }
      if (parsed.name === "@electric-sql/pglite" && typeof parsed.version === "string") return parsed.version
    }
    const up = dirname(dir)
    if (up === dir) throw new Error("the installed PGlite's package.json was not found")
    dir = up
  }
}

/**
 * The snapshot shipped with this package: `dist/store/pgdata.tar.br` under the nearest folder above this module
 * whose package.json is Corral's (the tsc build, the CLI bundle and the sources alike), or undefined when there is
 * none (the sources before a build, or Corral bundled into another program).
 */
export const shipped = (): string | undefined => {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const manifest = join(dir, "package.json")
    if (existsSync(manifest)) {
      try {
        if ((JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "corral") {
          const file = join(dir, "dist", "store", fileName)
          return existsSync(file) ? file : undefined
        }
      } catch {
        // an unreadable package.json is not Corral's: keep looking
      }
    }
    const up = dirname(dir)
    if (up === dir) return undefined
    dir = up
  }
}

// ---------------------------------------------------------------------------------------------------- preparing

/** How a data directory was made ready to open. */
export type Prepared =
  | { readonly _tag: "existing" }
  | { readonly _tag: "snapshot"; readonly file: string; readonly manifest: Manifest; readonly ms: number }
  | { readonly _tag: "initdb"; readonly reason: string }

/** Whether `pgdata` holds a database (Postgres writes `PG_VERSION` first thing; ours arrive whole by rename). */
export const exists = (pgdata: string): boolean => existsSync(join(pgdata, "PG_VERSION"))

/**
 * Discards what a crash during a first start left: `pgdata.loading`, and an EMPTY `pgdata` (a directory created
 * and never filled). A non-empty `pgdata` without `PG_VERSION` is left alone (it is not ours to delete).
 */
export const discardLeftovers = async (pgdata: string): Promise<void> => {
  await rm(loadingPath(pgdata), { recursive: true, force: true })
  if (existsSync(pgdata) && !exists(pgdata) && readdirSync(pgdata).length === 0) await rmdir(pgdata)
}

/** Moves a complete `pgdata.loading` into place and flushes the rename. */
export const commit = async (pgdata: string): Promise<void> => {
  await rename(loadingPath(pgdata), pgdata)
  await syncDirectory(dirname(pgdata))
}

/**
 * Makes `pgdata` ready to open: an existing database is left as it is; a new one is unpacked from `snapshot` when
 * it fits (see the header); otherwise the caller runs initdb (the reason says why). `snapshot` false: never.
 */
export const prepare = async (
  pgdata: string,
  snapshot: string | false | undefined,
  codeMigrations: ReadonlyArray<string>
): Promise<Prepared> => {
  if (exists(pgdata)) return { _tag: "existing" }
  await discardLeftovers(pgdata)
  if (snapshot === false) return { _tag: "initdb", reason: "snapshots are switched off for this database" }
  const file = snapshot ?? shipped()
  if (file === undefined) {
    return { _tag: "initdb", reason: `no snapshot was found (dist/store/${fileName}: run npm run build)` }
  }
  if (existsSync(pgdata)) return { _tag: "initdb", reason: `${pgdata} is not empty and holds no database` }
  const started = Date.now()
  let read_: Snapshot
  try {
    read_ = await read(file)
  } catch (cause) {
    return { _tag: "initdb", reason: `the snapshot ${file} could not be read: ${(cause as Error).message}` }
  }
  const why = unfit(read_.manifest, installedPglite(), codeMigrations)
  if (why !== undefined) return { _tag: "initdb", reason: `the snapshot ${file} does not fit: ${why}` }
  await unpack(read_.entries, loadingPath(pgdata))
  await commit(pgdata)
  return { _tag: "snapshot", file, manifest: read_.manifest, ms: Date.now() - started }
}
