/**
 * What leaves for the collector must be what the SDK's own exporters would send: Corral encodes each span as it
 * ends (telemetry/OtlpSpans) instead of handing the batch to the SDK's serializers, so for every span shape —
 * roots and children, remote parents with trace state, events, links, failures, every attribute type, strings long
 * and not ASCII, messages whose length needs several bytes — the protobuf bytes are the SDK's byte for byte and the
 * JSON is the SDK's parsed. And the processor keeps its bounds: spans over the queue are dropped and counted, a
 * failed export is counted, a batch leaves when full.
 */
import { describe, expect, it } from "@effect/vitest"
import * as api from "@opentelemetry/api"
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer"
import { resourceFromAttributes } from "@opentelemetry/resources"
import { AlwaysOnSampler } from "@opentelemetry/sdk-trace-base"
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer } from "effect"
import * as OtlpEncoding from "../../src/telemetry/internal/otlpEncoding.js"
import * as OtlpSpans from "../../src/telemetry/OtlpSpans.js"
import * as Spans from "../../src/telemetry/Spans.js"
import * as SpanTracer from "../../src/telemetry/SpanTracer.js"

const resource = resourceFromAttributes({ "service.name": "encoding-test", "deployment.environment": "ci", n: 3 })
const scope = { name: "corral" }

const at = (ms: number): api.HrTime => [Math.floor(ms / 1000), (ms % 1000) * 1_000_000 + 123]

const span = (over: Partial<ReadableSpan> & { readonly ids?: api.SpanContext }): ReadableSpan => {
  const ids = over.ids ?? { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 1 }
  return {
    name: "execute_tool echo",
    kind: api.SpanKind.INTERNAL,
    spanContext: () => ids,
    startTime: at(1_764_800_000_123),
    endTime: at(1_764_800_000_456),
    status: { code: api.SpanStatusCode.OK },
    attributes: {},
    links: [],
    events: [],
    duration: [0, 333_000_000],
    ended: true,
    resource,
    instrumentationScope: scope,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
    ...over
  }
}

const long = "x".repeat(300)
const shapes: ReadonlyArray<ReadableSpan> = [
  span({}),
  // Ids in upper case (a remote parent may send them so).
  span({
    ids: { traceId: "0AF7651916CD43DD8448EB211C80319C", spanId: "B7AD6B7169203331", traceFlags: 1 },
    parentSpanContext: { traceId: "0AF7651916CD43DD8448EB211C80319C", spanId: "00F067AA0BA902B7", traceFlags: 1 }
  }),
  span({
    name: "chat gpt-4o",
    kind: api.SpanKind.CLIENT,
    parentSpanContext: { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "00f067aa0ba902b7", traceFlags: 1 },
    attributes: {
      "gen_ai.operation.name": "chat",
      "gen_ai.usage.input_tokens": 1200,
      "corral.ratio": 0.25,
      "corral.negative": -7,
      "corral.big": 2 ** 40,
      "corral.truncated": false,
      "gen_ai.response.finish_reasons": ["stop", "tool_calls"],
      "corral.empty": "",
      "corral.text": "café — 日本語 🚀",
      "corral.long": long
    },
    droppedAttributesCount: 2
  }),
  span({
    name: "invoke_agent triage",
    ids: {
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "53995c3f42cd8ad8",
      traceFlags: 1,
      traceState: api.createTraceState("vendor=abc,other=1")
    },
    parentSpanContext: {
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "aaaaaaaaaaaaaaaa",
      traceFlags: 1,
      isRemote: true
    },
    kind: api.SpanKind.SERVER,
    status: { code: api.SpanStatusCode.ERROR, message: "ProviderExhausted: every provider of the route failed" },
    events: [
      { name: "corral.rail.retry", time: at(1_764_800_000_200), attributes: { "corral.retry.delay_ms": 250 } },
      { name: "exception", time: at(1_764_800_000_400), attributes: { "exception.stacktrace": long.repeat(100) } },
      { name: "bare", time: at(1_764_800_000_401), droppedAttributesCount: 1 }
    ],
    droppedEventsCount: 4,
    links: [{
      context: { traceId: "11111111111111111111111111111111", spanId: "2222222222222222", traceFlags: 0 },
      attributes: { why: "follows" }
    }]
  })
]

