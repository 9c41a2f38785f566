/**
 * SpanTracer — Corral's Effect `Tracer`: each Effect span records itself and, when it ends, goes to the OpenTelemetry
 * SDK's span processor (batching, export) as a finished `ReadableSpan`, with nothing in between.
 *
 * Prevents telemetry from costing more than the work it watches. @effect/opentelemetry's tracer (measured in
 * docs/benchmarks.md, "Telemetry cost") wraps every SDK span in a second object that keeps a copy of every
 * attribute, converts each attribute on its own, builds a fresh OpenTelemetry context for every parent lookup, and
 * makes an SDK span even for the children of a span the sampler dropped; the SDK's own tracer then looks the parent
 * up in that context, sanitises the attributes twice, reads two clocks, counts itself in metrics and checks limits
 * on every attribute. Here:
 *
 * - a span's attributes arrive in one object when it starts (`start`, used by `Spans.span`), converted once;
 * - the sampler is asked for a root span (and one under a remote parent) only: **a child of a local span has that
 *   span's decision**. Every standard sampler (`always_*`, `traceidratio` — the trace id is the trace's — and every
 *   `parentbased_*`) decides so, so nothing changes but the cost;
 * - **a child of a span that is not sampled is that same span**: no ids, no allocation, and attributes and events
 *   on an unsampled span are not even converted — with `always_off` or a ratio a dropped burst costs one sampler
 *   call for the burst and nearly nothing for its model and tool calls;
 * - ids come from the shared pool of CSPRNG bytes (`internal/randomPool`); times are the Effect clock's.
 *
 * The span limits are the SDK's defaults (128 attributes, 128 events — the oldest dropped and counted — per span).
 * An embedder's own tracer keeps working: `Spans.span` falls back to `Tracer.span` for any other tracer.
 */
import type * as OtelApi from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import type { ReadableSpan, Sampler, SpanProcessor, TimedEvent } from "@opentelemetry/sdk-trace-base"
import type { Exit, Option } from "effect"
import { Cause, Context, DefaultServices, Tracer as EffectTracer } from "effect"
import * as RandomPool from "../internal/randomPool.js"

/** The parts of @opentelemetry/api the tracer uses (passed in: the API is loaded only when telemetry is on). */
export interface Api {
  readonly trace: Pick<typeof OtelApi.trace, "setSpanContext">
  readonly ROOT_CONTEXT: OtelApi.Context
}

/** Where finished spans go and how roots are sampled. */
export interface Pipeline {
  readonly api: Api
  /** Receives every finished sampled span (`onEnd`): the SDK's batch or simple processor. */
  readonly processor: Pick<SpanProcessor, "onEnd">
  /** The resource every span carries (service name and attributes). */
  readonly resource: Resource
  /** Decides for root spans and spans under a remote parent. */
  readonly sampler: Sampler
}

/** OpenTelemetry's `SpanKind` values (a numeric enum of the API). */
const kinds: Readonly<Record<EffectTracer.SpanKind, number>> = {
  internal: 0,
  server: 1,
  client: 2,
  producer: 3,
  consumer: 4
}
const OK = 1
const ERROR = 2
const RECORD_AND_SAMPLED = 2
const noAttributes: ReadonlyMap<string, unknown> = new Map()
const emptyContext: Context.Context<never> = Context.empty()
const noLinks: ReadonlyArray<EffectTracer.SpanLink> = []
const maxAttributes = 128
const maxEvents = 128
/** The instrumentation scope of every span Corral makes. */
export const scope: { readonly name: string } = { name: "corral" }

/**
 * Epoch nanoseconds as OpenTelemetry's `[seconds, nanoseconds]`, in floating point (exact to 256 ns at today's
 * epoch, finer than the clocks that stamp spans): BigInt division allocates, and this runs three times per span.
 */
const hrTime = (nanos: bigint): OtelApi.HrTime => {
  const n = Number(nanos)
  const seconds = Math.floor(n / 1e9)
  return [seconds, Math.max(0, Math.min(999_999_999, Math.round(n - seconds * 1e9)))]
}

// Random ids (the shared pool of CSPRNG bytes, not a random source per id).
const zeros: Readonly<Record<number, string>> = { 8: "0".repeat(16), 16: "0".repeat(32) }
const randomHex = (bytes: number): string => {
  for (;;) {
    const id = RandomPool.hex(bytes)
    // An all-zero id is invalid in W3C trace context (odds 2⁻⁶⁴): draw again.
    if (id !== zeros[bytes]) return id
  }
}

/** An Effect attribute value as an OpenTelemetry one (arrays of primitives as they are, anything else as text). */
const attributeValue = (value: unknown): OtelApi.AttributeValue => {
  switch (typeof value) {
    case "string":
    case "number":
    case "boolean":
      return value
    case "bigint":
      return Number(value)
    case "undefined":
      return "undefined"
    default:
      if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value as Array<string>
      if (value === null) return "null"
      try {
        return JSON.stringify(value)
      } catch {
        return String(value)
      }
  }
}

