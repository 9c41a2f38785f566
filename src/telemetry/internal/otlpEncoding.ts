/**
 * otlpEncoding — finished spans written as OTLP bytes the moment they end: the `Span` messages of an
 * `ExportTraceServiceRequest`, in protobuf (the same bytes as the SDK's `ProtobufTraceSerializer`, field for field)
 * or in OTLP/JSON (parse-equal to its `JsonTraceSerializer`), appended to one growing buffer per batch; `seal` puts
 * the request around them (one resource, one scope: every span Corral's tracer makes has both).
 *
 * Why not the SDK's serializers: they take the whole batch of span objects at once, so every span's objects (its
 * attributes, events, ids, times) live until the batch leaves — thousands of them, long enough to be copied and
 * promoted by the garbage collector — and the JSON one then builds a second tree of every span and turns it into one
 * text before encoding that. Here a span's objects die young; what waits for the batch is its bytes. Tested against
 * the SDK's serializers (test/telemetry/OtlpEncoding.test.ts).
 */
import type { Attributes, AttributeValue, HrTime, Link, SpanContext } from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import type { ReadableSpan, TimedEvent } from "@opentelemetry/sdk-trace-base"

/** The OTLP encodings. */
export type Encoding = "protobuf" | "json"

/**
 * A finished span as the encoder reads it. Corral's own spans (telemetry/SpanTracer) are records themselves — their
 * attributes two parallel arrays, their times epoch nanoseconds in a double — so encoding one makes no object; any
 * other `ReadableSpan` is read through `recordOf` (its times kept as `HrTime`, exact to the nanosecond).
 */
export interface SpanRecord {
  readonly name: string
  /** OpenTelemetry's `SpanKind` (0 internal … 4 consumer). */
  readonly spanKind: number
  readonly ids: SpanContext
  readonly parentIds: SpanContext | undefined
  readonly startNanos: number
  readonly endNanos: number
  /** The times as the SDK has them, when the span came from elsewhere (they win over the nanoseconds). */
  readonly startHr?: HrTime | undefined
  readonly endHr?: HrTime | undefined
  readonly statusCode: number
  readonly statusMessage: string | undefined
  readonly attributeKeys: ReadonlyArray<string>
  readonly attributeValues: ReadonlyArray<unknown>
  readonly droppedAttributes: number
  readonly spanEvents: ReadonlyArray<TimedEvent>
  readonly droppedEvents: number
  readonly spanLinks: ReadonlyArray<Link>
  readonly droppedLinks: number
}

/** A `ReadableSpan` of any origin as a record. */
export const recordOf = (span: ReadableSpan): SpanRecord => {
  const keys: Array<string> = []
  const values: Array<unknown> = []
  for (const key in span.attributes) {
    if (!Object.prototype.hasOwnProperty.call(span.attributes, key)) continue
    keys.push(key)
    values.push(span.attributes[key])
  }
  return {
    name: span.name,
    spanKind: span.kind,
    ids: span.spanContext(),
    parentIds: span.parentSpanContext,
    startNanos: 0,
    endNanos: 0,
    startHr: span.startTime,
    endHr: span.endTime,
    statusCode: span.status.code,
    statusMessage: span.status.message,
    attributeKeys: keys,
    attributeValues: values,
    droppedAttributes: span.droppedAttributesCount,
    spanEvents: span.events,
    droppedEvents: span.droppedEventsCount,
    spanLinks: span.links,
    droppedLinks: span.droppedLinksCount
  }
}

const SPAN_FLAGS_HAS_IS_REMOTE = 0x100
const SPAN_FLAGS_IS_REMOTE = 0x200
const spanFlags = (traceFlags: number, isRemote: boolean | undefined): number =>
  (traceFlags & 0xff) | SPAN_FLAGS_HAS_IS_REMOTE | (isRemote === true ? SPAN_FLAGS_IS_REMOTE : 0)

const MIN_INT64 = -(2 ** 63)
const MAX_INT64 = 2 ** 63
const isInt64 = (n: number): boolean => Number.isInteger(n) && n >= MIN_INT64 && n < MAX_INT64

// ---------------------------------------------------------------------------------------------------------------
// A protobuf writer into a growing Buffer

