/**
 * Corral's tracer records spans itself and hands finished ones to the SDK's processor: what an exporter receives
 * must be what the SDK's own spans would have carried — ids and parents, the sampler's decision for roots (and its
 * attributes), the exception of a failure, the event limit — since the SDK's tracer is no longer in between.
 */
import { describe, expect, it } from "@effect/vitest"
import * as api from "@opentelemetry/api"
import { resourceFromAttributes } from "@opentelemetry/resources"
import type { Sampler } from "@opentelemetry/sdk-trace-base"
import { InMemorySpanExporter, SamplingDecision, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Deferred, Effect, Fiber, Layer } from "effect"
import * as Spans from "../../src/telemetry/Spans.js"
import * as SpanTracer from "../../src/telemetry/SpanTracer.js"

/** A sampler keeping the traces whose burst is named in `keep`, adding an attribute, and counting its calls. */
const choosing = (keep: ReadonlySet<string>) => {
  const asked: Array<string> = []
  const sampler: Sampler = {
    shouldSample: (_context, _traceId, name) => {
      asked.push(name)
      return keep.has(name)
        ? { decision: SamplingDecision.RECORD_AND_SAMPLED, attributes: { "sampler.rule": "kept" } }
        : { decision: SamplingDecision.NOT_RECORD }
    },
    toString: () => "choosing"
  }
  return { asked, sampler }
}

const traced = (sampler: Sampler) => {
  const exporter = new InMemorySpanExporter()
  const layer = Layer.setTracer(SpanTracer.make({
    api,
    processor: new SimpleSpanProcessor(exporter),
    resource: resourceFromAttributes({ "service.name": "span-tracer-test" }),
    sampler
  }))
  return { exporter, layer }
}

const leaf = { leaf: true } as const

