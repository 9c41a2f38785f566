/**
 * A new embedded data directory starts from a snapshot (a data directory initialised and migrated ahead of time)
 * instead of running initdb (issue 42): it is fully migrated once the normal migrate path has run, keeps its data
 * across a reopen, an existing directory is opened as it is, and what a crash during a first start leaves behind is
 * never taken for a database. One snapshot is made for the whole file (one initdb), two migrations behind the code's;
 * the last test uses it for a database whose worker is killed and restarted.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect, Logger, LogLevel } from "effect"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { brotliCompressSync } from "node:zlib"
import { Pool } from "pg"
import * as Embedded from "../../src/store/Embedded.js"
import * as EmbeddedSnapshot from "../../src/store/EmbeddedSnapshot.js"
import * as PgliteHost from "../../src/store/internal/pgliteHost.js"
import * as PgSnapshot from "../../src/store/internal/pgSnapshot.js"
import * as Migrations from "../../src/store/Migrations.js"

const codeMigrations = Object.keys(Migrations.all)
/** The snapshot's migrations: the code's first two (the rest must be applied after loading it). */
const behind = Object.fromEntries(Object.entries(Migrations.all).slice(0, 2))

let scratch = ""
let snapshot = ""

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "corral-snapshot-test-"))
  snapshot = join(scratch, "behind.tar.br")
  await Effect.runPromise(
    EmbeddedSnapshot.make(snapshot, { migrations: behind }).pipe(Logger.withMinimumLogLevel(LogLevel.None))
  )
}, 240_000)

afterAll(() => rmSync(scratch, { recursive: true, force: true }))

/** Runs `program` on the embedded database in `dataDir` (opened from `snapshotFile`), with the log lines written. */
const withDatabase = <A, E>(
  dataDir: string,
  program: Effect.Effect<A, E, SqlClient.SqlClient>,
  snapshotFile: string | false = snapshot
) =>
  Effect.gen(function*() {
    const lines: Array<string> = []
    const logger = Logger.make(({ message }) => {
      lines.push(Array.isArray(message) ? message.join(" ") : String(message))
    })
    const result = yield* program.pipe(
      Effect.provide(Embedded.layerEmbedded({ dataDir, snapshot: snapshotFile })),
      Effect.provide(Logger.replace(Logger.defaultLogger, logger))
    )
    return { result, lines }
  })

const appliedNames = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly name: string }>`SELECT name FROM corral_migrations ORDER BY migration_id`,
    (rows) => rows.map((row) => row.name)
  )

const newDataDir = () => join(mkdtempSync(join(scratch, "dir-")), "data")

describe("Embedded: a new data directory from the snapshot", () => {
  it.live(
    "is created from the snapshot (no initdb), gets the code's remaining migrations, and keeps its data across a reopen",
    () =>
      Effect.gen(function*() {
        const dataDir = newDataDir()
        const first = yield* withDatabase(
          dataDir,
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const before = yield* appliedNames(sql)
            const applied = yield* Migrations.run
            yield* sql`CREATE TABLE kept (v text)`
            yield* sql`INSERT INTO kept VALUES ('written before the reopen')`
            return { before, applied: applied.map(([, name]) => name), after: yield* appliedNames(sql) }
          })
        )
        // The fast path: the directory came from the snapshot, with the snapshot's two migrations in it ...
        expect(first.lines.some((line) => line.includes("created from the snapshot"))).toBe(true)
        expect(first.lines.some((line) => line.includes("initdb"))).toBe(false)
        expect(first.result.before).toEqual(["init", "approvals"])
        // ... and the normal migrate path applied the rest.
        expect(first.result.applied).toEqual(codeMigrations.slice(2).map((key) => key.replace(/^\d+_/, "")))
        expect(first.result.after).toHaveLength(codeMigrations.length)

        // Reopened (even with a snapshot that cannot be read): opened as it is, nothing re-created or re-applied.
        const second = yield* withDatabase(
          dataDir,
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            const applied = yield* Migrations.run
            const rows = yield* sql<{ readonly v: string }>`SELECT v FROM kept`
            return { applied, rows: rows.map((row) => row.v) }
          }),
          join(scratch, "no-such-snapshot.tar.br")
        )
        expect(second.lines.some((line) => line.includes("created"))).toBe(false)
        expect(second.result.applied).toEqual([])
        expect(second.result.rows).toEqual(["written before the reopen"])
      }),
    120_000
  )

  it.live(
    "what a crash during a first start left (a half-written pgdata.loading, an empty pgdata) is discarded, not trusted",
    () =>
      Effect.gen(function*() {
        const dataDir = newDataDir()
        const pgdata = join(dataDir, "pgdata")
        // A first start killed while unpacking: some files (PG_VERSION among them) but not the rest; and an empty
        // pgdata, as a start killed between creating it and filling it leaves.
        mkdirSync(join(pgdata + ".loading", "base", "1"), { recursive: true })
        writeFileSync(join(pgdata + ".loading", "PG_VERSION"), "17\n")
        writeFileSync(join(pgdata + ".loading", "base", "1", "leftover"), "half of a relation")
        mkdirSync(pgdata)
        const opened = yield* withDatabase(
          dataDir,
          Effect.gen(function*() {
            const sql = yield* SqlClient.SqlClient
            return yield* appliedNames(sql)
          })
        )
        expect(opened.lines.some((line) => line.includes("created from the snapshot"))).toBe(true)
        expect(opened.result).toEqual(["init", "approvals"])
        expect(existsSync(pgdata + ".loading")).toBe(false)
        expect(existsSync(join(pgdata, "base", "1", "leftover"))).toBe(false)
        expect(readFileSync(join(pgdata, "PG_VERSION"), "utf8").trim()).not.toBe("")
      }),
    120_000
  )
})

