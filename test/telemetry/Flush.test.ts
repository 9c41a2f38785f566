/**
 * `Telemetry.flush`: a host that freezes or exits between requests (a serverless function before it returns) sends
 * what has ended now, while the layer stays open — the batch processor alone would hold the spans for its 5-second
 * schedule. With telemetry off it does nothing and needs no layer.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Logger, Metric, Scope } from "effect"
import * as Metrics from "../../src/telemetry/Metrics.js"
import * as TelemetryConfig from "../../src/telemetry/Settings.js"
import * as Spans from "../../src/telemetry/Spans.js"
import * as Telemetry from "../../src/telemetry/Telemetry.js"
import * as OtlpReceiver from "../support/OtlpReceiver.js"

describe("Telemetry.flush", () => {
  it.scopedLive("sends every ended span and the metrics now, with the layer still open", () =>
    Effect.gen(function*() {
      const receiver = yield* OtlpReceiver.make
      const context = yield* Layer.build(
        Telemetry.layer({ ...TelemetryConfig.defaults, endpoint: receiver.endpoint, protocol: "http/json" })
      )
      yield* Effect.sync(() =>
        Metrics.add(Metrics.bursts, 1, "corral.exit_reason", "completed", "corral.tier", "flush")
      )
      yield* Effect.void.pipe(
        Spans.span(() => "execute_tool flushed_tool", () => ({ "gen_ai.tool.name": "flushed_tool" }), "internal", {
          leaf: true
        }),
        Spans.span(() => "invoke_agent flushed", () => ({ "gen_ai.operation.name": "invoke_agent" })),
        Effect.provide(context)
      )
      expect(receiver.spans()).toEqual([])
      yield* Effect.provide(Telemetry.flush, context)
      expect(receiver.spans().map((s) => s.name).sort()).toEqual(["execute_tool flushed_tool", "invoke_agent flushed"])
      expect(receiver.metrics().some((m) => m.name === "corral.bursts" && m.attributes["corral.tier"] === "flush"))
        .toBe(true)
    }), 60_000)

  it.scopedLive(
    "spans the collector refuses are dropped, counted by reason, and named in a WARN line",
    () =>
      Effect.gen(function*() {
        const receiver = yield* OtlpReceiver.makeWith({ refuseTraces: 400 })
        const lines: Array<string> = []
        const logger = Logger.make(({ logLevel, message }) => lines.push(`${logLevel.label} ${String(message)}`))
        const dropped = Metric.value(
          Metric.taggedWithLabels(Metrics.spansDropped, Metrics.labels("reason", "export_failed"))
        )
        const before = (yield* dropped).count
        const scope = yield* Scope.make()
        // The layer's finalizer logs with the fiber refs of the fiber that built it.
        const context = yield* Layer.buildWithScope(
          Telemetry.layer({ ...TelemetryConfig.defaults, endpoint: receiver.endpoint }),
          scope
        ).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
        for (let i = 0; i < 3; i++) {
          yield* Effect.void.pipe(
            Spans.span(() => "invoke_agent refused", () => ({ "gen_ai.operation.name": "invoke_agent" })),
            Effect.provide(context)
          )
        }
        yield* Effect.provide(Telemetry.flush, context)
        expect(receiver.requests().filter((r) => r.path === "/v1/traces")).toHaveLength(1)
        // Closing the layer reports what the last interval has not (the periodic report runs every 10 s).
        yield* Scope.close(scope, Exit.void)
        expect((yield* dropped).count - before).toBe(3)
        expect(lines.filter((l) => l.startsWith("WARN"))).toEqual([
          "WARN telemetry: spans dropped (3 export failed): raise OTEL_BSP_MAX_QUEUE_SIZE or check the collector"
        ])
      }),
    60_000
  )

  it.effect("does nothing with telemetry off, with or without the layer", () =>
    Effect.gen(function*() {
      yield* Telemetry.flush
      yield* Effect.provide(Telemetry.flush, Telemetry.layer(TelemetryConfig.defaults))
    }))
})
