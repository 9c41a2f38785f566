/**
 * Telemetry — the layer that exports Corral's traces and metrics over OTLP/HTTP (JSON, or protobuf when
 * `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`), built from the telemetry settings
 * (`telemetry/Settings`: `OTEL_EXPORTER_OTLP_ENDPOINT` and the other standard `OTEL_*` variables, or the file's
 * `telemetry` section).
 *
 * Off unless an endpoint is set: then the layer is empty, Corral's spans are not made (`Tracing`), and the SDK is
 * never loaded. On, it loads the OpenTelemetry SDK lazily (a dynamic import inside the layer, so `corral --help` and
 * start-up do not pay for it), installs Corral's tracer (`SpanTracer`, handing finished spans to `OtlpSpans`, which
 * encodes each as it ends and sends them in batches through the SDK's OTLP/HTTP delegate), exports Effect's metrics
 * every `metricIntervalMs`, logs (WARN) and meters spans it had to drop, and flushes both when the layer closes
 * (bounded by its shutdown timeout: a collector that does not answer never holds the process). An embedder with its
 * own tracer provides that tracer plus `Tracing.layer(true)` instead.
 */
import type { Resource } from "@effect/opentelemetry/Resource"
import type * as TraceSdkModule from "@opentelemetry/sdk-trace-base"
import type { Sampler } from "@opentelemetry/sdk-trace-base"
import { Context, Effect, Layer, Redacted, Ref, Schedule } from "effect"
import type { ConfigError } from "effect"
import { load } from "../internal/optionalPeers.js"
import * as Metrics from "./Metrics.js"
import * as OtlpSpans from "./OtlpSpans.js"
import * as TelemetryConfig from "./Settings.js"
import type { TelemetrySettings } from "./Settings.js"
import * as Spans from "./Spans.js"
import * as SpanTracer from "./SpanTracer.js"
import * as Tracing from "./Tracing.js"

const loadSdk = Effect.promise(() =>
  load("corral/telemetry", () =>
    Promise.all([
      import("@opentelemetry/api"),
      import("@effect/opentelemetry/Resource"),
      import("@effect/opentelemetry/Metrics"),
      import("@opentelemetry/sdk-trace-base"),
      import("@opentelemetry/sdk-metrics"),
      import("@opentelemetry/exporter-metrics-otlp-http"),
      import("@opentelemetry/otlp-exporter-base/node-http"),
      import("@opentelemetry/otlp-transformer")
    ]))
)

type TraceSdk = typeof TraceSdkModule

/** The sampler the settings name (`OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`). */
const samplerOf = (sdk: TraceSdk, settings: TelemetrySettings): Sampler => {
  switch (settings.sampler) {
    case "always_on":
      return new sdk.AlwaysOnSampler()
    case "always_off":
      return new sdk.AlwaysOffSampler()
    case "traceidratio":
      return new sdk.TraceIdRatioBasedSampler(settings.samplerArg)
    case "parentbased_always_on":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOnSampler() })
    case "parentbased_always_off":
      return new sdk.ParentBasedSampler({ root: new sdk.AlwaysOffSampler() })
    case "parentbased_traceidratio":
      return new sdk.ParentBasedSampler({ root: new sdk.TraceIdRatioBasedSampler(settings.samplerArg) })
  }
}

/** The OTLP URL of one signal under the configured base endpoint (`…/v1/traces`, `…/v1/metrics`). */
export const signalUrl = (endpoint: string, signal: "traces" | "metrics"): string =>
  `${endpoint.replace(/\/+$/, "")}/v1/${signal}`

/** How long closing the layer, or one `flush`, may spend sending what is left to the collector. */
const shutdownTimeout = "5 seconds"

/**
 * What `flush` runs: the exporting layer's "send every finished span and the metrics now"; nothing when telemetry is
 * off. A `Context.Reference`, so `flush` needs no layer.
 */
export class Flusher extends Context.Reference<Flusher>()("corral/telemetry/Flusher", {
  defaultValue: (): Effect.Effect<void> => Effect.void
}) {}

