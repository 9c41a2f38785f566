/**
 * What one traced turn costs in spans alone: the span pattern of a turn of scenario A (`chat` > `chat.attempt`, two
 * `execute_tool`, all under one `invoke_agent` per 11 turns, with the attributes and annotations Corral sets), run
 * through `Spans.span` with telemetry off, over @effect/opentelemetry's tracer (what Corral installed before
 * `SpanTracer`), and over `SpanTracer` sampled and unsampled, all against one SDK tracer provider batching to an
 * exporter that drops everything, and through Corral's own exporter path (`OtlpSpans`, protobuf and JSON, to a
 * collector that takes everything). Variants alternate in rounds inside one process, CPU time per turn is reported
 * as the median over rounds.
 *
 * Usage: `node --expose-gc --import tsx scripts/bench/spans.ts [--rounds 12] [--turns 2000] [--only off,SpanTracer]`.
 */
import * as OtelResource from "@effect/opentelemetry/Resource"
import * as OtelTracer from "@effect/opentelemetry/Tracer"
import * as api from "@opentelemetry/api"
import { resourceFromAttributes } from "@opentelemetry/resources"
import type { ReadableSpan, SpanExporter } from "@opentelemetry/sdk-trace-base"
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor
} from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, ManagedRuntime, Tracer as EffectTracer } from "effect"
import * as OtlpSpans from "../../src/telemetry/OtlpSpans.js"
import * as Spans from "../../src/telemetry/Spans.js"
import * as SpanTracer from "../../src/telemetry/SpanTracer.js"

