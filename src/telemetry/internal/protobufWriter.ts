/**
 * protobufWriter — the protobuf writer of the OTLP encoder (otlpEncoding): the wire format's primitives
 * (`ByteWriter`: varints, fixed and length-delimited fields, lengths filled in once a message is written) and the
 * fields a span is made of (`Writer`: epoch-nanosecond times, hex ids as bytes, attribute keys cached as bytes).
 */
import type { HrTime } from "@opentelemetry/api"

/** The protobuf wire format's primitives, into a buffer that grows as it is written. */
export class ByteWriter {
  buffer: Buffer
  pos: number
  constructor(size: number, start: number) {
    this.buffer = Buffer.allocUnsafe(size)
    this.pos = start
  }

  ensure(bytes: number): void {
    const needed = this.pos + bytes
    if (needed <= this.buffer.length) return
    let size = this.buffer.length * 2
    while (size < needed) size *= 2
    const next = Buffer.allocUnsafe(size)
    this.buffer.copy(next, 0, 0, this.pos)
    this.buffer = next
  }

  /** A non-negative integer below 2³² (tags, lengths, counts, enums). */
  varint32(value: number): void {
    this.ensure(5)
    if (value >= 0 && value < 0x80) {
      this.buffer[this.pos++] = value
      return
    }
    let v = value >>> 0
    while (v > 0x7f) {
      this.buffer[this.pos++] = (v & 0x7f) | 0x80
      v >>>= 7
    }
    this.buffer[this.pos++] = v
  }

  /** Any int64 a JavaScript number holds (negative ones in two's complement, ten bytes). */
  varint64(value: number): void {
    if (value >= 0 && value <= 0xffffffff) return this.varint32(value)
    this.ensure(10)
    const abs = Math.abs(value)
    let low = abs >>> 0
    let high = (abs / 0x100000000) >>> 0
    if (value < 0) {
      low = ~low >>> 0
      high = ~high >>> 0
      low = (low + 1) >>> 0
      if (low === 0) high = (high + 1) >>> 0
    }
    while (high > 0 || low > 0x7f) {
      this.buffer[this.pos++] = (low & 0x7f) | 0x80
      low = ((low >>> 7) | (high << 25)) >>> 0
      high >>>= 7
    }
    this.buffer[this.pos++] = low & 0x7f
  }

  tag(field: number, wire: number): void {
    this.varint32((field << 3) | wire)
  }

  fixed32(value: number): void {
    this.ensure(4)
    this.uint32(value >>> 0)
  }

  /** Four little-endian bytes, stored one by one (Buffer's own writers validate their arguments on every call). */
  protected uint32(v: number): void {
    const b = this.buffer
    const p = this.pos
    b[p] = v
    b[p + 1] = v >>> 8
    b[p + 2] = v >>> 16
    b[p + 3] = v >>> 24
    this.pos = p + 4
  }

  double(value: number): void {
    this.ensure(8)
    this.buffer.writeDoubleLE(value, this.pos)
    this.pos += 8
  }

  string(value: string): void {
    const length = value.length
    if (length < 128) {
      // Short ASCII (nearly every name, key and value): byte for byte, no native call.
      this.ensure(length + 1)
      const start = this.pos
      let i = 0
      for (; i < length; i++) {
        const c = value.charCodeAt(i)
        if (c > 127) break
        this.buffer[start + 1 + i] = c
      }
      if (i === length) {
        this.buffer[start] = length
        this.pos = start + 1 + length
        return
      }
    }
    const bytes = Buffer.byteLength(value, "utf8")
    this.varint32(bytes)
    this.ensure(bytes)
    this.pos += this.buffer.write(value, this.pos, bytes, "utf8")
  }

  /** Reserves one byte for a length that `finish` fills (shifting the message when it needs more). */
  begin(): number {
    this.ensure(1)
    return this.pos++
  }

  finish(at: number): void {
    const length = this.pos - at - 1
    if (length < 0x80) {
      this.buffer[at] = length
      return
    }
    const size = varintSize(length)
    this.ensure(size - 1)
    this.buffer.copyWithin(at + size, at + 1, this.pos)
    this.pos += size - 1
    let v = length
    let p = at
    while (v > 0x7f) {
      this.buffer[p++] = (v & 0x7f) | 0x80
      v >>>= 7
    }
    this.buffer[p] = v
  }
}

/** A `ByteWriter` with the fields of OTLP spans: times, trace and span ids, attribute keys, a span's length. */
export class Writer extends ByteWriter {
  /** Epoch nanoseconds of an `HrTime`, exactly (the seconds split so no product passes 2⁵³). */
  time(hr: HrTime): void {
    this.ensure(8)
    const seconds = hr[0]
    const lowerNanos = (seconds & 0xffff) * 1e9
    const upperNanos = ((seconds / 0x10000) >>> 0) * 1e9
    const low = (lowerNanos >>> 0) + (((upperNanos & 0xffff) * 0x10000) >>> 0) + hr[1]
    const high = Math.floor(lowerNanos / 0x100000000) + ((upperNanos / 0x10000) >>> 0) +
      Math.floor(low / 0x100000000)
    this.uint32(low >>> 0)
    this.uint32(high >>> 0)
  }