class Writer {
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
  private uint32(v: number): void {
    const b = this.buffer
    const p = this.pos
    b[p] = v
    b[p + 1] = v >>> 8
    b[p + 2] = v >>> 16
    b[p + 3] = v >>> 24
    this.pos = p + 4
  }

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

  /** A hex id (trace or span id) as its bytes: decoded here, a native call cost more than the id's 16 or 32 digits. */
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
   * lookup is cheap — and encoding them character by character was most of what a span's attributes cost.
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

/** The value of one hex digit's character code, or -1. */
const hexDigit = (c: number): number =>
  c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1

/** The encoded `KeyValue.key` field of each attribute key seen (bounded: an embedder's keys may be many). */
const keyBytes = new Map<string, Buffer>()
const maxCachedKeys = 1024

/** The encoded `KeyValue.key` field of `key`: its tag, length and UTF-8 (cached, see `keyBytes`). */
const keyBytesOf = (key: string): Buffer => {
  let bytes = keyBytes.get(key)
  if (bytes === undefined) {
    const scratch = new Writer(key.length * 3 + 8, 0)
    scratch.tag(1, 2)
    scratch.string(key)
    bytes = Buffer.from(scratch.buffer.subarray(0, scratch.pos))
    if (keyBytes.size < maxCachedKeys) keyBytes.set(key, bytes)
  }
  return bytes
}

const varintSize = (value: number): number =>
  value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5

/** Writes a varint into `out` ending just before `end`; returns where it starts. */
const varintBefore = (out: Buffer, end: number, value: number): number => {
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

// ---------------------------------------------------------------------------------------------------------------
// Protobuf messages (field numbers and order as opentelemetry-proto and the SDK's serializer have them)

const anyValue = (w: Writer, value: unknown): void => {
  switch (typeof value) {
    case "string":
      w.tag(1, 2)
      return w.string(value)
    case "boolean":
      w.tag(2, 0)
      return w.varint32(value ? 1 : 0)
    case "number":
      if (isInt64(value)) {
        w.tag(3, 0)
        return w.varint64(value)
      }
      w.tag(4, 1)
      return w.double(value)
  }
  if (value instanceof Uint8Array) {
    w.tag(7, 2)
    w.varint32(value.length)
    w.ensure(value.length)
    w.buffer.set(value, w.pos)
    w.pos += value.length
  } else if (Array.isArray(value)) {
    w.tag(5, 2)
    const array = w.begin()
    for (const item of value) {
      w.tag(1, 2)
      const at = w.begin()
      anyValue(w, item)
      w.finish(at)
    }
    w.finish(array)
  } else if (typeof value === "object" && value !== null) {
    w.tag(6, 2)
    const list = w.begin()
    for (const key in value) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) continue
      w.tag(1, 2)
      keyValue(w, key, (value as Record<string, unknown>)[key])
    }
    w.finish(list)
  }
}

/** A `KeyValue` message (its tag already written). */
const keyValue = (w: Writer, key: string, value: unknown): void => {
  const at = w.begin()
  w.key(key)
  w.tag(2, 2)
  const inner = w.begin()
  anyValue(w, value)
  w.finish(inner)
  w.finish(at)
}

const attributes = (w: Writer, attrs: Attributes, field: number): void => {
  for (const key in attrs) {
    if (!Object.prototype.hasOwnProperty.call(attrs, key)) continue
    w.tag(field, 2)
    keyValue(w, key, attrs[key])
  }
}

const attributeArrays = (
  w: Writer,
  keys: ReadonlyArray<string>,
  values: ReadonlyArray<unknown>,
  field: number
): void => {
  for (let i = 0; i < keys.length; i++) {
    if (shortAttribute(w, field, keys[i]!, values[i])) continue
    w.tag(field, 2)
    keyValue(w, keys[i]!, values[i])
  }
}

/**
 * One attribute of the usual kind — a short ASCII string, a small non-negative integer or a boolean, under a key
 * whose `KeyValue` fits in 127 bytes — written in one pass: every length is known up front, so there is no length to
 * reserve and fill in afterwards and one bounds check for the whole field. Returns false, having written nothing,
 * for any other attribute (the general path writes it).
 */
