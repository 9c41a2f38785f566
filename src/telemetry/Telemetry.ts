/**
 * Telemetry — the layer that exports Corral's traces and metrics over OTLP/HTTP (JSON, or protobuf when
 * `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`), built from the telemetry settings
 * (`config/Telemetry`: `OTEL_EXPORTER_OTLP_ENDPOINT` and the other standard `OTEL_*` variables, or the file's
 * `telemetry` section).
 *
 * Off unless an endpoint is set: then the layer is empty, Corral's spans are not made (`Tracing`), and the SDK is
 * never loaded. On, it loads the OpenTelemetry SDK lazily (a dynamic import inside the layer, so `corral --help` and
 * start-up do not pay for it), installs Corral's tracer (`SpanTracer`, handing finished spans to the SDK's batch
 * processor), exports spans in batches and
 * Effect's metrics every `metricIntervalMs`, and flushes both when the layer closes (bounded by its shutdown
 * timeout: a collector that does not answer never holds the process). An embedder with its own tracer provides
 * that tracer plus `Tracing.layer(true)` instead.
 */
import type { Resource } from "@effect/opentelemetry/Resource"
import type * as TraceSdkModule from "@opentelemetry/sdk-trace-base"
import type { Sampler } from "@opentelemetry/sdk-trace-base"
import { Context, Effect, Layer, Redacted } from "effect"
import type { ConfigError } from "effect"
import * as TelemetryConfig from "../config/Telemetry.js"
import type { TelemetrySettings } from "../config/Telemetry.js"
import * as Spans from "./Spans.js"
import * as SpanTracer from "./SpanTracer.js"
import * as Tracing from "./Tracing.js"

const loadSdk = Effect.promise(() =>
  Promise.all([
    import("@opentelemetry/api"),
    import("@effect/opentelemetry/Resource"),
    import("@effect/opentelemetry/Metrics"),
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/sdk-metrics"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/exporter-metrics-otlp-http")
  ])
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

/** The exporting layer for an endpoint (see the module header). */
const exporting = (settings: TelemetrySettings, endpoint: string): Layer.Layer<never> =>
  Layer.unwrapEffect(
    Effect.gen(function*() {
      const [api, OtelResource, OtelMetrics, traceSdk, metricSdk, traceExporter, metricExporter] = yield* loadSdk
      const headers = Object.fromEntries(settings.headers === undefined ? [] : Redacted.value(settings.headers))
      const tracesUrl = signalUrl(endpoint, "traces")
      const metricsUrl = signalUrl(endpoint, "metrics")
      // The protobuf exporters are loaded only when asked for (same version line as the JSON ones).
      const [spans, metrics] = settings.protocol === "http/protobuf"
        ? yield* Effect.promise(() =>
          Promise.all([
            import("@opentelemetry/exporter-trace-otlp-proto"),
            import("@opentelemetry/exporter-metrics-otlp-proto")
          ]).then(([trace, metric]) =>
            [
              new trace.OTLPTraceExporter({ url: tracesUrl, headers }),
              new metric.OTLPMetricExporter({ url: metricsUrl, headers })
            ] as const
          )
        )
        : [
          new traceExporter.OTLPTraceExporter({ url: tracesUrl, headers }),
          new metricExporter.OTLPMetricExporter({ url: metricsUrl, headers })
        ] as const
      const resource = OtelResource.layer({
        serviceName: settings.serviceName,
        attributes: { ...settings.resourceAttributes }
      })
      // Corral's own tracer (`SpanTracer`: a finished span goes straight to the batch processor, and the children of
      // an unsampled span cost nearly nothing), not @effect/opentelemetry's nor the SDK's tracer, which measured
      // +36 % CPU per turn in the workload. Closing the layer flushes what is left, bounded.
      const processor = new traceSdk.BatchSpanProcessor(spans)
      const tracer = Layer.unwrapScoped(
        Effect.gen(function*() {
          const resource = yield* OtelResource.Resource
          yield* Effect.addFinalizer(() =>
            Effect.promise(() => processor.forceFlush().then(() => processor.shutdown())).pipe(
              Effect.ignoreLogged,
              Effect.interruptible,
              Effect.timeoutOption(shutdownTimeout)
            )
          )
          return Layer.setTracer(SpanTracer.make({ api, processor, resource, sampler: samplerOf(traceSdk, settings) }))
        })
      )
      const reader = new metricSdk.PeriodicExportingMetricReader({
        exporter: metrics,
        exportIntervalMillis: settings.metricIntervalMs,
        exportTimeoutMillis: Math.min(settings.metricIntervalMs, 30_000)
      })
      const flushAll = Effect.promise(() => Promise.all([processor.forceFlush(), reader.forceFlush()])).pipe(
        Effect.asVoid,
        Effect.ignoreLogged,
        Effect.interruptible,
        Effect.timeoutOption(shutdownTimeout),
        Effect.asVoid
      )
      const sdk: Layer.Layer<Resource> = Layer.mergeAll(
        tracer,
        OtelMetrics.layer(() => reader, { shutdownTimeout })
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
 * not send (the SDK logs it), it never fails a session.
 */
export const layer = (settings: TelemetrySettings): Layer.Layer<never> =>
  settings.endpoint === undefined ? contentLayer(false) : exporting(settings, settings.endpoint)

/** The settings `layer` takes (`config/Telemetry`): endpoint, protocol, headers, service, sampler, content capture. */
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
