/**
 * The server's side of the embedded database's worker (pgliteWorker.ts): starts it, carries node-postgres's
 * wire-protocol bytes to it and its answers back, and bounds every wait on it, so a worker that hangs or dies fails
 * statements (node-postgres reports the socket's error, @effect/sql a `SqlError`, the store `PersistenceFailed`)
 * instead of leaving their callers waiting.
 *
 * - Opening waits at most `openTimeoutMs` for the worker's `ready`. A new directory is first unpacked from the
 *   snapshot (pgSnapshot.ts) or, without one, initialised by initdb in a worker of its own.
 * - A round trip waits at most `timeoutMs` (the persistence timeout). PGlite cannot cancel a statement, so one that
 *   runs over is left to finish in the worker; its connection is given up (`release`: the worker drops what that
 *   connection still had queued and rolls back a transaction it left open) and the pool opens a new one, whose
 *   messages queue behind it, each with its own bound.
 * - A worker that exits (a crash, an out-of-memory abort) fails every request in flight at once and every later one
 *   immediately, naming its exit code, until a new worker has the directory open again (at most 3 restarts in 60 s;
 *   a database in memory is not restarted): the store reports it meanwhile and nothing waits for it.
 * - Closing asks the worker to close the database and waits at most `closeTimeoutMs` for it, then terminates it
 *   (as a kill would: Postgres recovers the directory from its WAL at the next open).
 *
 * The worker is referenced (keeps the process alive) only while a request is in flight, so a forgotten open database
 * never holds the process open, and a CLI waiting for a statement is never left without a reason to stay.
 */
import { existsSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { Duplex } from "node:stream"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Worker } from "node:worker_threads"
import type { FromHost, Open, ToHost } from "./pgliteProtocol.js"
import * as PgSnapshot from "./pgSnapshot.js"

/** Which snapshot a new directory may start from (pgSnapshot.ts): a file, the shipped one (undefined), or none. */
export interface Snapshot {
  readonly file: string | false | undefined
  /** The code's migrations, in order: a snapshot whose migrations are not a prefix of these is not used. */
  readonly migrations: ReadonlyArray<string>
}

/** A started worker, and how its directory was made ready (an existing database, the snapshot, or initdb). */
export interface Started {
  readonly host: Host
  readonly prepared: PgSnapshot.Prepared
}

/** Bounds of a worker (see the header). */
export interface Bounds {
  readonly openTimeoutMs: number
  readonly timeoutMs: number
  readonly closeTimeoutMs: number
}

/** The part of tsx's package.json that locates its ESM API. */
interface TsxManifest {
  readonly exports: { readonly "./esm/api": { readonly import: { readonly default: string } } }
}

/**
 * How to start the worker from where this module runs: the sources (a `.ts` module, under tsx or vitest) load
 * `pgliteWorker.ts` through tsx's loader, registered in the worker first; built code loads `pgliteWorker.js` next to
 * this module (tsc's dist/) or in the CLI bundle's folder (dist/cli/bundle/, whose chunks sit in chunks/ below it:
 * scripts/build-cli.mjs builds the worker as an entry of its own).
 */
const workerScript = (): { readonly code: string; readonly eval: true } | { readonly url: URL } | string => {
  const here = import.meta.url
  if (here.endsWith(".ts")) {
    // tsx's ESM API (its `import` export, read from its package.json: `require.resolve` would give the CJS one).
    const manifest = createRequire(here).resolve("tsx/package.json")
    const exported = (JSON.parse(readFileSync(manifest, "utf8")) as TsxManifest).exports["./esm/api"].import.default
    const tsx = new URL(exported, pathToFileURL(manifest)).href
    const worker = new URL("./pgliteWorker.ts", here).href
    return {
      code: `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${
        JSON.stringify(worker)
      }) })`,
      eval: true
    }
  }
  const candidates = ["./pgliteWorker.js", "../pgliteWorker.js"].map((path) => new URL(path, here))
  const found = candidates.find((url) => existsSync(fileURLToPath(url)))
  return found === undefined
    ? `the embedded database's worker (pgliteWorker.js) is missing: looked for ${
      candidates.map((url) => fileURLToPath(url)).join(" and ")
    }`
    : { url: found }
}

/** Restarts of a dead worker: at most this many ... */
const maxRestarts = 3
/** ... within this long. */
const restartWindowMs = 60_000

/** Restarts of a dead worker: when each happened (ms), the recent ones bounding the next. */
class RestartBudget {
  private times: Array<number> = []
  /** Counts a restart at `now` and returns how many are recent, or undefined (counting none) when too many are. */
  take(now: number): number | undefined {
    this.times = this.times.filter((at) => now - at < restartWindowMs)
    if (this.times.length >= maxRestarts) return undefined
    this.times.push(now)
    return this.times.length
  }
}

