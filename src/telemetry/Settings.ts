/**
 * Telemetry settings — the `telemetry` section of the configuration file and the standard `OTEL_*` variables over it
 * (the variable wins, like every Corral variable). Nothing here loads the OpenTelemetry SDK: it only says whether
 * and where to export (`telemetry/Telemetry` builds the exporters, lazily, from these settings).
 *
 * Export is off unless an endpoint is given (`OTEL_EXPORTER_OTLP_ENDPOINT` or `telemetry.endpoint`) and
 * `OTEL_SDK_DISABLED` is not `true`: then Corral's spans are not even made. Prometheus text at `/metrics` and the
 * structured logs do not depend on it.
 */
import { Config as EffectConfig, ConfigError, Effect, Either, Option, Redacted, Schema } from "effect"
import type { FieldIssue } from "../domain/Errors.js"
import { fieldIssues } from "../domain/Errors.js"
import * as EnvVars from "../internal/envVars.js"

/** The OTLP transports Corral can speak (both over HTTP). */
export const Protocol = Schema.Literal("http/json", "http/protobuf")
export type Protocol = typeof Protocol.Type

/** The standard sampler names (`OTEL_TRACES_SAMPLER`). */
export const Sampler = Schema.Literal(
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio"
)
export type Sampler = typeof Sampler.Type

/** How log lines are written: JSON when stdout is not a terminal (`auto`), or always one way. */
export const LogFormat = Schema.Literal("auto", "json", "pretty")
export type LogFormat = typeof LogFormat.Type

const Ratio = Schema.Number.pipe(Schema.between(0, 1, { message: () => "a number from 0 to 1" }))
const PositiveInt = Schema.Int.pipe(Schema.positive({ message: () => "a positive integer" }))

/** The `telemetry` section of the configuration file. */
export const TelemetrySection = Schema.Struct({
  endpoint: Schema.optional(Schema.NonEmptyTrimmedString),
  protocol: Schema.optional(Protocol),
  headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  serviceName: Schema.optional(Schema.NonEmptyTrimmedString),
  resourceAttributes: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  sampler: Schema.optional(Sampler),
  samplerArg: Schema.optional(Ratio),
  metricIntervalMs: Schema.optional(PositiveInt),
  captureContent: Schema.optional(Schema.Boolean),
  logFormat: Schema.optional(LogFormat)
})
export type TelemetrySection = typeof TelemetrySection.Type

/** Resolved telemetry settings. `endpoint` absent: nothing is exported and spans are off. */
export interface TelemetrySettings {
  /** The OTLP/HTTP base URL (`/v1/traces` and `/v1/metrics` are appended). */
  readonly endpoint?: string
  readonly protocol: Protocol
  /** Headers sent with every export (often an API key: kept `Redacted`). */
  readonly headers?: Redacted.Redacted<ReadonlyArray<readonly [string, string]>>
  readonly serviceName: string
  readonly resourceAttributes: Readonly<Record<string, string>>
  readonly sampler: Sampler
  readonly samplerArg: number
  readonly metricIntervalMs: number
  /** How finished spans are batched for export (`OTEL_BSP_*`, telemetry/OtlpSpans). */
  readonly batch: SpanBatching
  /** Record prompt and completion content on spans (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`). */
  readonly captureContent: boolean
  readonly logFormat: LogFormat
}

/** The span batching bounds (`OTEL_BSP_*`; the defaults are the OpenTelemetry SDK's). */
export interface SpanBatching {
  readonly maxQueueSize: number
  readonly maxExportBatchSize: number
  readonly scheduleDelayMs: number
  readonly exportTimeoutMs: number
}

/** The defaults: no export, service `corral`, everything sampled, content never captured, logs by terminal. */
export const defaults: TelemetrySettings = {
  protocol: "http/protobuf",
  serviceName: "corral",
  resourceAttributes: {},
  sampler: "parentbased_always_on",
  samplerArg: 1,
  metricIntervalMs: 60_000,
  batch: { maxQueueSize: 2048, maxExportBatchSize: 512, scheduleDelayMs: 5000, exportTimeoutMs: 30_000 },
  captureContent: false,
  logFormat: "auto"
}

/**
 * Parses the W3C-baggage-like list the OTEL variables use (`k1=v1,k2=v2`, values percent-encoded). `Left` names
 * the first malformed member.
 */
export const parseList = (text: string): Either.Either<ReadonlyArray<readonly [string, string]>, string> => {
  const out: Array<readonly [string, string]> = []
  for (const member of text.split(",")) {
    if (member.trim() === "") continue
    const cut = member.indexOf("=")
    const key = cut < 0 ? "" : member.slice(0, cut).trim()
    if (key === "") return Either.left(`expected key=value pairs separated by commas, got "${member.trim()}"`)
    let value = member.slice(cut + 1).trim()
    try {
      value = decodeURIComponent(value)
    } catch {
      return Either.left(`the value of "${key}" is not valid percent-encoding`)
    }
    out.push([key, value])
  }
  return Either.right(out)
}

const positiveInteger = (name: string, fallback: number): EffectConfig.Config<number> =>
  described(
    name,
    EffectConfig.integer(name).pipe(
      EffectConfig.validate({ message: "Expected a positive integer", validation: (n) => n > 0 }),
      EffectConfig.withDefault(fallback)
    )
  )

const described = <A>(name: string, config: EffectConfig.Config<A>): EffectConfig.Config<A> =>
  EffectConfig.withDescription(config, EnvVars.byName(name).description)

