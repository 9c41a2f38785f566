/**
 * otlpRecord — a finished span as the OTLP encoder (otlpEncoding) reads it, whatever made it, and its `flags` field.
 */
import type { HrTime, Link, SpanContext } from "@opentelemetry/api"
import type { ReadableSpan, TimedEvent } from "@opentelemetry/sdk-trace-base"

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

/** A span's or a link's `flags`: the W3C trace flags, and whether the context came from another process. */
export const spanFlags = (traceFlags: number, isRemote: boolean | undefined): number =>
  (traceFlags & 0xff) | SPAN_FLAGS_HAS_IS_REMOTE | (isRemote === true ? SPAN_FLAGS_IS_REMOTE : 0)
