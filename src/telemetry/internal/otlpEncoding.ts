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
import type { Attributes, AttributeValue, Link } from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import type { TimedEvent } from "@opentelemetry/sdk-trace-base"
import { jsonAttributes, jsonSpan } from "./otlpJson.js"
import type { SpanRecord } from "./otlpRecord.js"
import { spanFlags } from "./otlpRecord.js"
import { keyBytesOf, varintBefore, varintSize, Writer } from "./protobufWriter.js"

/** The OTLP encodings. */
export type Encoding = "protobuf" | "json"

/** A finished span as the encoder reads it (Corral's own spans are records themselves; `recordOf` reads any other). */
export type { SpanRecord } from "./otlpRecord.js"
/** A `ReadableSpan` of any origin as a record. */
export { recordOf } from "./otlpRecord.js"

const MIN_INT64 = -(2 ** 63)
const MAX_INT64 = 2 ** 63
const isInt64 = (n: number): boolean => Number.isInteger(n) && n >= MIN_INT64 && n < MAX_INT64

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
