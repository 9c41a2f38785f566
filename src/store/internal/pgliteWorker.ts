/**
 * The embedded database's thread: PGlite (Postgres compiled to WASM) opened and run inside a `worker_threads`
 * worker, so a statement never stops the server's event loop. Run in the same thread, every statement held it: under
 * a burst of 2,000 session starts `/healthz` did not answer within 5 s and SIGTERM took 17–50 s to exit (issue 42).
 *
 * It speaks Postgres's wire protocol and nothing else: the server's thread serialises node-postgres's messages into
 * bytes, this thread hands them to PGlite (`execProtocolRaw`, which runs the backend's main loop over every message in
 * the buffer) and posts the answer's bytes back, where node-postgres parses them as it parses a socket's. One message
 * at a time, in the order received (PGlite is one backend).
 *
 * A connection the server's thread gives up (its statement timed out, its socket was destroyed) is `release`d: its
 * requests still queued here are dropped, not run for a caller that left, and a transaction it left open is rolled
 * back before the next connection's first message (the backend is shared, so an open transaction would otherwise
 * swallow the next caller's statements).
 *
 * Imports nothing of Corral's but pgSnapshot.ts (Node's built-ins only): the worker loads this file alone (plain JS
 * once built, the CLI bundle's copy with pgSnapshot inlined), next to the compiled module or in the CLI bundle's
 * folder (store/Embedded.ts finds it). A new directory is unpacked from the snapshot by a worker of its own
 * (`prepareOnly`) that then exits.
 */
import { PGlite } from "@electric-sql/pglite"
import { existsSync, mkdirSync } from "node:fs"
import { join } from "node:path"
import { parentPort, workerData } from "node:worker_threads"
import type { FromHost, Open, ToHost } from "./pgliteProtocol.js"
import { prepare } from "./pgSnapshot.js"

/** What the worker is asked to do next, in arrival order. */
type Task =
  | { readonly _tag: "run"; readonly id: number; readonly conn: number; readonly bytes: Uint8Array }
  | { readonly _tag: "release"; readonly conn: number }
  | { readonly _tag: "close" }

const port = parentPort
if (port === null) throw new Error("pgliteWorker.js runs as a worker thread (store/Embedded.ts starts it)")
const open = workerData as Open

const post = (message: ToHost, transfer: Array<ArrayBuffer> = []) => port.postMessage(message, transfer)

/** A copy that owns its buffer: PGlite answers with views into its own receive buffer, reused by the next call. */
const owned = (bytes: Uint8Array): Uint8Array => {
  const copy = new Uint8Array(bytes.byteLength)
  copy.set(bytes)
  return copy
}

const message = (cause: unknown) => cause instanceof Error ? cause.message : String(cause)

const openDatabase = async (): Promise<PGlite> => {
  const settings = { postgresqlconf: [...open.postgresqlconf] }
  if (open.path === undefined) return await PGlite.create("memory://", settings)
  mkdirSync(open.path, { recursive: true })
  // initdb's WASM instance keeps its memory alive as long as that database object lives: a new directory is
  // initialised and closed first (in a worker of its own, `initOnly`, whose exit returns all of it; see pgliteHost).
  if (!existsSync(join(open.path, "PG_VERSION"))) await (await PGlite.create(open.path, settings)).close()
  return await PGlite.create(open.path, settings)
}

const main = async () => {
  if (open.prepareOnly !== undefined) {
    try {
      if (open.path === undefined) throw new Error("nothing to prepare for a database in memory")
      const prepared = await prepare(open.path, open.prepareOnly.snapshot, open.prepareOnly.migrations)
      post({ _tag: "prepared", prepared })
    } catch (cause) {
      post({ _tag: "openFailed", message: message(cause) })
    }
    port.close()
    return
  }
  let db: PGlite
  try {
    db = await openDatabase()
    if (open.initOnly === true) await db.close()
  } catch (cause) {
    post({ _tag: "openFailed", message: message(cause) })
    return
  }
  if (open.initOnly === true) {
    post({ _tag: "ready" })
    port.close()
    return
  }
  const tasks: Array<Task> = []
  const released = new Set<number>()
  let busy = false
  let closing = false

  const step = async (task: Task): Promise<void> => {
    switch (task._tag) {
      case "run": {
        if (released.has(task.conn)) return
        try {
          const answer = owned(await db.execProtocolRaw(task.bytes))
          post({ _tag: "answer", id: task.id, bytes: answer }, [answer.buffer as ArrayBuffer])
        } catch (cause) {
          post({ _tag: "failed", id: task.id, message: message(cause) })
        }
        return
      }
      case "release": {
        if (db.isInTransaction()) await db.exec("ROLLBACK").catch(() => undefined)
        return
      }
      case "close": {
        await db.close().catch(() => undefined)
        post({ _tag: "closed" })
        port.close()
        return
      }
    }
  }

  // Drained from a macrotask, not from the message handler: every message already posted is received first, so a
  // release that arrived behind a connection's queued requests drops them before they run.
  const drain = () => {
    if (busy) return
    const task = tasks.shift()
    if (task === undefined) return
    busy = true
    void step(task).finally(() => {
      busy = false
      if (tasks.length > 0) setImmediate(drain)
    })
  }

  port.on("message", (received: FromHost) => {
    if (closing) return
    switch (received._tag) {
      case "run":
        tasks.push({ _tag: "run", id: received.id, conn: received.conn, bytes: new Uint8Array(received.bytes) })
        break
      case "release":
        released.add(received.conn)
        tasks.push({ _tag: "release", conn: received.conn })
        break
      case "close":
        // Queued requests are dropped: the server's thread failed their callers when it asked to close.
        closing = true
        tasks.length = 0
        tasks.push({ _tag: "close" })
        break
    }
    setImmediate(drain)
  })
  post({ _tag: "ready" })
}

void main()