/** Whether `promise` settles within `ms`. */
const settlesWithin = async (promise: Promise<void>, ms: number): Promise<boolean> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<"late">((resolve) => {
    timer = setTimeout(() => resolve("late"), ms)
  })
  const outcome = await Promise.race([promise.then(() => "settled" as const), late])
  clearTimeout(timer)
  return outcome === "settled"
}

/** A request waiting for the worker's answer. */
interface Pending {
  readonly resolve: (bytes: Uint8Array) => void
  readonly reject: (error: Error) => void
  readonly timer: ReturnType<typeof setTimeout>
}

/** The requests waiting for the worker's answers, by id. */
class Requests {
  private nextId = 1
  private readonly waiting = new Map<number, Pending>()
  /** `idle`: told when the last request stopped waiting. */
  constructor(private readonly idle: () => void) {}
  get size(): number {
    return this.waiting.size
  }
  /** A new request's id; unless answered within `timeoutMs`, it stops waiting and rejects with `late()`. */
  add(resolve: Pending["resolve"], reject: Pending["reject"], timeoutMs: number, late: () => Error): number {
    const id = this.nextId++
    const timer = setTimeout(() => this.take(id)?.reject(late()), timeoutMs)
    this.waiting.set(id, { resolve, reject, timer })
    return id
  }
  /** Request `id`, no longer waiting (its timer cleared), or undefined when it was not waiting. */
  take(id: number): Pending | undefined {
    const waiting = this.waiting.get(id)
    if (waiting === undefined) return undefined
    clearTimeout(waiting.timer)
    this.waiting.delete(id)
    if (this.waiting.size === 0) this.idle()
    return waiting
  }
  /** Every request still waiting, no longer waiting. */
  takeAll(): Array<Pending> {
    return [...this.waiting.keys()].map((id) => this.take(id)!)
  }
}

/** A started worker with its database open. */
export class Host {
  private nextConn = 1
  /** The worker keeps the process alive only while a request waits (see the header). */
  private readonly requests = new Requests(() => {
    if (this.stopped === undefined) this.worker.unref()
  })
  /** Why requests fail at once: the worker exited (and is being restarted, or may not be), or is closing. */
  private stopped: string | undefined
  private closing = false
  private exited: Promise<void> = Promise.resolve()
  private worker!: Worker
  private readonly restarts = new RestartBudget()
  /** Told of a worker that died and of its restart (a log line; store/Embedded.ts). */
  onEvent: (line: string) => void = () => {}

  /** Takes a worker whose database is open (`spawnWorker`); `start` is how the rest of the code gets one. */
  constructor(worker: Worker, private readonly bounds: Bounds, private readonly open: Open) {
    this.attach(worker)
  }

  private attach(worker: Worker): void {
    this.worker = worker
    this.exited = new Promise((resolve) => worker.once("exit", () => resolve()))
    worker.on("message", (message: ToHost) => {
      if (message._tag !== "answer" && message._tag !== "failed") return
      const waiting = this.requests.take(message.id)
      if (waiting === undefined) return
      if (message._tag === "answer") waiting.resolve(message.bytes)
      else waiting.reject(new Error(message.message))
    })
    let cause = ""
    worker.on("error", (error) => {
      cause = `: ${error.message}`
      this.fail(`the embedded database's worker failed${cause}`)
    })
    worker.on("exit", (code) => {
      // A database in memory died with its worker: a new one would be empty, so it is not restarted.
      if (worker !== this.worker || this.closing || this.open.path === undefined) {
        return this.fail(`the embedded database's worker exited (code ${code})`)
      }
      this.restart(`the embedded database's worker exited (code ${code})${cause}`)
    })
  }

  /**
   * A worker that died while the database was in use: every request in flight fails now (naming why), later ones
   * fail at once until a new worker has the directory open again (Postgres recovers it from its WAL, as after a
   * kill), then run there. At most `maxRestarts` in `restartWindowMs`; past that the database stays down.
   */
  private restart(reason: string): void {
    this.fail(`${reason}; restarting it`)
    const count = this.restarts.take(Date.now())
    if (count === undefined) {
      this.stopped = `${reason}; not restarted (${maxRestarts} restarts within ${restartWindowMs / 1000} s)`
      this.onEvent(`embedded database: ${this.stopped}`)
      return
    }
    this.onEvent(
      `embedded database: ${reason}; restarting it (restart ${count} of at most ${maxRestarts} in ${
        restartWindowMs / 1000
      } s)`
    )
    spawnWorker(this.open, this.bounds).then(
      (worker) => {
        if (this.closing) return void worker.terminate()
        this.attach(worker)
        this.stopped = undefined
        this.onEvent("embedded database: its worker was restarted and the database is open again")
      },
      (error: Error) => {
        this.stopped = `${reason}; the restart failed: ${error.message}`
        this.onEvent(`embedded database: ${this.stopped}`)
      }
    )
  }