/** Attributes for OpenTelemetry: `undefined` values left out, the rest converted. */
export const attributesOf = (attributes: Readonly<Record<string, unknown>>): OtelApi.Attributes => {
  const out: OtelApi.Attributes = {}
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) out[key] = attributeValue(value)
  }
  return out
}

/** One span behind Effect's `Span` interface; a sampled one goes to the processor as a `ReadableSpan` when it ends. */
class RecordedSpan implements EffectTracer.Span {
  readonly _tag = "Span"
  readonly spanId: string
  readonly traceId: string
  readonly sampled: boolean
  /** Not kept here (see `otelAttributes`); Effect reads this map only for its own console tracer. */
  readonly attributes = noAttributes
  readonly links: Array<EffectTracer.SpanLink>
  status: EffectTracer.SpanStatus
  private readonly otelKind: OtelApi.SpanKind
  private readonly startHr: OtelApi.HrTime
  private readonly otelAttributes: OtelApi.Attributes
  private readonly otelLinks: Array<OtelApi.Link>
  private readonly events: Array<TimedEvent> = []
  private attributeCount: number
  private droppedAttributes = 0
  private droppedEvents = 0

  constructor(
    private readonly pipeline: Pipeline,
    readonly name: string,
    readonly parent: Option.Option<EffectTracer.AnySpan>,
    readonly context: Context.Context<never>,
    links: ReadonlyArray<EffectTracer.SpanLink>,
    startTime: bigint,
    readonly kind: EffectTracer.SpanKind,
    private readonly ids: OtelApi.SpanContext,
    private readonly parentIds: OtelApi.SpanContext | undefined,
    attributes: OtelApi.Attributes
  ) {
    this.spanId = ids.spanId
    this.traceId = ids.traceId
    this.sampled = (ids.traceFlags & 1) === 1
    this.links = links.slice()
    this.otelLinks = links.map((l) => ({ context: contextOf(l.span), attributes: attributesOf(l.attributes) }))
    this.otelKind = kinds[kind]
    this.startHr = hrTime(startTime)
    this.status = { _tag: "Started", startTime }
    this.otelAttributes = attributes
    this.attributeCount = Object.keys(attributes).length
  }

  /** Its ids, as OpenTelemetry writes them (a child's trace id, flags and state come from here). */
  spanContext(): OtelApi.SpanContext {
    return this.ids
  }

  attribute(key: string, value: unknown): void {
    if (!this.sampled || this.status._tag === "Ended") return
    if (!(key in this.otelAttributes)) {
      if (this.attributeCount >= maxAttributes) {
        this.droppedAttributes++
        return
      }
      this.attributeCount++
    }
    this.otelAttributes[key] = attributeValue(value)
  }

  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    if (!this.sampled || this.status._tag === "Ended") return
    this.record(name, hrTime(startTime), attributes === undefined ? {} : attributesOf(attributes))
  }

  private record(name: string, time: OtelApi.HrTime, attributes: OtelApi.Attributes): void {
    if (this.events.length >= maxEvents) {
      this.events.shift()
      this.droppedEvents++
    }
    this.events.push({ name, time, attributes, droppedAttributesCount: 0 })
  }

  addLinks(links: ReadonlyArray<EffectTracer.SpanLink>): void {
    this.links.push(...links)
    if (this.sampled) {
      for (const l of links) this.otelLinks.push({ context: contextOf(l.span), attributes: attributesOf(l.attributes) })
    }
  }

  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (this.status._tag === "Ended") return
    const startTime = this.status.startTime
    if (!this.sampled) {
      this.status = { _tag: "Ended", startTime, endTime, exit }
      return
    }
    const at = hrTime(endTime)
    let status: OtelApi.SpanStatus = { code: OK }
    if (exit._tag === "Failure") {
      if (Cause.isInterruptedOnly(exit.cause)) this.attribute("status.interrupted", true)
      else {
        const first = Cause.prettyErrors(exit.cause)[0]
        if (first !== undefined) {
          this.record("exception", at, exceptionAttributes(first))
          status = { code: ERROR, message: first.message }
        }
      }
    }
    this.status = { _tag: "Ended", startTime, endTime, exit }
    const span = new Finished(
      this.name,
      this.otelKind,
      this.ids,
      this.parentIds,
      this.startHr,
      at,
      status,
      this.otelAttributes,
      this.otelLinks,
      this.events,
      hrTime(endTime > startTime ? endTime - startTime : 0n),
      this.pipeline.resource,
      this.droppedAttributes,
      this.droppedEvents
    )
    this.pipeline.processor.onEnd(span)
  }
}

/** A finished span as the SDK's processors and exporters read it (one shape for every span). */
class Finished implements ReadableSpan {
  readonly ended = true
  readonly instrumentationScope = scope
  readonly droppedLinksCount = 0
  readonly parentSpanContext?: OtelApi.SpanContext
  constructor(
    readonly name: string,
    readonly kind: OtelApi.SpanKind,
    private readonly ids: OtelApi.SpanContext,
    parent: OtelApi.SpanContext | undefined,
    readonly startTime: OtelApi.HrTime,
    readonly endTime: OtelApi.HrTime,
    readonly status: OtelApi.SpanStatus,
    readonly attributes: OtelApi.Attributes,
    readonly links: Array<OtelApi.Link>,
    readonly events: Array<TimedEvent>,
    readonly duration: OtelApi.HrTime,
    readonly resource: Resource,
    readonly droppedAttributesCount: number,
    readonly droppedEventsCount: number
  ) {
    if (parent !== undefined) this.parentSpanContext = parent
  }
  spanContext(): OtelApi.SpanContext {
    return this.ids
  }
}