describe("SpanTracer", () => {
  it.effect("a kept root asks the sampler once; its children share its trace, name their parent, carry the resource", () => {
    const { asked, sampler } = choosing(new Set(["burst"]))
    const { exporter, layer } = traced(sampler)
    return Effect.gen(function*() {
      yield* Effect.void.pipe(
        Spans.span(() => "attempt", () => ({ "corral.attempt": 1 }), "client", leaf),
        Spans.span(() => "call", () => ({ "gen_ai.request.model": "m" }), "client", leaf),
        Spans.span(() => "burst", () => ({ "gen_ai.operation.name": "invoke_agent" }))
      )
      const spans = exporter.getFinishedSpans()
      expect(asked).toEqual(["burst"])
      const byName = new Map(spans.map((s) => [s.name, s]))
      const burst = byName.get("burst")!
      const call = byName.get("call")!
      const attempt = byName.get("attempt")!
      expect(burst.attributes).toEqual({ "gen_ai.operation.name": "invoke_agent", "sampler.rule": "kept" })
      expect(burst.parentSpanContext).toBeUndefined()
      expect(call.parentSpanContext?.spanId).toBe(burst.spanContext().spanId)
      expect(attempt.parentSpanContext?.spanId).toBe(call.spanContext().spanId)
      expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1)
      expect(burst.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/)
      expect(new Set(spans.map((s) => s.spanContext().spanId)).size).toBe(3)
      for (const s of spans) {
        expect(s.spanContext().spanId).toMatch(/^[0-9a-f]{16}$/)
        expect(s.resource.attributes["service.name"]).toBe("span-tracer-test")
        expect(s.ended).toBe(true)
        expect(s.status.code).toBe(api.SpanStatusCode.OK)
      }
      expect(call.kind).toBe(api.SpanKind.CLIENT)
      expect(burst.kind).toBe(api.SpanKind.INTERNAL)
    }).pipe(Effect.provide(layer))
  })

  it.effect("a dropped root exports nothing and its children never reach the sampler", () => {
    const { asked, sampler } = choosing(new Set())
    const { exporter, layer } = traced(sampler)
    return Effect.gen(function*() {
      yield* Effect.void.pipe(
        Spans.span(() => "call", () => ({}), "client", leaf),
        Spans.span(() => "burst", () => ({}))
      )
      expect(asked).toEqual(["burst"])
      expect(exporter.getFinishedSpans()).toEqual([])
    }).pipe(Effect.provide(layer))
  })

  it.effect("a failure marks the span ERROR with the message and records the exception event", () => {
    const { sampler } = choosing(new Set(["burst"]))
    const { exporter, layer } = traced(sampler)
    return Effect.gen(function*() {
      yield* Effect.fail(new Error("provider refused")).pipe(
        Spans.span(() => "burst", () => ({})),
        Effect.either
      )
      const [span] = exporter.getFinishedSpans()
      expect(span!.status).toEqual({ code: api.SpanStatusCode.ERROR, message: "provider refused" })
      expect(span!.events.map((e) => [e.name, e.attributes?.["exception.message"]])).toEqual([
        ["exception", "provider refused"]
      ])
    }).pipe(Effect.provide(layer))
  })

  it.effect("events past 128 drop the oldest and are counted, as the SDK's limit does", () => {
    const { sampler } = choosing(new Set(["burst"]))
    const { exporter, layer } = traced(sampler)
    return Effect.gen(function*() {
      yield* Effect.forEach(Array.from({ length: 130 }, (_, i) => i), (i) => Spans.event(`e${i}`, 1_000 + i, {}), {
        discard: true
      }).pipe(Spans.span(() => "burst", () => ({})))
      const [span] = exporter.getFinishedSpans()
      expect(span!.events).toHaveLength(128)
      expect(span!.events[0]!.name).toBe("e2")
      expect(span!.events[0]!.time).toEqual([1, 2_000_000])
      expect(span!.droppedEventsCount).toBe(2)
    }).pipe(Effect.provide(layer))
  })

  it.live("an attempt interrupted inside its call is ended as interrupted by the call's region: no span left open", () => {
    const { sampler } = choosing(new Set(["chat m"]))
    const { exporter, layer } = traced(sampler)
    const inner = { leaf: true, inner: true } as const
    return Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const fiber = yield* Deferred.succeed(started, undefined).pipe(
        Effect.zipRight(Effect.never),
        Spans.span(() => "chat.attempt m", () => ({ "corral.attempt": 1 }), "client", inner),
        // A first attempt that ends normally: the second one is the interrupted one.
        (second) =>
          Effect.zipRight(
            Effect.void.pipe(Spans.span(() => "chat.attempt m", () => ({ "corral.attempt": 0 }), "client", inner)),
            second
          ),
        Spans.span(() => "chat m", () => ({}), "client", leaf),
        Effect.fork
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      const spans = exporter.getFinishedSpans()
      expect(spans.map((s) => [s.name, s.attributes["corral.attempt"], s.attributes["status.interrupted"]])).toEqual([
        ["chat.attempt m", 0, undefined],
        ["chat.attempt m", 1, true],
        ["chat m", undefined, true]
      ])
      const call = spans[2]!
      expect(spans[1]!.parentSpanContext?.spanId).toBe(call.spanContext().spanId)
      expect(spans[1]!.endTime[0] * 1e9 + spans[1]!.endTime[1]).toBeLessThanOrEqual(
        call.endTime[0] * 1e9 + call.endTime[1]
      )
    }).pipe(Effect.provide(layer))
  })

  it.live("an inner span on a fiber forked inside the call keeps a region of its own (interrupting the fork ends it)", () => {
    const { sampler } = choosing(new Set(["chat m"]))
    const { exporter, layer } = traced(sampler)
    const inner = { leaf: true, inner: true } as const
    return Effect.gen(function*() {
      yield* Effect.gen(function*() {
        const started = yield* Deferred.make<void>()
        const child = yield* Deferred.succeed(started, undefined).pipe(
          Effect.zipRight(Effect.never),
          Spans.span(() => "chat.attempt m", () => ({}), "client", inner),
          Effect.fork
        )
        yield* Deferred.await(started)
        yield* Fiber.interrupt(child)
        // The call goes on after its forked attempt was interrupted: the attempt is already ended.
        expect(exporter.getFinishedSpans().map((s) => [s.name, s.attributes["status.interrupted"]])).toEqual([
          ["chat.attempt m", true]
        ])
      }).pipe(Spans.span(() => "chat m", () => ({}), "client", leaf))
      expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(["chat.attempt m", "chat m"])
    }).pipe(Effect.provide(layer))
  })

  it.live("a span over the whole run of its fiber ends with that fiber: run through, or interrupted mid-call", () => {
    const { sampler } = choosing(new Set(["chat m"]))
    const { exporter, layer } = traced(sampler)
    const whole = { leaf: true, wholeFiber: true } as const
    const inner = { leaf: true, inner: true } as const
    return Effect.gen(function*() {
      yield* Effect.gen(function*() {
        // Run to its end without suspending: ended as the fiber's run ends, before the caller goes on.
        yield* Effect.succeed("ok").pipe(Spans.span(() => "execute_tool a", () => ({}), "internal", whole), Effect.fork)
        const started = yield* Deferred.make<void>()
        const fiber = yield* Deferred.succeed(started, undefined).pipe(
          Effect.zipRight(Effect.never),
          Spans.span(() => "mcp.call b", () => ({}), "client", inner),
          Spans.span(() => "execute_tool b", () => ({}), "internal", whole),
          Effect.fork
        )
        yield* Deferred.await(started)
        yield* Fiber.interrupt(fiber)
        // The fiber ended interrupted: its span, and the inner one it was interrupted in, are ended as interrupted.
        expect(exporter.getFinishedSpans().map((s) => [s.name, s.attributes["status.interrupted"]])).toEqual([
          ["execute_tool a", undefined],
          ["mcp.call b", true],
          ["execute_tool b", true]
        ])
      }).pipe(Spans.span(() => "chat m", () => ({}), "client", leaf))
      const spans = exporter.getFinishedSpans()
      const parent = spans.find((s) => s.name === "chat m")!.spanContext().spanId
      expect(spans.filter((s) => s.name.startsWith("execute_tool")).map((s) => s.parentSpanContext?.spanId))
        .toEqual([parent, parent])
    }).pipe(Effect.provide(layer))
  })

  it.live("a call on a guarded fiber rides the fiber's end: interrupted inside an attempt, both end as interrupted", () => {
    const { sampler } = choosing(new Set(["invoke_agent a"]))
    const { exporter, layer } = traced(sampler)
    const inner = { leaf: true, inner: true } as const
    return Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      yield* Effect.gen(function*() {
        // The loop of a burst raced against its cancel signal: a fiber of its own, guarded.
        const loop = yield* Deferred.succeed(started, undefined).pipe(
          Effect.zipRight(Effect.never),
          Spans.span(() => "chat.attempt m", () => ({}), "client", inner),
          Spans.span(() => "chat m", () => ({}), "client", inner),
          (call) => Effect.zipRight(Effect.void.pipe(Spans.span(() => "chat m", () => ({}), "client", inner)), call),
          Spans.guardFiber,
          Effect.fork
        )
        yield* Deferred.await(started)
        yield* Fiber.interrupt(loop)
        expect(exporter.getFinishedSpans().map((s) => [s.name, s.attributes["status.interrupted"]])).toEqual([
          ["chat m", undefined],
          ["chat.attempt m", true],
          ["chat m", true]
        ])
      }).pipe(Spans.span(() => "invoke_agent a", () => ({}), "internal", leaf))
      const spans = exporter.getFinishedSpans()
      const [first, attempt, call, burst] = spans
      expect(burst!.name).toBe("invoke_agent a")
      expect([first, call].map((s) => s!.parentSpanContext?.spanId)).toEqual([
        burst!.spanContext().spanId,
        burst!.spanContext().spanId
      ])
      expect(attempt!.parentSpanContext?.spanId).toBe(call!.spanContext().spanId)
    }).pipe(Effect.provide(layer))
  })
})