  /** Ends the worker as a crash would (tests: a dead worker is restarted). */
  kill(): Promise<number> {
    return this.worker.terminate()
  }

  /**
   * Starts a worker and opens the database in it. Rejects with the reason when the worker file is missing, the
   * database cannot be opened, or it is not open within `openTimeoutMs` (the worker is then terminated).
   */
  static start(open: Open, bounds: Bounds, snapshot: Snapshot = { file: false, migrations: [] }): Promise<Started> {
    return start(open, bounds, snapshot)
  }

  /** A new connection's id: its requests run in order, and `release` gives them up. */
  connection(): number {
    return this.nextConn++
  }

  /** Runs wire-protocol `bytes` of connection `conn`; rejects at `timeoutMs`, or at once when the worker is gone. */
  run(conn: number, bytes: Uint8Array): Promise<Uint8Array> {
    if (this.stopped !== undefined) return Promise.reject(new Error(this.stopped))
    return new Promise((resolve, reject) => {
      if (this.requests.size === 0) this.worker.ref()
      const { timeoutMs } = this.bounds
      const late = () => new Error(`the embedded database did not answer within ${timeoutMs} ms`)
      const id = this.requests.add(resolve, reject, timeoutMs, late)
      const copy = new Uint8Array(bytes)
      this.post({ _tag: "run", id, conn, bytes: copy.buffer }, [copy.buffer])
    })
  }

  /** Gives connection `conn` up (see the header). */
  release(conn: number): void {
    if (this.stopped === undefined) this.post({ _tag: "release", conn })
  }

  /**
   * Closes the database and ends the worker: fails what is in flight, waits at most `closeTimeoutMs` for the
   * database to close, then terminates the worker. Never rejects.
   */
  async close(): Promise<void> {
    this.closing = true
    if (this.stopped === undefined) {
      this.fail("the embedded database is closing")
      this.worker.ref()
      this.post({ _tag: "close" })
    }
    if (!(await settlesWithin(this.exited, this.bounds.closeTimeoutMs))) await this.worker.terminate()
  }

  private post(message: FromHost, transfer: Array<ArrayBuffer> = []): void {
    this.worker.postMessage(message, transfer)
  }

  /** Fails every request in flight and every later one with `reason`. */
  private fail(reason: string): void {
    if (this.stopped !== undefined) return
    this.stopped = reason
    for (const waiting of this.requests.takeAll()) waiting.reject(new Error(reason))
  }
}

// Starting: a new directory is made ready first (from the snapshot, or by initdb), then a worker opens the database.
// Functions of the module rather than statics of Host, which keeps the live worker's methods; callers go through
// `Host.start`, and a dead worker's restart through `spawnWorker`.

/** See `Host.start`. */
const start = async (open: Open, bounds: Bounds, snapshot: Snapshot): Promise<Started> => {
  const deadline = Date.now() + bounds.openTimeoutMs
  let prepared: PgSnapshot.Prepared = { _tag: "existing" }
  if (open.path !== undefined && !PgSnapshot.exists(open.path)) {
    prepared = await prepare({ ...open, path: open.path }, snapshot, bounds)
    if (prepared._tag === "initdb") await initdb({ ...open, path: open.path }, bounds)
  }
  const host = await spawn(open, { ...bounds, openTimeoutMs: Math.max(1, deadline - Date.now()) })
  return { host, prepared }
}

/** A new directory from the snapshot, unpacked by a worker of its own that exits (pgliteProtocol.ts `prepareOnly`). */
const prepare = (open: Open, snapshot: Snapshot, bounds: Bounds): Promise<PgSnapshot.Prepared> => {
  const script = workerScript()
  if (typeof script === "string") return Promise.reject(new Error(script))
  const workerData: Open = { ...open, prepareOnly: { snapshot: snapshot.file, migrations: snapshot.migrations } }
  return new Promise((resolve, reject) => {
    const worker = "url" in script
      ? new Worker(script.url, { workerData })
      : new Worker(script.code, { eval: true, workerData, execArgv: [] })
    let prepared: PgSnapshot.Prepared | undefined
    let failed: string | undefined
    const timer = setTimeout(() => {
      failed = `the embedded database's new directory was not unpacked within ${bounds.openTimeoutMs} ms`
      void worker.terminate()
    }, bounds.openTimeoutMs)
    worker.on("message", (message: ToHost) => {
      if (message._tag === "prepared") prepared = message.prepared
      else if (message._tag === "openFailed") failed = message.message
    })
    worker.once("error", (error) => failed ??= error.message)
    // Settled on exit: the point is that its memory is gone before the database opens.
    worker.once("exit", (code) => {
      clearTimeout(timer)
      if (prepared !== undefined) resolve(prepared)
      else {
        reject(
          new Error(
            failed ?? `the embedded database's snapshot worker exited (code ${code}) before the directory was ready`
          )
        )
      }
    })
  })
}