/** The `exception` event's attributes, as the SDK's `recordException` writes them. */
const exceptionAttributes = (error: Error): OtelApi.Attributes => {
  const out: OtelApi.Attributes = { "exception.type": error.name, "exception.message": error.message }
  if (error.stack !== undefined) out["exception.stacktrace"] = error.stack
  return out
}

const contextOf = (span: EffectTracer.AnySpan): OtelApi.SpanContext => ({
  traceId: span.traceId,
  spanId: span.spanId,
  traceFlags: span.sampled ? 1 : 0,
  isRemote: span._tag === "ExternalSpan"
})

/**
 * Starts a span named `name()` under `parent` with `attributes()`. Under a span that is not sampled it returns that
 * span (see the module header) without calling `name` or `attributes`.
 */
export type Start = (
  name: () => string,
  parent: Option.Option<EffectTracer.AnySpan>,
  kind: EffectTracer.SpanKind,
  attributes: () => Readonly<Record<string, unknown>>,
  startTime: bigint
) => EffectTracer.Span

/**
 * The `start` of each tracer `make` built, kept beside the tracer rather than on it: Effect's fiber calls
 * `tracer.context` around EVERY operation it runs, and a tracer of another shape than Effect's own (an extra
 * property, another `context` function) would make that call site polymorphic for the whole process.
 */
const starts = new WeakMap<EffectTracer.Tracer, Start>()

/** The `start` of `tracer` when it is one `make` built (Corral's tracer). */
export const startOf = (tracer: EffectTracer.Tracer): Start | undefined => starts.get(tracer)

/** Effect's own `context` (it runs `f`): shared so the per-operation call stays monomorphic (see `starts`). */
const nativeContext = Context.get(DefaultServices.liveServices, EffectTracer.Tracer).context

/** The tracer over `pipeline`; its `start` is `startOf(it)`. */
export const make = (pipeline: Pipeline): EffectTracer.Tracer => {
  const open = (
    name: string,
    parent: Option.Option<EffectTracer.AnySpan>,
    context: Context.Context<never>,
    links: ReadonlyArray<EffectTracer.SpanLink>,
    startTime: bigint,
    kind: EffectTracer.SpanKind,
    attributes: OtelApi.Attributes
  ): RecordedSpan => {
    const spanId = randomHex(8)
    const local = parent._tag === "Some" && parent.value instanceof RecordedSpan ? parent.value : undefined
    if (local !== undefined) {
      // A local parent's decision is its children's (see the module header).
      const of = local.spanContext()
      const ids: OtelApi.SpanContext = of.traceState === undefined
        ? { traceId: of.traceId, spanId, traceFlags: of.traceFlags }
        : { traceId: of.traceId, spanId, traceFlags: of.traceFlags, traceState: of.traceState }
      return new RecordedSpan(pipeline, name, parent, context, links, startTime, kind, ids, of, attributes)
    }
    const remote = parent._tag === "Some" ? contextOf(parent.value) : undefined
    const traceId = remote?.traceId ?? randomHex(16)
    const parentContext = remote === undefined
      ? pipeline.api.ROOT_CONTEXT
      : pipeline.api.trace.setSpanContext(pipeline.api.ROOT_CONTEXT, remote)
    const otelLinks = links.map((l) => ({ context: contextOf(l.span), attributes: attributesOf(l.attributes) }))
    const decision = pipeline.sampler.shouldSample(parentContext, traceId, name, kinds[kind], attributes, otelLinks)
    const sampled = decision.decision === RECORD_AND_SAMPLED
    const traceState = decision.traceState ?? remote?.traceState
    const ids: OtelApi.SpanContext = traceState === undefined
      ? { traceId, spanId, traceFlags: sampled ? 1 : 0 }
      : { traceId, spanId, traceFlags: sampled ? 1 : 0, traceState }
    const initial = sampled && decision.attributes !== undefined
      ? { ...attributes, ...attributesOf(decision.attributes) }
      : attributes
    return new RecordedSpan(pipeline, name, parent, context, links, startTime, kind, ids, remote, initial)
  }
  const made = EffectTracer.make({
    span: (name, parent, context, links, startTime, kind) => open(name, parent, context, links, startTime, kind, {}),
    context: nativeContext
  })
  starts.set(made, (name, parent, kind, attributes, startTime) => {
    if (parent._tag === "Some" && parent.value instanceof RecordedSpan && !parent.value.sampled) return parent.value
    return open(name(), parent, emptyContext, noLinks, startTime, kind, attributesOf(attributes()))
  })
  return made
}