describe("Embedded: which snapshot may start a database", () => {
  const manifest = (pglite: string, migrations: ReadonlyArray<string>): PgSnapshot.Manifest => ({
    format: 1,
    pglite,
    migrations
  })

  it("fits when PGlite's major.minor matches and its migrations are a prefix of the code's", () => {
    expect(PgSnapshot.unfit(manifest("0.5.17", codeMigrations.slice(0, 3)), "0.5.19", codeMigrations))
      .toBeUndefined()
    expect(PgSnapshot.unfit(manifest("0.5.17", codeMigrations), "0.5.17", codeMigrations)).toBeUndefined()
  })

  it("does not fit another PGlite series, or migrations the code does not have (a snapshot ahead of the code)", () => {
    expect(PgSnapshot.unfit(manifest("0.4.9", codeMigrations), "0.5.17", codeMigrations)).toContain("PGlite 0.4.9")
    expect(PgSnapshot.unfit(manifest("0.5.17", [...codeMigrations, "9999_future"]), "0.5.17", codeMigrations))
      .toContain("9999_future")
    expect(PgSnapshot.unfit(manifest("0.5.17", ["0001_init", "0002_other"]), "0.5.17", codeMigrations))
      .toContain("0002_other")
  })

  it.live("a directory that holds files but no database is left alone: initdb, never the snapshot over it", () =>
    Effect.promise(async () => {
      const pgdata = join(newDataDir(), "pgdata")
      mkdirSync(pgdata, { recursive: true })
      writeFileSync(join(pgdata, "notes.txt"), "not a database")
      const prepared = await PgSnapshot.prepare(pgdata, snapshot, codeMigrations)
      expect(prepared._tag).toBe("initdb")
      expect(readdirSync(pgdata)).toEqual(["notes.txt"])
    }))

  it("a tarball entry that would write outside the directory is refused", () => {
    const entry = (name: string) => {
      const header = Buffer.alloc(512)
      header.write(name, 0)
      header.write("0000644\0", 100)
      header.write("00000000000\0", 124)
      header.write("0", 156)
      header.write("ustar\0", 257)
      header.fill(0x20, 148, 156)
      let sum = 0
      for (const byte of header) sum += byte
      header.write(sum.toString(8).padStart(6, "0") + "\0 ", 148)
      return Buffer.concat([header, Buffer.alloc(1024)])
    }
    expect(PgSnapshot.untar(entry("base/ok")).map((e) => e.name)).toEqual(["base/ok"])
    expect(() => PgSnapshot.untar(entry("../escape"))).toThrow(/outside the directory/)
    expect(() => PgSnapshot.untar(entry("/etc/passwd"))).toThrow(/outside the directory/)
    // A snapshot file that is not one (no manifest first) is not used.
    const bogus = join(scratch, "bogus.tar.br")
    writeFileSync(bogus, brotliCompressSync(entry("base/ok")))
    return expect(PgSnapshot.read(bogus)).rejects.toThrow(/corral-snapshot.json/)
  })
})

describe("Embedded: a worker that dies", () => {
  it.live(
    "fails the statement in flight naming the exit, is restarted in the process, and the directory is there again",
    () =>
      Effect.promise(async () => {
        const pgdata = join(newDataDir(), "pgdata")
        const { host } = await PgliteHost.Host.start(
          { path: pgdata, postgresqlconf: [] },
          { openTimeoutMs: 120_000, timeoutMs: 60_000, closeTimeoutMs: 1_500 },
          { file: snapshot, migrations: codeMigrations }
        )
        const events: Array<string> = []
        host.onEvent = (line) => events.push(line)
        // node-postgres over the worker, as Embedded.ts wires it: a pool of one client.
        const pool = new Pool({
          user: "postgres",
          database: "postgres",
          stream: () => new PgliteHost.Socket(host),
          max: 1
        })
        pool.on("error", () => {})
        const query = (text: string) => pool.query(text) as Promise<{ readonly rows: Array<unknown> }>
        try {
          await query("CREATE TABLE kept (v text)")
          await query("INSERT INTO kept VALUES ('committed before the crash')")
          const inFlight = query("SELECT pg_sleep(5)").then(() => "answered", (error: Error) => error.message)
          await new Promise((resolve) => setTimeout(resolve, 300))
          await host.kill()
          expect(await inFlight).toMatch(/worker exited \(code \d+\); restarting it/)
          // Back within the open bound: the next statement (on a new connection) reads what was committed.
          let rows: Array<unknown> | undefined
          for (const deadline = Date.now() + 60_000; rows === undefined && Date.now() < deadline;) {
            rows = await query("SELECT v FROM kept").then((result) => result.rows, () => undefined)
            if (rows === undefined) await new Promise((resolve) => setTimeout(resolve, 100))
          }
          expect(rows).toEqual([{ v: "committed before the crash" }])
          expect(events[0]).toMatch(/worker exited \(code \d+\); restarting it \(restart 1 of at most 3/)
          expect(events.at(-1)).toContain("restarted and the database is open again")
        } finally {
          await host.close()
          await pool.end().catch(() => undefined)
        }
      }),
    180_000
  )
})