const encode = (encoding: OtlpEncoding.Encoding, spans: ReadonlyArray<ReadableSpan>): Uint8Array => {
  const batch = OtlpEncoding.envelope({ encoding, resource, scope }).open()
  for (const s of spans) batch.add(OtlpEncoding.recordOf(s))
  return batch.seal()
}

const text = (bytes: Uint8Array) => JSON.parse(Buffer.from(bytes).toString("utf8")) as unknown

describe("OTLP encoding", () => {
  it("protobuf: the SDK serializer's bytes, for each shape alone and for a batch of them", () => {
    for (const s of shapes) {
      const ours = Buffer.from(encode("protobuf", [s]))
      const sdk = Buffer.from(ProtobufTraceSerializer.serializeRequest([s])!)
      // `equals`, not `toEqual`: a megabyte compared element by element takes seconds.
      expect(ours.equals(sdk), `${s.name}: ${ours.length} bytes against the SDK's ${sdk.length}`).toBe(true)
    }
    // 200 spans: the request and its ScopeSpans need multi-byte lengths.
    const many = Array.from({ length: 200 }, (_, i) => shapes[i % shapes.length]!)
    const ours = Buffer.from(encode("protobuf", many))
    expect(ours.length).toBeGreaterThan(16_384)
    expect(ours.equals(Buffer.from(ProtobufTraceSerializer.serializeRequest(many)!))).toBe(true)
  })

  it("JSON: parses to what the SDK serializer's JSON parses to", () => {
    for (const s of shapes) {
      expect(text(encode("json", [s]))).toEqual(text(JsonTraceSerializer.serializeRequest([s])!))
    }
    const many = Array.from({ length: 50 }, (_, i) => shapes[i % shapes.length]!)
    expect(text(encode("json", many))).toEqual(text(JsonTraceSerializer.serializeRequest(many)!))
  })
})

/**
 * Spans as Corral's tracer finishes them: their attributes are two arrays and their times epoch nanoseconds, which the
 * encoder reads directly, while the SDK's serializers read the `ReadableSpan` fields made from them on demand.
 */
const tracerSpans = (): Promise<ReadonlyArray<OtlpEncoding.SpanRecord>> => {
  const finished: Array<OtlpEncoding.SpanRecord> = []
  const tracer = Layer.setTracer(SpanTracer.make({
    api,
    processor: {
      onEnd: () => expect.fail("a record-taking processor gets records"),
      onEndRecord: (s) => finished.push(s)
    },
    resource,
    sampler: new AlwaysOnSampler()
  }))
  const leaf = { leaf: true } as const
  const program = Effect.gen(function*() {
    yield* Spans.annotate(() => ({
      "gen_ai.response.finish_reasons": ["tool_calls"],
      "gen_ai.usage.input_tokens": 10,
      "corral.ratio": 0.5,
      "corral.truncated": true,
      "corral.text": "café — 日本語",
      "corral.skipped": undefined
    }))
    // The same key again: the value is replaced, the key keeps its place.
    yield* Spans.annotate(() => ({ "gen_ai.usage.input_tokens": 12, "corral.long": long }))
    yield* Spans.event("corral.rail.retry", 1_764_800_000_200, { "corral.retry.delay_ms": 250 })
  }).pipe(
    Spans.span(
      () => "chat m",
      () => ({ "gen_ai.operation.name": "chat", "gen_ai.request.model": "m" }),
      "client",
      leaf
    ),
    Effect.zipRight(
      Effect.fail(new Error("refused")).pipe(
        Spans.span(() => "execute_tool echo", () => ({ "gen_ai.tool.name": "echo", n: 2 ** 40 }), "internal", leaf),
        Effect.ignore
      )
    ),
    Effect.zipRight(Effect.interrupt.pipe(Spans.span(() => "interrupted", () => ({})), Effect.exit)),
    Spans.span(() => "invoke_agent triage", () => ({ "gen_ai.agent.id": "triage" }), "internal", leaf)
  )
  return Effect.runPromise(program.pipe(Effect.provide(tracer))).then(() => finished)
}

