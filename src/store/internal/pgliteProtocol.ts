/**
 * The messages between the server's thread (store/internal/pgliteHost.ts) and the embedded database's worker
 * (pgliteWorker.ts). Types only: the worker imports nothing of Corral's at run time but pgSnapshot.ts.
 */
import type { Prepared } from "./pgSnapshot.js"

/** What the worker opens (its `workerData`). */
export interface Open {
  /** Postgres's directory (`<dataDir>/pgdata`), or undefined for a database in memory. */
  readonly path: string | undefined
  /** Lines for postgresql.conf (store/Embedded.ts). */
  readonly postgresqlconf: ReadonlyArray<string>
  /** Only create the directory's database (initdb), close it, answer `ready` and end. */
  readonly initOnly?: boolean
  /**
   * Only make a new directory ready to open from a snapshot (pgSnapshot.ts `prepare`), answer `prepared` and end: the
   * tarball's ~40 MB are garbage of a thread that exits, returned to the system at once (in the server's thread
   * they stayed resident until a full collection: +45 MiB idle RSS).
   */
  readonly prepareOnly?: { readonly snapshot: string | false | undefined; readonly migrations: ReadonlyArray<string> }
}

/** From the server's thread. */
export type FromHost =
  /** Wire-protocol bytes of connection `conn`, to run in order; answered with `answer` or `failed` of `id`. */
  | { readonly _tag: "run"; readonly id: number; readonly conn: number; readonly bytes: ArrayBuffer }
  /** Connection `conn` was given up: drop its queued requests, roll back a transaction it left open. */
  | { readonly _tag: "release"; readonly conn: number }
  /** Close the database (queued requests are dropped), answer `closed`, and end. */
  | { readonly _tag: "close" }

/** From the worker. */
export type ToHost =
  | { readonly _tag: "ready" }
  | { readonly _tag: "openFailed"; readonly message: string }
  | { readonly _tag: "prepared"; readonly prepared: Prepared }
  | { readonly _tag: "answer"; readonly id: number; readonly bytes: Uint8Array }
  | { readonly _tag: "failed"; readonly id: number; readonly message: string }
  | { readonly _tag: "closed" }