const list = (name: string) =>
  EffectConfig.option(described(name, EffectConfig.redacted(name))).pipe(
    EffectConfig.mapOrFail((value) =>
      Option.match(value, {
        onNone: () => Either.right(Option.none<ReadonlyArray<readonly [string, string]>>()),
        onSome: (text) =>
          Either.mapBoth(parseList(Redacted.value(text)), {
            onLeft: (message) => ConfigError.InvalidData([name], message),
            onRight: Option.some
          })
      })
    )
  )

/** Decodes the file's `telemetry` section: the value, or every issue with its path. */
export const decodeSection = (raw: unknown): Either.Either<TelemetrySection | undefined, Array<FieldIssue>> => {
  if (raw === undefined) return Either.right(undefined)
  const decoded = Schema.decodeUnknownEither(TelemetrySection, { errors: "all", onExcessProperty: "error" })(raw)
  if (Either.isRight(decoded)) return Either.right(decoded.right)
  // One line per field: a union's alternatives merged, the optional-key "Expected undefined" echo dropped.
  return Either.left(fieldIssues(decoded.left, { prefix: ["telemetry"], unexpected: "unknown key" }))
}

/** The `OTEL_*` variables over the file's section, then the defaults. Fails with the variables' `ConfigError`s. */
export const environment = (
  file: TelemetrySection | undefined
): Effect.Effect<TelemetrySettings, ConfigError.ConfigError> =>
  Effect.map(
    EffectConfig.all({
      disabled: described(
        "OTEL_SDK_DISABLED",
        EffectConfig.boolean("OTEL_SDK_DISABLED").pipe(EffectConfig.withDefault(false))
      ),
      endpoint: EffectConfig.option(
        described("OTEL_EXPORTER_OTLP_ENDPOINT", EffectConfig.nonEmptyString("OTEL_EXPORTER_OTLP_ENDPOINT"))
      ),
      protocol: described(
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        EffectConfig.literal("http/json", "http/protobuf")("OTEL_EXPORTER_OTLP_PROTOCOL").pipe(
          EffectConfig.withDefault(file?.protocol ?? defaults.protocol)
        )
      ),
      headers: list("OTEL_EXPORTER_OTLP_HEADERS"),
      serviceName: described(
        "OTEL_SERVICE_NAME",
        EffectConfig.nonEmptyString("OTEL_SERVICE_NAME").pipe(
          EffectConfig.withDefault(file?.serviceName ?? defaults.serviceName)
        )
      ),
      resource: list("OTEL_RESOURCE_ATTRIBUTES"),
      sampler: described(
        "OTEL_TRACES_SAMPLER",
        EffectConfig.literal(...Sampler.literals)("OTEL_TRACES_SAMPLER").pipe(
          EffectConfig.withDefault(file?.sampler ?? defaults.sampler)
        )
      ),
      samplerArg: described(
        "OTEL_TRACES_SAMPLER_ARG",
        EffectConfig.number("OTEL_TRACES_SAMPLER_ARG").pipe(
          EffectConfig.validate({ message: "Expected a number from 0 to 1", validation: (n) => n >= 0 && n <= 1 }),
          EffectConfig.withDefault(file?.samplerArg ?? defaults.samplerArg)
        )
      ),
      metricIntervalMs: described(
        "OTEL_METRIC_EXPORT_INTERVAL",
        EffectConfig.integer("OTEL_METRIC_EXPORT_INTERVAL").pipe(
          EffectConfig.validate({ message: "Expected a positive integer", validation: (n) => n > 0 }),
          EffectConfig.withDefault(file?.metricIntervalMs ?? defaults.metricIntervalMs)
        )
      ),
      batch: EffectConfig.all({
        maxQueueSize: positiveInteger("OTEL_BSP_MAX_QUEUE_SIZE", defaults.batch.maxQueueSize),
        maxExportBatchSize: positiveInteger("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", defaults.batch.maxExportBatchSize),
        scheduleDelayMs: positiveInteger("OTEL_BSP_SCHEDULE_DELAY", defaults.batch.scheduleDelayMs),
        exportTimeoutMs: positiveInteger("OTEL_BSP_EXPORT_TIMEOUT", defaults.batch.exportTimeoutMs)
      }),
      captureContent: described(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        EffectConfig.boolean("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").pipe(
          EffectConfig.withDefault(file?.captureContent ?? defaults.captureContent)
        )
      ),
      logFormat: described(
        "CORRAL_LOG_FORMAT",
        EffectConfig.literal("auto", "json", "pretty")("CORRAL_LOG_FORMAT").pipe(
          EffectConfig.withDefault(file?.logFormat ?? defaults.logFormat)
        )
      )
    }),
    (env): TelemetrySettings => {
      const endpoint = env.disabled ? undefined : Option.getOrElse(env.endpoint, () => file?.endpoint)
      const headers = Option.getOrElse(
        env.headers,
        () => file?.headers === undefined ? undefined : Object.entries(file.headers)
      )
      const resource = Option.getOrElse(
        env.resource,
        () => Object.entries(file?.resourceAttributes ?? {})
      )
      return {
        ...(endpoint === undefined ? {} : { endpoint }),
        protocol: env.protocol,
        ...(headers === undefined || headers.length === 0 ? {} : { headers: Redacted.make(headers) }),
        serviceName: env.serviceName,
        resourceAttributes: Object.fromEntries(resource),
        sampler: env.sampler,
        samplerArg: env.samplerArg,
        metricIntervalMs: env.metricIntervalMs,
        batch: env.batch,
        captureContent: env.captureContent,
        logFormat: env.logFormat
      }
    }
  )