describe("OTLP encoding of Corral's own spans", () => {
  it("protobuf: byte for byte what the SDK's serializer writes for the same spans; JSON parse-equal", async () => {
    const records = await tracerSpans()
    const spans = records.map((r) => SpanTracer.readable(r, resource))
    expect(spans.map((s) => s.name).sort()).toEqual(
      ["chat m", "execute_tool echo", "interrupted", "invoke_agent triage"]
    )
    const chat = spans.find((s) => s.name === "chat m")!
    expect(chat.attributes["gen_ai.usage.input_tokens"]).toBe(12)
    expect(Object.keys(chat.attributes)).not.toContain("corral.skipped")
    expect(spans.find((s) => s.name === "interrupted")!.attributes["status.interrupted"]).toBe(true)
    const failed = spans.find((s) => s.name === "execute_tool echo")!
    expect(failed.status).toEqual({ code: api.SpanStatusCode.ERROR, message: "refused" })
    expect(failed.events.map((e) => e.name)).toEqual(["exception"])
    const own = (encoding: OtlpEncoding.Encoding, list: ReadonlyArray<OtlpEncoding.SpanRecord>) => {
      const batch = OtlpEncoding.envelope({ encoding, resource, scope }).open()
      for (const r of list) batch.add(r)
      return batch.seal()
    }
    records.forEach((r, i) => {
      const s = spans[i]!
      const ours = Buffer.from(own("protobuf", [r]))
      const sdk = Buffer.from(ProtobufTraceSerializer.serializeRequest([s])!)
      expect(ours.equals(sdk), `${s.name}: ${ours.length} bytes against the SDK's ${sdk.length}`).toBe(true)
      expect(text(own("json", [r]))).toEqual(text(JsonTraceSerializer.serializeRequest([s])!))
    })
    expect(Buffer.from(own("protobuf", records)).equals(Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)!)))
      .toBe(true)
  })
})

const bounds: OtlpSpans.Bounds = {
  maxQueueSize: 6,
  maxExportBatchSize: 4,
  scheduleDelayMs: 60_000,
  exportTimeoutMs: 60_000
}

describe("OtlpSpans", () => {
  it("a full batch leaves at once; a flush sends the rest; what the collector got decodes to every span", async () => {
    const sent: Array<number> = []
    const bodies: Array<Uint8Array> = []
    const processor = OtlpSpans.make({
      encoding: "json",
      resource,
      scope,
      bounds,
      send: (body, spans) => {
        sent.push(spans)
        bodies.push(body)
        return Promise.resolve(true)
      }
    })
    for (let i = 0; i < 5; i++) processor.onEnd(span({ name: `span ${i}` }))
    expect(sent).toEqual([4])
    await processor.forceFlush()
    expect(sent).toEqual([4, 1])
    const names = bodies.flatMap((b) =>
      (text(b) as { resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ name: string }> }> }> })
        .resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => s.name)
    )
    expect(names).toEqual(["span 0", "span 1", "span 2", "span 3", "span 4"])
    expect(processor.dropped).toEqual({ queue_full: 0, export_failed: 0, export_timeout: 0 })
  })

  it("spans over the queue while the collector does not answer are dropped and counted, never waited for", async () => {
    const answers: Array<(ok: boolean) => void> = []
    const processor = OtlpSpans.make({
      encoding: "protobuf",
      resource,
      scope,
      bounds,
      send: () => new Promise((resolve) => answers.push(resolve))
    })
    for (let i = 0; i < 10; i++) processor.onEnd(span({}))
    // 4 in the unanswered export, 2 in the open batch: the queue of 6 is full, 4 dropped.
    expect(processor.dropped.queue_full).toBe(4)
    answers[0]!(false)
    await new Promise((resolve) => setImmediate(resolve))
    expect(processor.dropped.export_failed).toBe(4)
    // Room again: a new span is taken.
    processor.onEnd(span({}))
    expect(processor.dropped.queue_full).toBe(4)
    const flushed = processor.forceFlush()
    answers[1]!(true)
    await flushed
    expect(processor.dropped).toEqual({ queue_full: 4, export_failed: 4, export_timeout: 0 })
  })

  it("an unsampled span is not exported", async () => {
    const sent: Array<number> = []
    const processor = OtlpSpans.make({
      encoding: "protobuf",
      resource,
      scope,
      bounds,
      send: (_body, spans) => {
        sent.push(spans)
        return Promise.resolve(true)
      }
    })
    processor.onEnd(
      span({ ids: { traceId: "0af7651916cd43dd8448eb211c80319c", spanId: "b7ad6b7169203331", traceFlags: 0 } })
    )
    await processor.forceFlush()
    expect(sent).toEqual([])
  })
})
