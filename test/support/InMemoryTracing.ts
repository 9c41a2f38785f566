/**
 * Spans captured in memory: Corral's tracer (`SpanTracer`, as `Telemetry.layer` installs it) handing finished spans
 * to an OpenTelemetry SDK processor exporting to a fresh `InMemorySpanExporter`, with Corral's spans turned on
 * (`Tracing.layer(true)`), and a text rendering of the captured tree (what docs/observability.md shows).
 */
import * as api from "@opentelemetry/api"
import { resourceFromAttributes } from "@opentelemetry/resources"
import type { ReadableSpan, Sampler } from "@opentelemetry/sdk-trace-base"
import {
  AlwaysOnSampler,
  InMemorySpanExporter,
  ParentBasedSampler,
  SimpleSpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { Context, Layer } from "effect"
import * as Spans from "../../src/telemetry/Spans.js"
import * as SpanTracer from "../../src/telemetry/SpanTracer.js"
import * as Tracing from "../../src/telemetry/Tracing.js"

/** A fresh exporter and the layer that sends Corral's spans to it. */
export const make = (options: { readonly captureContent?: boolean; readonly sampler?: Sampler } = {}) => {
  const exporter = new InMemorySpanExporter()
  /** The tracer alone (Corral's spans stay off). */
  const sdk = Layer.setTracer(SpanTracer.make({
    api,
    processor: new SimpleSpanProcessor(exporter),
    resource: resourceFromAttributes({ "service.name": "corral-test" }),
    sampler: options.sampler ?? new ParentBasedSampler({ root: new AlwaysOnSampler() })
  }))
  const layer = Layer.mergeAll(
    sdk,
    Tracing.layer(true),
    Layer.succeedContext(Context.make(Spans.CaptureContent, options.captureContent === true))
  )
  return { exporter, layer, sdk }
}

/** The id of a span's parent, if any. */
export const parentOf = (span: ReadableSpan): string | undefined => span.parentSpanContext?.spanId

/** The spans whose parent is `parent` (roots when undefined), in start order. */
export const children = (spans: ReadonlyArray<ReadableSpan>, parent: ReadableSpan | undefined) =>
  spans.filter((s) =>
    parent === undefined
      ? parentOf(s) === undefined || !spans.some((p) => p.spanContext().spanId === parentOf(s))
      : parentOf(s) === parent.spanContext().spanId
  ).sort((a, b) => Number(a.startTime[0] - b.startTime[0]) || a.startTime[1] - b.startTime[1])

const shown = (value: unknown) => Array.isArray(value) ? `[${value.join(",")}]` : String(value)

/** The tree as text: one span per line with the attributes in `keys`, its events indented below it. */
export const render = (spans: ReadonlyArray<ReadableSpan>, keys: ReadonlyArray<string>): string => {
  const lines: Array<string> = []
  const walk = (span: ReadableSpan, depth: number) => {
    const pad = "  ".repeat(depth)
    const attrs = keys.filter((k) => span.attributes[k] !== undefined).map((k) => `${k}=${shown(span.attributes[k])}`)
    lines.push(`${pad}${span.name}${attrs.length > 0 ? `  {${attrs.join(", ")}}` : ""}`)
    for (const event of span.events) {
      const eattrs = Object.entries(event.attributes ?? {}).map(([k, v]) => `${k}=${shown(v)}`)
      lines.push(`${pad}  • ${event.name}${eattrs.length > 0 ? `  {${eattrs.join(", ")}}` : ""}`)
    }
    for (const child of children(spans, span)) walk(child, depth + 1)
  }
  for (const root of children(spans, undefined)) walk(root, 0)
  return lines.join("\n")
}
