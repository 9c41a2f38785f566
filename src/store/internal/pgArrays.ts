/**
 * Postgres arrays in the BINARY wire format, built into Buffers (node-postgres sends a Buffer parameter as binary and
 * leaves it alone): an element is a length prefix and its bytes, nothing else, so a text is copied once, UTF-8
 * encoded, never escaped, and the server copies it out without parsing an array literal (see appendBatch.ts for what
 * that saved). Used by the group-committed statements (appendBatch.ts, sessionWrites.ts).
 */

/** Element type oids of the arrays sent (pg_type). */
export const oid = { bool: 16, int4: 23, text: 25, json: 114, float8: 701 } as const

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

/** An array of strings; a `null` element is sent as SQL NULL (length -1, and the header's has-nulls flag). */
export const stringArray = (elementType: number, values: ReadonlyArray<string | null>): Buffer => {
  const lengths = new Int32Array(values.length)
  let size = headerBytes + 4 * values.length
  let nulls = false
  for (let i = 0; i < values.length; i++) {
    const value = values[i]
    if (value === null || value === undefined) {
      lengths[i] = -1
      nulls = true
    } else {
      lengths[i] = Buffer.byteLength(value, "utf8")
      size += lengths[i]!
    }
  }
  const buffer = Buffer.allocUnsafe(size)
  let offset = header(buffer, elementType, values.length)
  if (nulls) buffer.writeInt32BE(1, 4)
  for (let i = 0; i < values.length; i++) {
    buffer.writeInt32BE(lengths[i]!, offset)
    offset += 4
    if (lengths[i]! >= 0) offset += buffer.write(values[i]!, offset, lengths[i]!, "utf8")
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

export const int4Array = (values: ArrayLike<number>): Buffer =>
  fixedArray(oid.int4, 4, values, (buffer, value, offset) => buffer.writeInt32BE(value, offset))

export const float8Array = (values: ArrayLike<number>): Buffer =>
  fixedArray(oid.float8, 8, values, (buffer, value, offset) => buffer.writeDoubleBE(value, offset))

export const boolArray = (values: ArrayLike<number>): Buffer =>
  fixedArray(oid.bool, 1, values, (buffer, value, offset) => buffer.writeUInt8(value === 0 ? 0 : 1, offset))