  /** Epoch nanoseconds held in a double (an integer: every value the tracer makes is one), exactly. */
  nanos(value: number): void {
    this.ensure(8)
    const high = Math.floor(value / 0x100000000)
    this.uint32((value - high * 0x100000000) >>> 0)
    this.uint32(high >>> 0)
  }

  /** A hex id (trace or span id) as its bytes, decoded here rather than by a native call (`Buffer.write`). */
  hex(value: string): void {
    // A batch's spans share few trace ids: the last one's bytes are copied (the same string, compared by identity).
    if (value === this.lastHex) {
      this.ensure(this.lastBytes.length)
      this.buffer.set(this.lastBytes, this.pos)
      this.pos += this.lastBytes.length
      return
    }
    const from = this.pos
    this.hexOnce(value)
    if (value.length === 32) {
      this.lastHex = value
      this.lastBytes = Buffer.from(this.buffer.subarray(from, this.pos))
    }
  }

  private lastHex: string | undefined = undefined
  private lastBytes: Buffer = Buffer.alloc(0)

  private hexOnce(value: string): void {
    const bytes = value.length >>> 1
    if (bytes < 0x80 && (value.length & 1) === 0) {
      this.ensure(bytes + 1)
      const b = this.buffer
      const start = this.pos + 1
      let bad = 0
      for (let i = 0; i < bytes; i++) {
        const high = hexDigit(value.charCodeAt(2 * i))
        const low = hexDigit(value.charCodeAt(2 * i + 1))
        bad |= high | low
        b[start + i] = (high << 4) | low
      }
      if (bad >= 0) {
        b[this.pos] = bytes
        this.pos = start + bytes
        return
      }
    }
    this.varint32(bytes)
    this.ensure(bytes)
    this.pos += this.buffer.write(value, this.pos, bytes, "hex")
  }

  /**
   * A field's key and a string value as one run of bytes cached per key (`KeyValue.key`: tag, length, the key's
   * UTF-8). Attribute keys are a small set of constants — interned strings whose hash is already known, so the
   * lookup is cheap — so a key is copied as bytes, not encoded character by character for every attribute.
   */
  key(key: string): void {
    const bytes = keyBytesOf(key)
    const length = bytes.length
    this.ensure(length)
    this.buffer.set(bytes, this.pos)
    this.pos += length
  }

  /**
   * Reserves two bytes for the length of a message that is usually 128 bytes to 16 KiB long (a span), which
   * `finishWide` fills without moving the message (`begin`/`finish` would move every such span by one byte).
   */
  beginWide(): number {
    this.ensure(2)
    const at = this.pos
    this.pos += 2
    return at
  }

  finishWide(at: number): void {
    const length = this.pos - at - 2
    if (length >= 0x80 && length < 0x4000) {
      this.buffer[at] = (length & 0x7f) | 0x80
      this.buffer[at + 1] = length >>> 7
      return
    }
    // Shorter or longer: the length takes one byte or more than two; move the message to fit it.
    const size = varintSize(length)
    this.ensure(size)
    this.buffer.copyWithin(at + size, at + 2, this.pos)
    this.pos += size - 2
    varintBefore(this.buffer, at + size, length)
  }
}

/** The value of one hex digit's character code, or -1. */
const hexDigit = (c: number): number =>
  c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1

/** The encoded `KeyValue.key` field of each attribute key seen (bounded: an embedder's keys may be many). */
const keyBytes = new Map<string, Buffer>()
const maxCachedKeys = 1024

/** The encoded `KeyValue.key` field of `key`: its tag, length and UTF-8 (cached, see `keyBytes`). */
export const keyBytesOf = (key: string): Buffer => {
  let bytes = keyBytes.get(key)
  if (bytes === undefined) {
    const scratch = new ByteWriter(key.length * 3 + 8, 0)
    scratch.tag(1, 2)
    scratch.string(key)
    bytes = Buffer.from(scratch.buffer.subarray(0, scratch.pos))
    if (keyBytes.size < maxCachedKeys) keyBytes.set(key, bytes)
  }
  return bytes
}

/** How many bytes `value` takes as a varint (below 2³²). */
export const varintSize = (value: number): number =>
  value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5

/** Writes a varint into `out` ending just before `end`; returns where it starts. */
export const varintBefore = (out: Buffer, end: number, value: number): number => {
  const start = end - varintSize(value)
  let v = value
  let p = start
  while (v > 0x7f) {
    out[p++] = (v & 0x7f) | 0x80
    v >>>= 7
  }
  out[p] = v
  return start
}