/**
 * Sends every span that has ended and the current metrics to the collector now, and waits for it (bounded by the
 * shutdown timeout; an export that fails is logged, never raised). For hosts that freeze or exit between requests
 * (a serverless function before it returns), and for measuring what exporting costs. Nothing when telemetry is off.
 */
export const flush: Effect.Effect<void> = Effect.flatten(Flusher)

/** One request body of the span exporter and how many spans it holds. */
interface OutgoingBatch {
  readonly body: Uint8Array
  readonly spans: number
}

/** How often spans the exporter dropped are logged (WARN, the counts since the last line) and metered. */
const dropReportInterval = "10 seconds"

/** Logs and meters the spans `processor` dropped since the counts in `reported`. */
const reportDrops = (processor: OtlpSpans.Processor, reported: Record<OtlpSpans.DropReason, number>) =>
  Effect.suspend(() => {
    const lines: Array<string> = []
    for (const reason of ["queue_full", "export_failed", "export_timeout"] as const) {
      const fresh = processor.dropped[reason] - reported[reason]
      if (fresh <= 0) continue
      reported[reason] = processor.dropped[reason]
      Metrics.add(Metrics.spansDropped, fresh, "reason", reason)
      lines.push(`${fresh} ${reason.replace("_", " ")}`)
    }
    return lines.length === 0
      ? Effect.void
      : Effect.logWarning(
        `telemetry: spans dropped (${lines.join(", ")}): raise OTEL_BSP_MAX_QUEUE_SIZE or check the collector`
      )
  })

/** The exporting layer for an endpoint (see the module header). */
const exporting = (settings: TelemetrySettings, endpoint: string): Layer.Layer<never> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const spanProcessor = yield* Ref.make<OtlpSpans.Processor | undefined>(undefined)
      const reported: Record<OtlpSpans.DropReason, number> = { queue_full: 0, export_failed: 0, export_timeout: 0 }
      const [api, OtelResource, OtelMetrics, traceSdk, metricSdk, metricExporter, exporterBase, transformer] =
        yield* loadSdk
      const headers = Object.fromEntries(settings.headers === undefined ? [] : Redacted.value(settings.headers))
      const protobuf = settings.protocol === "http/protobuf"
      const metricsUrl = signalUrl(endpoint, "metrics")
      // The protobuf metric exporter is loaded only when asked for (same version line as the JSON one).
      const metrics = protobuf
        ? yield* Effect.promise(() =>
          import("@opentelemetry/exporter-metrics-otlp-proto").then((metric) =>
            new metric.OTLPMetricExporter({ url: metricsUrl, headers })
          )
        )
        : new metricExporter.OTLPMetricExporter({ url: metricsUrl, headers })
      // Spans go through the SDK's own OTLP/HTTP delegate (headers, timeout, retries, compression, the
      // `OTEL_EXPORTER_OTLP_*` variables) with Corral's batches as the request bodies (telemetry/OtlpSpans).
      const delegate = exporterBase.createOtlpHttpExportDelegate(
        exporterBase.convertLegacyHttpOptions({ url: signalUrl(endpoint, "traces"), headers }, "TRACES", "v1/traces", {
          "Content-Type": protobuf ? "application/x-protobuf" : "application/json"
        }),
        {
          serializeRequest: (batch: OutgoingBatch) => batch.body,
          deserializeResponse: (protobuf ? transformer.ProtobufTraceSerializer : transformer.JsonTraceSerializer)
            .deserializeResponse
        },
        "otlp_http_span_exporter",
        { name: "span", countItems: (batch: OutgoingBatch) => batch.spans },
        undefined
      )
      const resource = OtelResource.layer({
        serviceName: settings.serviceName,
        attributes: { ...settings.resourceAttributes }
      })
      const tracer = Layer.unwrapScoped(
        Effect.gen(function*() {
          const resource = yield* OtelResource.Resource
          const processor = OtlpSpans.make({
            encoding: protobuf ? "protobuf" : "json",
            resource,
            scope: SpanTracer.scope,
            bounds: settings.batch,
            send: (body, spans) =>
              new Promise((resolve) => delegate.export({ body, spans }, (result) => resolve(result.code === 0))),
            close: () => delegate.shutdown()
          })
          yield* Ref.set(spanProcessor, processor)
          yield* Effect.addFinalizer(() =>
            Effect.promise(() => processor.shutdown()).pipe(
              Effect.zipRight(reportDrops(processor, reported)),
              Effect.ignoreLogged,
              Effect.interruptible,
              Effect.timeoutOption(shutdownTimeout)
            )
          )
          yield* Effect.forkScoped(
            Effect.repeat(reportDrops(processor, reported), Schedule.spaced(dropReportInterval))
          )
          // Corral's own tracer (`SpanTracer`: a finished span goes straight to the processor, and the children of
          // an unsampled span cost nearly nothing), not @effect/opentelemetry's nor the SDK's tracer.
          return Layer.setTracer(SpanTracer.make({ api, processor, resource, sampler: samplerOf(traceSdk, settings) }))
        })
      )
      const reader = new metricSdk.PeriodicExportingMetricReader({
        exporter: metrics,
        exportIntervalMillis: settings.metricIntervalMs,
        exportTimeoutMillis: Math.min(settings.metricIntervalMs, 30_000)
      })
      const flushAll = Effect.flatMap(Ref.get(spanProcessor), (processor) =>
        Effect.promise(() => Promise.all([processor?.forceFlush(), reader.forceFlush()]))).pipe(
          Effect.asVoid,
          Effect.ignoreLogged,
          Effect.interruptible,
          Effect.timeoutOption(shutdownTimeout),
          Effect.asVoid
        )
      const sdk: Layer.Layer<Resource> = Layer.mergeAll(
        tracer,
        OtelMetrics.layer(() =>
          reader, { shutdownTimeout })
      ).pipe(Layer.provideMerge(resource))
      yield* Effect.logInfo(
        `telemetry: exporting traces and metrics to ${endpoint} (OTLP/HTTP, ${
          settings.protocol === "http/protobuf" ? "protobuf" : "JSON"
        })`
      )
      return Layer.mergeAll(
        Layer.map(sdk, () => Context.empty()),
        Tracing.layer(true),
        contentLayer(settings.captureContent),
        Layer.succeedContext(Context.make(Flusher, flushAll))
      )
    })
  )

