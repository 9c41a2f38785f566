/**
 * Telemetry settings: off by default, the standard OTEL_* variables over the file's `telemetry` section, headers
 * kept secret, and a bad value named with its variable or key.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Redacted } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as Config from "../../src/config/Config.js"
import * as Telemetry from "../../src/telemetry/Settings.js"

const load = (env: Record<string, string>) =>
  Config.load.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))

const withFile = <A, E>(content: unknown, body: (path: string) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const dir = mkdtempSync(join(tmpdir(), "corral-telemetry-"))
      const path = join(dir, "corral.json")
      writeFileSync(path, JSON.stringify(content))
      return { dir, path }
    }),
    ({ path }) => body(path),
    ({ dir }) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )

const problems = (env: Record<string, string>) =>
  Effect.map(Effect.flip(load(env)), (error) => error.issues.map((i) => `${i.path}: ${i.message}`))

describe("telemetry settings", () => {
  it.effect("are off with nothing set: no endpoint, content never captured, logs by terminal", () =>
    Effect.gen(function*() {
      const settings = yield* load({})
      expect(settings.telemetry).toEqual(Telemetry.defaults)
      expect(settings.telemetry.endpoint).toBeUndefined()
    }))

  it.effect("read the standard OTEL_* variables", () =>
    Effect.gen(function*() {
      const { telemetry } = yield* load({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318",
        OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20abc,x-team=sre",
        OTEL_SERVICE_NAME: "corral-prod",
        OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=prod,service.namespace=agents",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.25",
        OTEL_METRIC_EXPORT_INTERVAL: "15000",
        OTEL_BSP_MAX_QUEUE_SIZE: "20000",
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "1024",
        OTEL_BSP_SCHEDULE_DELAY: "1000",
        OTEL_BSP_EXPORT_TIMEOUT: "9000",
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: "true",
        CORRAL_LOG_FORMAT: "json"
      })
      expect({ ...telemetry, headers: telemetry.headers && Redacted.value(telemetry.headers) }).toEqual({
        endpoint: "http://collector:4318",
        protocol: "http/protobuf",
        headers: [["authorization", "Bearer abc"], ["x-team", "sre"]],
        serviceName: "corral-prod",
        resourceAttributes: { "deployment.environment": "prod", "service.namespace": "agents" },
        sampler: "parentbased_traceidratio",
        samplerArg: 0.25,
        metricIntervalMs: 15_000,
        batch: { maxQueueSize: 20_000, maxExportBatchSize: 1024, scheduleDelayMs: 1000, exportTimeoutMs: 9000 },
        captureContent: true,
        logFormat: "json"
      })
      // The headers often hold a key: they print as <redacted>.
      expect(String(telemetry.headers)).not.toContain("abc")
    }))

  it.effect("the file's telemetry section, the variable winning; OTEL_SDK_DISABLED turns export off", () =>
    withFile(
      { telemetry: { endpoint: "http://file:4318", serviceName: "from-file", captureContent: true } },
      (path) =>
        Effect.gen(function*() {
          const fromFile = (yield* load({ CORRAL_CONFIG: path })).telemetry
          expect(fromFile).toMatchObject({
            endpoint: "http://file:4318",
            serviceName: "from-file",
            captureContent: true
          })
          const overridden = (yield* load({ CORRAL_CONFIG: path, OTEL_SERVICE_NAME: "from-env" })).telemetry
          expect(overridden.serviceName).toBe("from-env")
          const disabled = (yield* load({ CORRAL_CONFIG: path, OTEL_SDK_DISABLED: "true" })).telemetry
          expect(disabled.endpoint).toBeUndefined()
        })
    ))

  it.effect("a bad value is named with its variable or key, all at once", () =>
    Effect.gen(function*() {
      const found = yield* problems({
        OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
        OTEL_TRACES_SAMPLER_ARG: "2",
        OTEL_EXPORTER_OTLP_HEADERS: "no-equals-sign",
        OTEL_BSP_MAX_QUEUE_SIZE: "0"
      })
      expect(found).toEqual(expect.arrayContaining([
        expect.stringMatching(/^OTEL_EXPORTER_OTLP_PROTOCOL: .*http\/json.*http\/protobuf/),
        expect.stringMatching(/^OTEL_TRACES_SAMPLER_ARG: Expected a number from 0 to 1/),
        expect.stringMatching(/^OTEL_EXPORTER_OTLP_HEADERS: expected key=value pairs/),
        expect.stringMatching(/^OTEL_BSP_MAX_QUEUE_SIZE: Expected a positive integer/)
      ]))
      const fromFile = yield* withFile(
        { telemetry: { endpont: "http://typo:4318", sampler: "sometimes" } },
        (path) => problems({ CORRAL_CONFIG: path })
      )
      expect(fromFile).toEqual(expect.arrayContaining([
        "telemetry.endpont: unknown key",
        expect.stringMatching(/^telemetry\.sampler: /)
      ]))
    }))
})
