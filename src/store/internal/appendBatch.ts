/**
 * How one group-commit batch of appends travels to Postgres: the statement, its parameters, and how its result is
 * read back into one sequence number per turn.
 *
 * The parameters are Postgres arrays in the BINARY wire format, built here into Buffers (node-postgres sends a
 * Buffer parameter as binary and leaves it alone). An element is a length prefix and its bytes, nothing else: a
 * payload is copied once, UTF-8 encoded, never escaped, and the server copies it out without parsing an array
 * literal. The text format it replaces quoted and backslash-escaped every payload with two regular-expression
 * passes in node-postgres (`arrayString`) and made the server de-escape it again (the saving: docs/benchmarks.md,
 * "Notes moved from the code"). Content is unrestricted, as with any parameter: the
 * payload reaches the `json` column byte for byte (NUL escapes, escaped lone surrogates, any unicode).
 *
 * Shape: the batch's distinct sessions travel once each with their turn count (the counter bump needs nothing
 * else), and each turn carries only the position of its session in that list and its rank within the session in
 * this batch. Turn k of a session is stored as base + k, where base is the counter's value before the bump, so
 * numbering needs no window function and no sort on the server.
 *
 * Pairing (../Pairing.ts): each session also travels with whether its first turn here would break the pairing
 * (anything but `tool_results`) and the entry that closes the calls of its last turn (null when that is not an
 * assistant turn with calls); the function stores the closing entry the database holds for the session before the
 * batch's turns when the first breaks it. Calls opened and broken within one batch are closed here (`expand`).
 */
import type { TurnEntry } from "../../domain/Message.js"
import * as Pairing from "../Pairing.js"
import { boolArray, float8Array, int4Array, oid, stringArray } from "./pgArrays.js"

/** One queued append: the entry already encoded to its JSON text. */
export interface Append {
  readonly sessionId: string
  readonly entry: TurnEntry
  readonly payload: string
  readonly at: number
}

/**
 * Runs the batch through `corral_append_turns` (migrations/0006_pairing.ts: the plan stays cached in the
 * connection). Rows: `(session_position, base, closed)` for every session that exists.
 */
export const statement = `SELECT session_position, base, closed FROM corral_append_turns(
  $1::text[], $2::int4[], $3::int4[], $4::int4[], $5::text[], $6::json[], $7::float8[], $8::bool[], $9::json[])`

/**
 * A batch with the closing turns it needs within itself: where a session's turn here would break the pairing right
 * after its own assistant turn with calls in the same batch, the closing entry goes between them. `rows` is what is
 * written, `at[i]` the row of batch item i, and `closedBy[i]` the row of the closing turn stored just before it.
 */
export interface Expanded {
  readonly rows: ReadonlyArray<Append>
  readonly at: Int32Array
  readonly closedBy: Int32Array
}

/** `batch` with the closing turns it needs within itself (see `Expanded`); `rows` is `batch` itself when none. */
export const expand = (batch: ReadonlyArray<Append>): Expanded => {
  const at = new Int32Array(batch.length)
  const closedBy = new Int32Array(batch.length).fill(-1)
  let rows: Array<Append> | undefined
  let last: Map<string, TurnEntry> | undefined
  for (let i = 0; i < batch.length; i++) {
    const append = batch[i]!
    const previous = last?.get(append.sessionId)
    const closing = previous !== undefined && Pairing.breaks(append.entry) ? Pairing.closing(previous) : undefined
    if (closing !== undefined) {
      rows ??= batch.slice(0, i)
      rows.push({ sessionId: append.sessionId, entry: closing, payload: JSON.stringify(closing), at: append.at })
      closedBy[i] = rows.length - 1
    }
    if (rows !== undefined) rows.push(append)
    at[i] = rows === undefined ? i : rows.length - 1
    // Only batches with several turns of one session need the map (rare: one actor appends one turn at a time).
    if (i + 1 < batch.length) (last ??= new Map()).set(append.sessionId, append.entry)
  }
  return { rows: rows ?? batch, at, closedBy }
}

/** A batch prepared for `statement`: its parameters, and each turn's session position (1-based) and rank. */
export interface Encoded {
  readonly params: ReadonlyArray<Buffer>
  readonly position: Int32Array
  readonly rank: Int32Array
  readonly sessions: number
}

/** The parameters of `statement` for `batch` (in batch order: a session's turns are ranked in that order). */
export const encode = (batch: ReadonlyArray<Append>): Encoded => {
  const n = batch.length
  const positions = new Map<string, number>()
  const sessionIds: Array<string> = []
  const counts: Array<number> = []
  const position = new Int32Array(n)
  const rank = new Int32Array(n)
  const kinds: Array<string> = new Array(n)
  const payloads: Array<string> = new Array(n)
  const ats: Array<number> = new Array(n)
  const breaks: Array<number> = []
  const lasts: Array<TurnEntry> = []
  for (let i = 0; i < n; i++) {
    const append = batch[i]!
    let p = positions.get(append.sessionId)
    if (p === undefined) {
      sessionIds.push(append.sessionId)
      counts.push(0)
      breaks.push(Pairing.breaks(append.entry) ? 1 : 0)
      lasts.push(append.entry)
      p = sessionIds.length
      positions.set(append.sessionId, p)
    }
    position[i] = p
    rank[i] = ++counts[p - 1]!
    lasts[p - 1] = append.entry
    kinds[i] = append.entry.kind
    payloads[i] = append.payload
    ats[i] = append.at
  }
  const closings = lasts.map((entry) => {
    const closing = Pairing.closing(entry)
    return closing === undefined ? null : JSON.stringify(closing)
  })
  return {
    params: [
      stringArray(oid.text, sessionIds),
      int4Array(counts),
      int4Array(position),
      int4Array(rank),
      stringArray(oid.text, kinds),
      stringArray(oid.json, payloads),
      float8Array(ats),
      boolArray(breaks),
      stringArray(oid.json, closings)
    ],
    position,
    rank,
    sessions: sessionIds.length
  }
}

/** What the statement's rows say: each turn's sequence number, and what closed each session's open calls first. */
export interface ReadBack {
  /** In batch order; `undefined` for a turn whose session does not exist. */
  readonly seqs: Array<number | undefined>
  /** By session position: the closing entry the database stored before the session's first turn here, if any. */
  readonly closed: Array<unknown>
  /** By session position: the base (a closing turn stored first has this number). */
  readonly bases: Array<number | undefined>
}

/**
 * Each turn's sequence number from `statement`'s rows (`[position, base, closed]`, rows in array mode), in batch
 * order, and the closing entries stored. Throws when a row is not two integers and a value (a driver or schema
 * mismatch, reported as a defect of the batch).
 */
export const readBack = (
  encoded: Encoded,
  rows: ReadonlyArray<ReadonlyArray<unknown>>
): ReadBack => {
  const bases = new Array<number | undefined>(encoded.sessions + 1)
  const closed = new Array<unknown>(encoded.sessions + 1)
  for (const row of rows) {
    const [position, base, closing] = row
    if (typeof position !== "number" || typeof base !== "number") {
      throw new Error(`append batch: unexpected row ${JSON.stringify(row)}`)
    }
    bases[position] = base
    if (closing !== null && closing !== undefined) closed[position] = closing
  }
  const seqs = new Array<number | undefined>(encoded.position.length)
  for (let i = 0; i < seqs.length; i++) {
    const base = bases[encoded.position[i]!]
    seqs[i] = base === undefined ? undefined : base + encoded.rank[i]!
  }
  return { seqs, closed, bases }
}