const contentLayer = (capture: boolean): Layer.Layer<never> =>
  Layer.succeedContext(Context.make(Spans.CaptureContent, capture))

/**
 * Telemetry for `settings`: OTLP/HTTP export of traces and metrics when an endpoint is configured (and Corral's
 * spans on), nothing at all otherwise. Never fails: an exporter that cannot reach its collector drops what it could
 * not send (logged and counted in `corral.telemetry.spans.dropped`), it never fails a session.
 */
export const layer = (settings: TelemetrySettings): Layer.Layer<never> =>
  settings.endpoint === undefined ? contentLayer(false) : exporting(settings, settings.endpoint)

/** The settings `layer` takes (`telemetry/Settings`): endpoint, protocol, headers, service, sampler, content capture. */
export type Settings = TelemetrySettings

/** The settings with nothing configured: no endpoint (nothing exported), service `corral`. */
export const defaults: Settings = TelemetryConfig.defaults

/**
 * `layer` over the settings the standard `OTEL_*` variables give (read through Effect's `Config`, so a
 * `ConfigProvider` can supply them): for embedders without a Corral configuration file. Fails with a `ConfigError`
 * naming a malformed variable.
 */
export const layerConfig: Layer.Layer<never, ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.map(TelemetryConfig.environment(undefined), layer)
)

/**
 * The settings the standard `OTEL_*` variables give (what `layerConfig` uses), for an embedder that adjusts some of
 * them before calling `layer`. Fails with a `ConfigError` naming a malformed variable.
 */
export const settingsConfig: Effect.Effect<Settings, ConfigError.ConfigError> = TelemetryConfig.environment(undefined)