/**
 * A new directory without a snapshot: initdb runs in a worker of its own, whose exit returns every byte initdb's
 * WASM instance held (hundreds of MB, kept by V8 long after the database object is closed; docs/benchmarks.md,
 * issue 42), into `pgdata.loading`, renamed to `pgdata` once complete (a crash leaves no half database behind).
 * A `pgdata` that exists without a database (not ours to delete) is initialised in place, as before.
 */
const initdb = async (open: Open & { readonly path: string }, bounds: Bounds): Promise<void> => {
  const inPlace = existsSync(open.path)
  const init = await spawn(
    { ...open, path: inPlace ? open.path : PgSnapshot.loadingPath(open.path), initOnly: true },
    bounds
  )
  await init.close()
  if (!inPlace) await PgSnapshot.commit(open.path)
}

/** A worker with the database of `open` open, in a Host (see `Host.start`; the directory must be ready). */
const spawn = (open: Open, bounds: Bounds): Promise<Host> =>
  spawnWorker(open, bounds).then((worker) => new Host(worker, bounds, open))

/** A worker with the database of `open` open (see `Host.start`). */
const spawnWorker = (open: Open, bounds: Bounds): Promise<Worker> => {
  const script = workerScript()
  if (typeof script === "string") return Promise.reject(new Error(script))
  return new Promise((resolve, reject) => {
    const worker = "url" in script
      ? new Worker(script.url, { workerData: open })
      : new Worker(script.code, { eval: true, workerData: open, execArgv: [] })
    let settled = false
    const give = (error: Error) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      void worker.terminate()
      reject(error)
    }
    const timer = setTimeout(
      () => give(new Error(`the embedded database did not open within ${bounds.openTimeoutMs} ms`)),
      bounds.openTimeoutMs
    )
    worker.on("message", (message: ToHost) => {
      if (settled) return
      if (message._tag === "openFailed") return give(new Error(message.message))
      if (message._tag !== "ready") return
      settled = true
      clearTimeout(timer)
      worker.unref()
      resolve(worker)
    })
    worker.once("error", (error) => give(error))
    worker.once(
      "exit",
      (code) => give(new Error(`the embedded database's worker exited (code ${code}) while opening`))
    )
  })
}

/**
 * The socket node-postgres is given (its `stream` option): what it writes goes to the worker as one request per
 * event-loop turn (a query's Parse, Bind, Describe, Execute and Sync together), the answer is what it reads. A failed
 * request destroys the socket with that error: node-postgres fails the query and the pool discards the connection.
 */
export class Socket extends Duplex {
  private readonly conn: number
  private outgoing: Array<Uint8Array> = []
  private flushing = false

  constructor(private readonly host: Host) {
    super()
    this.conn = host.connection()
  }

  connect(): this {
    process.nextTick(() => this.emit("connect"))
    return this
  }

  setNoDelay(): this {
    return this
  }

  setKeepAlive(): this {
    return this
  }

  ref(): this {
    return this
  }

  unref(): this {
    return this
  }

  override _read(): void {}

  override _write(chunk: Uint8Array, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.outgoing.push(chunk)
    if (!this.flushing) {
      this.flushing = true
      queueMicrotask(() => this.flush())
    }
    callback()
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.push(null)
    callback()
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.host.release(this.conn)
    callback(error)
  }

  private flush(): void {
    this.flushing = false
    const chunks = this.outgoing
    this.outgoing = []
    // Terminate ('X') alone is the client saying goodbye: nothing to run.
    if (chunks.length === 1 && chunks[0]!.length === 5 && chunks[0]![0] === 0x58) return
    const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)
    this.host.run(this.conn, bytes).then(
      (answer) => {
        if (!this.destroyed && answer.byteLength > 0) {
          this.push(Buffer.from(answer.buffer, answer.byteOffset, answer.byteLength))
        }
      },
      (error: Error) => {
        if (!this.destroyed) this.destroy(error)
      }
    )
  }
}
