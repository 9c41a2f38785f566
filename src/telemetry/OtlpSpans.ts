/**
 * OtlpSpans — the span processor of the OTLP/HTTP exporter: a finished span is encoded (protobuf or JSON,
 * `internal/otlpEncoding`) the moment it ends, into the open batch, and batches go to the collector through the
 * SDK's OTLP/HTTP export delegate — its headers, timeout, retries with backoff on 429/503, `OTEL_EXPORTER_OTLP_*`
 * variables, compression and limit of 30 exports at once — exactly as the SDK's own exporter sends them.
 *
 * Prevents exporting from costing more than the work it watches (issue 16: ≤ 20 % more CPU with an exporter on).
 * The SDK's `BatchSpanProcessor` keeps every finished span object until its batch leaves, so at thousands of spans
 * a second they outlive the young generation and the garbage collector copies and promotes each of them; here the
 * span's objects die young and only its bytes wait.
 *
 * Bounds, the `OTEL_BSP_*` settings with the SDK's defaults (telemetry/Settings):
 * - at most `maxQueueSize` (2,048) spans are held, in the open batch and in exports not yet answered: more are
 *   dropped, never waited for — a slow collector must not slow sessions down, nor grow memory without end;
 * - a batch leaves when it holds `maxExportBatchSize` (512) spans, or `scheduleDelayMs` (5 s) after its first span;
 * - an export is given up after `exportTimeoutMs` (30 s), whatever the delegate's own retries are doing.
 * Every dropped span is counted by reason (`dropped`): `queue_full`, `export_failed`, `export_timeout`; the layer
 * logs and meters the counts (telemetry/Telemetry).
 */
import type { Resource } from "@opentelemetry/resources"
import type { ReadableSpan, SpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as OtlpEncoding from "./internal/otlpEncoding.js"

/** The batching bounds (`OTEL_BSP_*`). */
export interface Bounds {
  readonly maxQueueSize: number
  readonly maxExportBatchSize: number
  readonly scheduleDelayMs: number
  readonly exportTimeoutMs: number
}

/** Why spans were not delivered. */
export type DropReason = "queue_full" | "export_failed" | "export_timeout"

/** Sends one request body; resolves `true` when the collector took it (the SDK's export delegate, adapted). */
export type Send = (body: Uint8Array, spans: number) => Promise<boolean>

/** The processor, plus the counts of what it could not deliver. */
export interface Processor extends SpanProcessor {
  /** Takes one of Corral's own finished sampled spans as it is (telemetry/SpanTracer), with no `ReadableSpan` made. */
  readonly onEndRecord: (span: OtlpEncoding.SpanRecord) => void
  /** Spans dropped so far, by reason. */
  readonly dropped: Readonly<Record<DropReason, number>>
}

/** A processor that encodes spans into batches and hands each batch to `send` (see the module header). */
export const make = (options: {
  readonly encoding: OtlpEncoding.Encoding
  readonly resource: Resource
  readonly scope: { readonly name: string; readonly version?: string }
  readonly bounds: Bounds
  readonly send: Send
  /** Called when the processor shuts down, after the last export (the delegate's own shutdown). */
  readonly close?: () => Promise<void>
}): Processor => {
  const { bounds, send } = options
  const batchSize = Math.max(1, Math.min(bounds.maxExportBatchSize, bounds.maxQueueSize))
  const envelope = OtlpEncoding.envelope(options)
  const dropped: Record<DropReason, number> = { queue_full: 0, export_failed: 0, export_timeout: 0 }
  const inFlight = new Set<Promise<void>>()
  let open: OtlpEncoding.Batch | undefined
  let held = 0
  let timer: ReturnType<typeof setTimeout> | undefined
  let closed = false

  const deliver = (body: Uint8Array, count: number): Promise<void> =>
    new Promise<DropReason | undefined>((resolve) => {
      const giveUp = setTimeout(() => resolve("export_timeout"), bounds.exportTimeoutMs)
      giveUp.unref?.()
      send(body, count).then(
        (ok) => resolve(ok ? undefined : "export_failed"),
        () => resolve("export_failed")
      ).finally(() => clearTimeout(giveUp))
    }).then((failure) => {
      held -= count
      if (failure !== undefined) dropped[failure] += count
    })

  /** Seals the open batch and sends it; resolves when it is answered (or given up). */
  const ship = (): Promise<void> => {
    if (timer !== undefined) {
      clearTimeout(timer)
      timer = undefined
    }
    const batch = open
    open = undefined
    if (batch === undefined || batch.count === 0) return Promise.resolve()
    const done = deliver(batch.seal(), batch.count)
    inFlight.add(done)
    void done.finally(() => inFlight.delete(done))
    return done
  }

  /** Encodes one finished sampled span into the open batch (or drops it when the queue is full). */
  const take = (span: OtlpEncoding.SpanRecord): void => {
    if (closed) return
    if (held >= bounds.maxQueueSize) {
      dropped.queue_full++
      return
    }
    const batch = open ??= envelope.open()
    batch.add(span)
    held++
    if (batch.count >= batchSize) void ship()
    else if (timer === undefined) {
      timer = setTimeout(() => void ship(), bounds.scheduleDelayMs)
      timer.unref?.()
    }
  }

  const flush = (): Promise<void> => {
    void ship()
    return Promise.all(inFlight).then(() => undefined)
  }

  return {
    dropped,
    onStart: () => {},
    onEnd: (span: ReadableSpan) => {
      if ((span.spanContext().traceFlags & 1) === 0) return
      take(OtlpEncoding.recordOf(span))
    },
    onEndRecord: take,
    forceFlush: flush,
    shutdown: () => {
      if (closed) return flush()
      closed = true
      return flush().then(() => options.close?.())
    }
  }
}
