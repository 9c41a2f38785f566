/**
 * `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`: the telemetry layer sends traces (Corral's own encoder, OtlpSpans:
 * the SDK serializer's bytes, test/telemetry/OtlpEncoding.test.ts) and metrics (the SDK's `-proto` exporter) as OTLP
 * protobuf, to a real HTTP receiver, and flushes both when it closes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Layer, Scope } from "effect"
import * as Metrics from "../../src/telemetry/Metrics.js"
import * as TelemetryConfig from "../../src/telemetry/Settings.js"
import * as Spans from "../../src/telemetry/Spans.js"
import * as Telemetry from "../../src/telemetry/Telemetry.js"
import * as OtlpReceiver from "../support/OtlpReceiver.js"

describe("telemetry over OTLP/HTTP protobuf", () => {
  it.live("sends the spans and metrics as application/x-protobuf, names intact", () =>
    Effect.gen(function*() {
      const receiver = yield* OtlpReceiver.make
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        Telemetry.layer({ ...TelemetryConfig.defaults, endpoint: receiver.endpoint, protocol: "http/protobuf" }),
        scope
      )
      yield* Effect.sync(() =>
        Metrics.add(Metrics.bursts, 1, "corral.exit_reason", "completed", "corral.tier", "proto")
      )
      yield* Effect.void.pipe(
        Spans.span(() => "execute_tool proto_tool", () => ({ "gen_ai.tool.name": "proto_tool" }), "internal", {
          leaf: true
        }),
        Spans.span(() => "invoke_agent proto_agent", () => ({ "gen_ai.operation.name": "invoke_agent" })),
        Effect.provide(context)
      )
      // Closing the layer flushes what is left.
      yield* Scope.close(scope, Exit.void)
      const traces = receiver.requests().filter((r) => r.path === "/v1/traces")
      const metrics = receiver.requests().filter((r) => r.path === "/v1/metrics")
      expect(traces.length).toBeGreaterThan(0)
      expect(metrics.length).toBeGreaterThan(0)
      for (const r of [...traces, ...metrics]) expect(r.contentType).toBe("application/x-protobuf")
      // Not JSON: nothing was decoded as such, and the strings are in the protobuf bytes as they are.
      expect(receiver.spans()).toEqual([])
      const traceBytes = Buffer.concat(traces.map((r) => r.body))
      expect(traceBytes[0]).not.toBe("{".charCodeAt(0))
      expect(traceBytes.includes("invoke_agent proto_agent")).toBe(true)
      expect(traceBytes.includes("execute_tool proto_tool")).toBe(true)
      expect(Buffer.concat(metrics.map((r) => r.body)).includes("corral.bursts")).toBe(true)
    }).pipe(Effect.scoped), 60_000)
})