const shortAttribute = (w: Writer, field: number, key: string, value: unknown): boolean => {
  const kb = keyBytesOf(key)
  let anyLength: number
  switch (typeof value) {
    case "string":
      if (value.length > 100) return false
      anyLength = 2 + value.length
      break
    case "number":
      if (!(value >= 0 && value < 0x10000000 && Number.isInteger(value))) return false
      anyLength = 1 + varintSize(value)
      break
    case "boolean":
      anyLength = 2
      break
    default:
      return false
  }
  const kvLength = kb.length + 2 + anyLength
  if (kvLength > 0x7f) return false
  w.ensure(kvLength + 2)
  const b = w.buffer
  let p = w.pos
  b[p++] = (field << 3) | 2
  b[p++] = kvLength
  b.set(kb, p)
  p += kb.length
  b[p++] = (2 << 3) | 2
  b[p++] = anyLength
  if (typeof value === "string") {
    b[p++] = (1 << 3) | 2
    b[p++] = value.length
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i)
      // Not ASCII: its UTF-8 is longer than its length; nothing is committed until `pos` moves.
      if (c > 0x7f) return false
      b[p++] = c
    }
  } else if (typeof value === "number") {
    b[p++] = (3 << 3) | 0
    let v = value
    while (v > 0x7f) {
      b[p++] = (v & 0x7f) | 0x80
      v >>>= 7
    }
    b[p++] = v
  } else {
    b[p++] = (2 << 3) | 0
    b[p++] = value ? 1 : 0
  }
  w.pos = p
  return true
}

const event = (w: Writer, e: TimedEvent): void => {
  const at = w.begin()
  w.tag(1, 1)
  w.time(e.time)
  w.tag(2, 2)
  w.string(e.name)
  if (e.attributes !== undefined) attributes(w, e.attributes, 3)
  w.tag(4, 0)
  w.varint32(e.droppedAttributesCount ?? 0)
  w.finish(at)
}

const link = (w: Writer, l: Link): void => {
  const at = w.begin()
  w.tag(1, 2)
  w.hex(l.context.traceId)
  w.tag(2, 2)
  w.hex(l.context.spanId)
  const state = l.context.traceState?.serialize()
  if (state) {
    w.tag(3, 2)
    w.string(state)
  }
  if (l.attributes !== undefined) attributes(w, l.attributes, 4)
  w.tag(5, 0)
  w.varint32(l.droppedAttributesCount ?? 0)
  w.tag(6, 5)
  w.fixed32(spanFlags(l.context.traceFlags, l.context.isRemote))
  w.finish(at)
}

/** One `ScopeSpans.spans` entry: the tag, the length and the `Span` message. */
const protobufSpan = (w: Writer, span: SpanRecord): void => {
  w.tag(2, 2)
  const at = w.beginWide()
  const ids = span.ids
  w.tag(1, 2)
  w.hex(ids.traceId)
  w.tag(2, 2)
  w.hex(ids.spanId)
  const state = ids.traceState?.serialize()
  if (state) {
    w.tag(3, 2)
    w.string(state)
  }
  const parent = span.parentIds
  if (parent?.spanId) {
    w.tag(4, 2)
    w.hex(parent.spanId)
  }
  w.tag(5, 2)
  w.string(span.name)
  w.tag(6, 0)
  w.varint32(span.spanKind + 1)
  w.tag(7, 1)
  if (span.startHr === undefined) w.nanos(span.startNanos)
  else w.time(span.startHr)
  w.tag(8, 1)
  if (span.endHr === undefined) w.nanos(span.endNanos)
  else w.time(span.endHr)
  attributeArrays(w, span.attributeKeys, span.attributeValues, 9)
  w.tag(10, 0)
  w.varint32(span.droppedAttributes)
  for (const e of span.spanEvents) {
    w.tag(11, 2)
    event(w, e)
  }
  w.tag(12, 0)
  w.varint32(span.droppedEvents)
  for (const l of span.spanLinks) {
    w.tag(13, 2)
    link(w, l)
  }
  w.tag(14, 0)
  w.varint32(span.droppedLinks)
  w.tag(15, 2)
  const status = w.begin()
  if (span.statusMessage) {
    w.tag(2, 2)
    w.string(span.statusMessage)
  }
  w.tag(3, 0)
  w.varint32(span.statusCode)
  w.finish(status)
  w.tag(16, 5)
  w.fixed32(spanFlags(ids.traceFlags, parent?.isRemote))
  w.finishWide(at)
}