const flag = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`)
  return i === -1 ? fallback : Number(process.argv[i + 1])
}
const rounds = flag("rounds", 12)
const turns = flag("turns", 2000)

let exported = 0
const drop: SpanExporter = {
  export: (spans: Array<ReadableSpan>, done) => {
    exported += spans.length
    done({ code: 0 })
  },
  shutdown: () => Promise.resolve()
}
const processor = () => new BatchSpanProcessor(drop, { maxQueueSize: 100_000, maxExportBatchSize: 2048 })
const resource = resourceFromAttributes({ "service.name": "bench" })
// Corral's exporter path (telemetry/OtlpSpans) with a collector that takes everything at once.
let encodedBytes = 0
const encoding = (encoding: "protobuf" | "json") =>
  OtlpSpans.make({
    encoding,
    resource,
    scope: SpanTracer.scope,
    bounds: { maxQueueSize: 100_000, maxExportBatchSize: 2048, scheduleDelayMs: 5000, exportTimeoutMs: 30_000 },
    send: (body, spans) => {
      exported += spans
      encodedBytes += body.length
      return Promise.resolve(true)
    }
  })
const sampled = new BasicTracerProvider({ spanProcessors: [processor()] })

const turn = Effect.gen(function*() {
  yield* Effect.void.pipe(
    Effect.zipRight(Spans.annotate(() => ({ "gen_ai.response.model": "m", "gen_ai.usage.input_tokens": 10 }))),
    Spans.span(
      () => "chat.attempt m",
      () => ({
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
        "corral.provider": "p",
        "corral.attempt": 1
      }),
      "client",
      { leaf: true }
    ),
    Effect.zipRight(Spans.annotate(() => ({ "corral.attempts": 1, "corral.retries": 0, "corral.failovers": 0 }))),
    Spans.span(() => "chat m", () => ({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": "m"
    }), "client")
  )
  yield* Effect.forEach([1, 2], (i) =>
    Effect.void.pipe(
      Effect.zipRight(Spans.annotate(() => ({ "corral.tool.duration_ms": 0, "corral.tool.result_bytes": 10 }))),
      Spans.span(
        () => "execute_tool echo",
        () => ({
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "echo",
          "gen_ai.tool.call.id": `call_${i}`,
          "corral.tool.server": "core"
        }),
        "internal",
        { leaf: true }
      )
    ), { concurrency: "unbounded", discard: true })
})

const burst = (n: number) =>
  Effect.repeatN(turn, n - 1).pipe(
    Spans.span(() => "invoke_agent bench", () => ({ "gen_ai.operation.name": "invoke_agent", "corral.tier": "t" }))
  )

const work = Effect.forEach(Array.from({ length: Math.ceil(turns / 11) }), () => burst(11), { discard: true })

const variants: Record<string, Layer.Layer<never>> = {
  off: Layer.setTracerEnabled(false),
  "effect-opentelemetry": Layer.unwrapEffect(
    Effect.map(OtelTracer.make, (t) => Layer.setTracer(EffectTracer.make({ span: t.span, context: (f) => f() })))
  ).pipe(
    Layer.provide(Layer.succeed(OtelTracer.OtelTracer, sampled.getTracer("bench"))),
    Layer.provide(OtelResource.layer({ serviceName: "bench" }))
  ),
  // Effect's part alone: spans that do nothing, propagated like any other.
  "no-op spans": Layer.setTracer(EffectTracer.make({
    span: (name, parent, context, links, startTime, kind) => ({
      _tag: "Span",
      name,
      spanId: "s",
      traceId: "t",
      parent,
      context,
      status: { _tag: "Started", startTime },
      attributes: new Map(),
      links,
      sampled: true,
      kind,
      end: () => {},
      attribute: () => {},
      event: () => {},
      addLinks: () => {}
    }),
    context: (f) => f()
  })),
  SpanTracer: Layer.setTracer(
    SpanTracer.make({ api, processor: processor(), resource, sampler: new AlwaysOnSampler() })
  ),
  "SpanTracer + OtlpSpans protobuf": Layer.setTracer(
    SpanTracer.make({ api, processor: encoding("protobuf"), resource, sampler: new AlwaysOnSampler() })
  ),
  "SpanTracer + OtlpSpans json": Layer.setTracer(
    SpanTracer.make({ api, processor: encoding("json"), resource, sampler: new AlwaysOnSampler() })
  ),
  // Making the spans alone: the processor drops each one as it ends.
  "SpanTracer no export": Layer.setTracer(
    SpanTracer.make({ api, processor: { onEnd: () => {} }, resource, sampler: new AlwaysOnSampler() })
  ),
  "SpanTracer always_off": Layer.setTracer(
    SpanTracer.make({ api, processor: processor(), resource, sampler: new AlwaysOffSampler() })
  )
}

const main = async () => {
  const only = process.argv.indexOf("--only")
  const chosen = only === -1 ? Object.keys(variants) : process.argv[only + 1]!.split(",")
  const runtimes = Object.entries(variants).filter(([name]) => chosen.includes(name)).map(([name, layer]) =>
    [name, ManagedRuntime.make(layer)] as const
  )
  const results = new Map<string, Array<number>>()
  for (let r = 0; r < rounds + 1; r++) {
    for (const [name, runtime] of runtimes) {
      globalThis.gc?.()
      const cpu = process.cpuUsage()
      await runtime.runPromise(work)
      const spent = process.cpuUsage(cpu)
      // The first round warms up every variant.
      if (r > 0) results.set(name, [...(results.get(name) ?? []), (spent.user + spent.system) / turns])
      await sampled.forceFlush()
    }
  }
  const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const off = results.has("off") ? median(results.get("off")!) : 0
  for (const [name, xs] of results) {
    const m = median(xs)
    process.stdout.write(
      `${name.padEnd(26)} ${m.toFixed(1).padStart(7)} µs CPU/turn  (+${(m - off).toFixed(1)} over off; ` +
        `min ${Math.min(...xs).toFixed(1)}, max ${Math.max(...xs).toFixed(1)})\n`
    )
  }
  process.stdout.write(`spans exported: ${exported} (OtlpSpans: ${encodedBytes} bytes encoded)\n`)
  await Promise.all(runtimes.map(([, r]) => r.dispose()))
}

void main()
