/**
 * otlpJson — a span in OTLP/JSON (otlpEncoding): ids in hex, times as decimal strings, as the SDK's JSON serializer
 * writes them (parse-equal to its output).
 */
import type { Attributes, HrTime } from "@opentelemetry/api"
import type { SpanRecord } from "./otlpRecord.js"
import { spanFlags } from "./otlpRecord.js"

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

/** Attributes as OTLP/JSON `KeyValue`s. */
export const jsonAttributes = (attrs: Attributes | undefined) => {
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

/** One span as its OTLP/JSON text. */
export const jsonSpan = (span: SpanRecord): string => {
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