/** `ResourceSpans.resource` and the start of `ResourceSpans.scope_spans`'s scope, as bytes. */
const protobufPrefix = (resource: Resource, scope: { readonly name: string; readonly version?: string }) => {
  const w = new Writer(1024, 0)
  w.tag(1, 2)
  const at = w.begin()
  attributes(w, resource.attributes, 1)
  w.tag(2, 0)
  w.varint32(0)
  w.finish(at)
  const resourcePart = Buffer.from(w.buffer.subarray(0, w.pos))
  const s = new Writer(256, 0)
  s.tag(1, 2)
  const scopeAt = s.begin()
  s.tag(1, 2)
  s.string(scope.name)
  if (scope.version) {
    s.tag(2, 2)
    s.string(scope.version)
  }
  s.finish(scopeAt)
  return { resourcePart, scopePart: Buffer.from(s.buffer.subarray(0, s.pos)) }
}

// ---------------------------------------------------------------------------------------------------------------
// OTLP/JSON (ids in hex, times as decimal strings, as the SDK's JSON serializer writes them)

interface JsonAnyValue {
  readonly stringValue?: string
  readonly boolValue?: boolean
  readonly intValue?: number
  readonly doubleValue?: number
  readonly bytesValue?: string
  readonly arrayValue?: { readonly values: ReadonlyArray<JsonAnyValue> }
  readonly kvlistValue?: { readonly values: ReadonlyArray<{ readonly key: string; readonly value: JsonAnyValue }> }
}

const jsonValue = (value: unknown): JsonAnyValue => {
  switch (typeof value) {
    case "string":
      return { stringValue: value }
    case "boolean":
      return { boolValue: value }
    case "number":
      return Number.isInteger(value) ? { intValue: value } : { doubleValue: value }
  }
  if (value instanceof Uint8Array) return { bytesValue: Buffer.from(value).toString("base64") }
  if (Array.isArray(value)) return { arrayValue: { values: value.map(jsonValue) } }
  if (typeof value === "object" && value !== null) {
    return {
      kvlistValue: {
        values: Object.keys(value).map((key) => ({ key, value: jsonValue((value as Record<string, unknown>)[key]) }))
      }
    }
  }
  return {}
}

const jsonAttributes = (attrs: Attributes | undefined) => {
  if (attrs === undefined) return []
  const out: Array<{ key: string; value: JsonAnyValue }> = []
  for (const key in attrs) {
    if (Object.prototype.hasOwnProperty.call(attrs, key)) out.push({ key, value: jsonValue(attrs[key]) })
  }
  return out
}

const jsonAttributeArrays = (keys: ReadonlyArray<string>, values: ReadonlyArray<unknown>) => {
  const out: Array<{ key: string; value: JsonAnyValue }> = []
  for (let i = 0; i < keys.length; i++) out.push({ key: keys[i]!, value: jsonValue(values[i]) })
  return out
}

const nanos = (hr: HrTime): string =>
  (BigInt(Math.trunc(hr[0])) * 1_000_000_000n + BigInt(Math.trunc(hr[1]))).toString()

const jsonSpan = (span: SpanRecord): string => {
  const ids = span.ids
  const parent = span.parentIds
  return JSON.stringify({
    traceId: ids.traceId,
    spanId: ids.spanId,
    parentSpanId: parent?.spanId ? parent.spanId : undefined,
    traceState: ids.traceState?.serialize(),
    name: span.name,
    kind: span.spanKind + 1,
    startTimeUnixNano: span.startHr === undefined ? BigInt(span.startNanos).toString() : nanos(span.startHr),
    endTimeUnixNano: span.endHr === undefined ? BigInt(span.endNanos).toString() : nanos(span.endHr),
    attributes: jsonAttributeArrays(span.attributeKeys, span.attributeValues),
    droppedAttributesCount: span.droppedAttributes,
    events: span.spanEvents.map((e) => ({
      attributes: jsonAttributes(e.attributes),
      name: e.name,
      timeUnixNano: nanos(e.time),
      droppedAttributesCount: e.droppedAttributesCount ?? 0
    })),
    droppedEventsCount: span.droppedEvents,
    status: { code: span.statusCode, message: span.statusMessage },
    links: span.spanLinks.map((l) => ({
      attributes: jsonAttributes(l.attributes),
      spanId: l.context.spanId,
      traceId: l.context.traceId,
      traceState: l.context.traceState?.serialize(),
      droppedAttributesCount: l.droppedAttributesCount ?? 0,
      flags: spanFlags(l.context.traceFlags, l.context.isRemote)
    })),
    droppedLinksCount: span.droppedLinks,
    flags: spanFlags(ids.traceFlags, parent?.isRemote)
  })
}

