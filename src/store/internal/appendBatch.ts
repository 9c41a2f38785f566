/**
 * How one group-commit batch of appends travels to Postgres: the statement, its parameters, and how its result is
 * read back into one sequence number per turn.
 *
 * The parameters are Postgres arrays in the BINARY wire format, built here into Buffers (node-postgres sends a
 * Buffer parameter as binary and leaves it alone). An element is a length prefix and its bytes, nothing else: a
 * payload is copied once, UTF-8 encoded, never escaped, and the server copies it out without parsing an array
 * literal. The text format it replaces quoted and backslash-escaped every payload with two regular-expression
 * passes in node-postgres (`arrayString`) and made the server de-escape it again: dropping it saved about 20 µs of
 * client CPU and 10 µs of server CPU per turn (closed loop, docs/storage.md). Content is unrestricted, as with any parameter: the
 * payload reaches the `json` column byte for byte (NUL escapes, escaped lone surrogates, any unicode).
 *
 * Shape: the batch's distinct sessions travel once each with their turn count (the counter bump needs nothing
 * else), and each turn carries only the position of its session in that list and its rank within the session in
 * this batch. Turn k of a session is stored as base + k, where base is the counter's value before the bump, so
 * numbering needs no window function and no sort on the server.
 */
import type { TurnEntry } from "../../domain/Message.js"

/** One queued append: the entry already encoded to its JSON text. */
export interface Append {
  readonly sessionId: string
  readonly entry: TurnEntry
  readonly payload: string
  readonly at: number
}

/**
 * Runs the batch through `corral_append_turns` (migrations/0003_append_function.ts: the plan stays cached in the
 * connection). Rows: `(session_position, base)` for every session that exists.
 */
export const statement = `SELECT session_position, base FROM corral_append_turns(
  $1::text[], $2::int4[], $3::int4[], $4::int4[], $5::text[], $6::json[], $7::float8[])`

/** Element type oids of the arrays sent (pg_type). */
const oid = { int4: 23, text: 25, json: 114, float8: 701 } as const

/** Array header: ndim, has-nulls flag, element type, then (size, lower bound) of the one dimension. */
const headerBytes = 20

const header = (buffer: Buffer, elementType: number, length: number): number => {
  buffer.writeInt32BE(1, 0)
  buffer.writeInt32BE(0, 4)
  buffer.writeInt32BE(elementType, 8)
  buffer.writeInt32BE(length, 12)
  buffer.writeInt32BE(1, 16)
  return headerBytes
}

const stringArray = (elementType: number, values: ReadonlyArray<string>): Buffer => {
  const lengths = new Int32Array(values.length)
  let size = headerBytes + 4 * values.length
  for (let i = 0; i < values.length; i++) {
    lengths[i] = Buffer.byteLength(values[i]!, "utf8")
    size += lengths[i]!
  }
  const buffer = Buffer.allocUnsafe(size)
  let offset = header(buffer, elementType, values.length)
  for (let i = 0; i < values.length; i++) {
    buffer.writeInt32BE(lengths[i]!, offset)
    offset += 4
    offset += buffer.write(values[i]!, offset, lengths[i]!, "utf8")
  }
  return buffer
}

/** An array of fixed-width elements: each is its width, then its bytes as `write` puts them. */
const fixedArray = (
  elementType: number,
  width: number,
  values: ArrayLike<number>,
  write: (buffer: Buffer, value: number, offset: number) => void
): Buffer => {
  const buffer = Buffer.allocUnsafe(headerBytes + (4 + width) * values.length)
  let offset = header(buffer, elementType, values.length)
  for (let i = 0; i < values.length; i++) {
    buffer.writeInt32BE(width, offset)
    write(buffer, values[i]!, offset + 4)
    offset += 4 + width
  }
  return buffer
}

const int4Array = (values: ArrayLike<number>): Buffer =>
  fixedArray(oid.int4, 4, values, (buffer, value, offset) => buffer.writeInt32BE(value, offset))

const float8Array = (values: ArrayLike<number>): Buffer =>
  fixedArray(oid.float8, 8, values, (buffer, value, offset) => buffer.writeDoubleBE(value, offset))

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
  for (let i = 0; i < n; i++) {
    const append = batch[i]!
    let p = positions.get(append.sessionId)
    if (p === undefined) {
      sessionIds.push(append.sessionId)
      counts.push(0)
      p = sessionIds.length
      positions.set(append.sessionId, p)
    }
    position[i] = p
    rank[i] = ++counts[p - 1]!
    kinds[i] = append.entry.kind
    payloads[i] = append.payload
    ats[i] = append.at
  }
  return {
    params: [
      stringArray(oid.text, sessionIds),
      int4Array(counts),
      int4Array(position),
      int4Array(rank),
      stringArray(oid.text, kinds),
      stringArray(oid.json, payloads),
      float8Array(ats)
    ],
    position,
    rank,
    sessions: sessionIds.length
  }
}

/**
 * Each turn's sequence number from `statement`'s rows (`[position, base]`, rows in array mode), in batch order;
 * `undefined` for a turn whose session does not exist. Throws when a row is not two integers (a driver or schema
 * mismatch, reported as a defect of the batch).
 */
export const sequenceNumbers = (
  encoded: Encoded,
  rows: ReadonlyArray<ReadonlyArray<unknown>>
): Array<number | undefined> => {
  const bases = new Array<number | undefined>(encoded.sessions + 1)
  for (const row of rows) {
    const [position, base] = row
    if (typeof position !== "number" || typeof base !== "number") {
      throw new Error(`append batch: unexpected row ${JSON.stringify(row)}`)
    }
    bases[position] = base
  }
  const seqs = new Array<number | undefined>(encoded.position.length)
  for (let i = 0; i < seqs.length; i++) {
    const base = bases[encoded.position[i]!]
    seqs[i] = base === undefined ? undefined : base + encoded.rank[i]!
  }
  return seqs
}