// ---------------------------------------------------------------------------------------------------------------
// A batch

/** What every span of a batch shares: the encoding, the resource and the instrumentation scope. */
export interface Envelope {
  readonly encoding: Encoding
  readonly resource: Resource
  readonly scope: { readonly name: string; readonly version?: string }
}

/**
 * Encodes the envelope's request prefix once; `open` starts a batch under it, its buffer as large as the last batch
 * came to (batches are alike: growing a megabyte buffer by doubling would copy it over and over).
 */
export const envelope = (options: Envelope) => {
  let size = initialBytes
  const sealed = (bytes: number) => {
    size = Math.max(initialBytes, Math.ceil(bytes * 1.125))
  }
  if (options.encoding === "protobuf") {
    const { resourcePart, scopePart } = protobufPrefix(options.resource, options.scope)
    // Room in front of the first span for the request's tags and lengths (each at most 5 + 1 bytes).
    const head = resourcePart.length + scopePart.length + 18
    return { open: (): Batch => new ProtobufBatch(size, sealed, head, resourcePart, scopePart) }
  }
  const resource = { attributes: jsonAttributes(options.resource.attributes), droppedAttributesCount: 0 }
  const scope = options.scope.version === undefined
    ? { name: options.scope.name }
    : { name: options.scope.name, version: options.scope.version }
  const prefix = `{"resourceSpans":[{"resource":${JSON.stringify(resource)},"scopeSpans":[{"scope":${
    JSON.stringify(scope)
  },"spans":[`
  return { open: (): Batch => new JsonBatch(size, sealed, prefix) }
}

/** Spans encoded so far, and the request around them once sealed. */
export interface Batch {
  /** How many spans it holds. */
  readonly count: number
  /** Encodes one span into the batch (its objects are not kept). */
  add(span: SpanRecord): void
  /** The whole request body (call once, after the last `add`). */
  seal(): Uint8Array
}

const initialBytes = 64 * 1024

class ProtobufBatch implements Batch {
  count = 0
  private readonly w: Writer
  constructor(
    size: number,
    private readonly sealed: (bytes: number) => void,
    private readonly head: number,
    private readonly resourcePart: Buffer,
    private readonly scopePart: Buffer
  ) {
    this.w = new Writer(size, head)
  }

  add(span: SpanRecord): void {
    protobufSpan(this.w, span)
    this.count++
  }

  seal(): Uint8Array {
    const out = this.w.buffer
    const spansLength = this.w.pos - this.head
    // Written backwards into the room in front: ScopeSpans, then ResourceSpans, then the request's field.
    let at = this.head - this.scopePart.length
    this.scopePart.copy(out, at)
    const scopeSpansLength = this.scopePart.length + spansLength
    at = varintBefore(out, at, scopeSpansLength)
    out[--at] = (2 << 3) | 2
    at -= this.resourcePart.length
    this.resourcePart.copy(out, at)
    at = varintBefore(out, at, this.w.pos - at)
    out[--at] = (1 << 3) | 2
    this.sealed(this.w.pos)
    return out.subarray(at, this.w.pos)
  }
}

class JsonBatch implements Batch {
  count = 0
  private readonly w: Writer
  constructor(size: number, private readonly sealed: (bytes: number) => void, prefix: string) {
    this.w = new Writer(size, 0)
    this.text(prefix)
  }

  private text(value: string): void {
    const bytes = Buffer.byteLength(value, "utf8")
    this.w.ensure(bytes)
    this.w.pos += this.w.buffer.write(value, this.w.pos, bytes, "utf8")
  }

  add(span: SpanRecord): void {
    this.text(this.count === 0 ? jsonSpan(span) : `,${jsonSpan(span)}`)
    this.count++
  }

  seal(): Uint8Array {
    this.text("]}]}]}")
    this.sealed(this.w.pos)
    return this.w.buffer.subarray(0, this.w.pos)
  }
}

/** The attribute values OpenTelemetry allows (re-exported for the tests' span shapes). */
export type Value = AttributeValue
