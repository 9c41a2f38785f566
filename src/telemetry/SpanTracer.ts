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
import type * as OtlpEncoding from "./internal/otlpEncoding.js"

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
const hrTimeOf = (n: number): OtelApi.HrTime => {
  const seconds = Math.floor(n / 1e9)
  return [seconds, Math.max(0, Math.min(999_999_999, Math.round(n - seconds * 1e9)))]
}
const hrTime = (nanos: bigint): OtelApi.HrTime => hrTimeOf(Number(nanos))

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

/**
 * Attributes held as two parallel arrays (key i has value i), the way the encoder reads them: no object whose shape
 * grows property by property per span, and no `for…in` over objects of many shapes when the span is encoded.
 */
export interface AttributeArrays {
  readonly keys: Array<string>
  readonly values: Array<OtelApi.AttributeValue>
}

/** Appends `attributes` (`undefined` values left out, the rest converted) to `into`, up to `maxAttributes`. */
const append = (into: AttributeArrays, attributes: Readonly<Record<string, unknown>>): number => {
  let dropped = 0
  for (const key in attributes) {
    const value = attributes[key]
    if (value === undefined) continue
    const at = into.keys.indexOf(key)
    if (at >= 0) into.values[at] = attributeValue(value)
    else if (into.keys.length >= maxAttributes) dropped++
    else {
      into.keys.push(key)
      into.values.push(attributeValue(value))
    }
  }
  return dropped
}

/** The object form of attribute arrays (what the SDK's `ReadableSpan.attributes` is). */
const objectOf = (arrays: AttributeArrays): OtelApi.Attributes => {
  const out: OtelApi.Attributes = {}
  for (let i = 0; i < arrays.keys.length; i++) out[arrays.keys[i]!] = arrays.values[i]
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
  private readonly startNanos: number
  private readonly otelAttributes: AttributeArrays
  private readonly otelLinks: Array<OtelApi.Link>
  private events: Array<TimedEvent> | undefined = undefined
  private droppedAttributes: number
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
    attributes: AttributeArrays,
    dropped: number
  ) {
    this.spanId = ids.spanId
    this.traceId = ids.traceId
    this.sampled = (ids.traceFlags & 1) === 1
    this.links = links.length === 0 ? [] : links.slice()
    this.otelLinks = links.length === 0
      ? []
      : links.map((l) => ({ context: contextOf(l.span), attributes: attributesOf(l.attributes) }))
    this.otelKind = kinds[kind]
    this.startNanos = Number(startTime)
    this.status = { _tag: "Started", startTime }
    this.otelAttributes = attributes
    this.droppedAttributes = dropped
  }

  /** Its ids, as OpenTelemetry writes them (a child's trace id, flags and state come from here). */
  spanContext(): OtelApi.SpanContext {
    return this.ids
  }

  attribute(key: string, value: unknown): void {
    if (!this.sampled || this.status._tag === "Ended") return
    const { keys, values } = this.otelAttributes
    const at = keys.indexOf(key)
    if (at >= 0) values[at] = attributeValue(value)
    else if (keys.length >= maxAttributes) this.droppedAttributes++
    else {
      keys.push(key)
      values.push(attributeValue(value))
    }
  }

  /** Sets every defined attribute of `attributes` (one call for an annotation of many). */
  annotate(attributes: Readonly<Record<string, unknown>>): void {
    if (!this.sampled || this.status._tag === "Ended") return
    this.droppedAttributes += append(this.otelAttributes, attributes)
  }

  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    if (!this.sampled || this.status._tag === "Ended") return
    this.record(name, hrTime(startTime), attributes === undefined ? {} : attributesOf(attributes))
  }

  private record(name: string, time: OtelApi.HrTime, attributes: OtelApi.Attributes): void {
    const events = this.events ??= []
    if (events.length >= maxEvents) {
      events.shift()
      this.droppedEvents++
    }
    events.push({ name, time, attributes, droppedAttributesCount: 0 })
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
    let status: OtelApi.SpanStatus = ok
    if (exit._tag === "Failure") {
      if (Cause.isInterruptedOnly(exit.cause)) this.attribute("status.interrupted", true)
      else {
        const first = Cause.prettyErrors(exit.cause)[0]
        if (first !== undefined) {
          this.record("exception", hrTime(endTime), exceptionAttributes(first))
          status = { code: ERROR, message: first.message }
        }
      }
    }
    this.status = { _tag: "Ended", startTime, endTime, exit }
    this.pipeline.processor.onEnd(
      new Finished(
        this.name,
        this.otelKind,
        this.ids,
        this.parentIds,
        this.startNanos,
        Number(endTime),
        status,
        this.otelAttributes,
        this.otelLinks,
        this.events ?? noEvents,
        this.pipeline.resource,
        this.droppedAttributes,
        this.droppedEvents
      )
    )
  }
}

const ok: OtelApi.SpanStatus = { code: OK }
const noEvents: Array<TimedEvent> = []

/**
 * A finished span as the SDK's processors and exporters read it (one shape for every span). Corral's encoder
 * (`internal/otlpEncoding`) reads the attribute arrays and the epoch nanoseconds directly; the SDK's `attributes`,
 * `startTime`, `endTime` and `duration` are made only when something else asks for them.
 */
class Finished implements ReadableSpan, OtlpEncoding.Compact {
  readonly ended = true
  readonly instrumentationScope = scope
  readonly droppedLinksCount = 0
  readonly parentSpanContext?: OtelApi.SpanContext
  private madeAttributes: OtelApi.Attributes | undefined = undefined
  constructor(
    readonly name: string,
    readonly kind: OtelApi.SpanKind,
    private readonly ids: OtelApi.SpanContext,
    parent: OtelApi.SpanContext | undefined,
    readonly startNanos: number,
    readonly endNanos: number,
    readonly status: OtelApi.SpanStatus,
    readonly attributeArrays: AttributeArrays,
    readonly links: Array<OtelApi.Link>,
    readonly events: Array<TimedEvent>,
    readonly resource: Resource,
    readonly droppedAttributesCount: number,
    readonly droppedEventsCount: number
  ) {
    if (parent !== undefined) this.parentSpanContext = parent
  }
  spanContext(): OtelApi.SpanContext {
    return this.ids
  }
  get attributes(): OtelApi.Attributes {
    return this.madeAttributes ??= objectOf(this.attributeArrays)
  }
  get startTime(): OtelApi.HrTime {
    return hrTimeOf(this.startNanos)
  }
  get endTime(): OtelApi.HrTime {
    return hrTimeOf(this.endNanos)
  }
  get duration(): OtelApi.HrTime {
    return hrTimeOf(Math.max(0, this.endNanos - this.startNanos))
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
    attributes: Readonly<Record<string, unknown>>
  ): RecordedSpan => {
    const spanId = randomHex(8)
    const local = parent._tag === "Some" && parent.value instanceof RecordedSpan ? parent.value : undefined
    const arrays: AttributeArrays = { keys: [], values: [] }
    if (local !== undefined) {
      // A local parent's decision is its children's (see the module header).
      const of = local.spanContext()
      const ids: OtelApi.SpanContext = of.traceState === undefined
        ? { traceId: of.traceId, spanId, traceFlags: of.traceFlags }
        : { traceId: of.traceId, spanId, traceFlags: of.traceFlags, traceState: of.traceState }
      const dropped = local.sampled ? append(arrays, attributes) : 0
      return new RecordedSpan(pipeline, name, parent, context, links, startTime, kind, ids, of, arrays, dropped)
    }
    const remote = parent._tag === "Some" ? contextOf(parent.value) : undefined
    const traceId = remote?.traceId ?? randomHex(16)
    const parentContext = remote === undefined
      ? pipeline.api.ROOT_CONTEXT
      : pipeline.api.trace.setSpanContext(pipeline.api.ROOT_CONTEXT, remote)
    const otelLinks = links.map((l) => ({ context: contextOf(l.span), attributes: attributesOf(l.attributes) }))
    const converted = attributesOf(attributes)
    const decision = pipeline.sampler.shouldSample(parentContext, traceId, name, kinds[kind], converted, otelLinks)
    const sampled = decision.decision === RECORD_AND_SAMPLED
    const traceState = decision.traceState ?? remote?.traceState
    const ids: OtelApi.SpanContext = traceState === undefined
      ? { traceId, spanId, traceFlags: sampled ? 1 : 0 }
      : { traceId, spanId, traceFlags: sampled ? 1 : 0, traceState }
    let dropped = 0
    if (sampled) {
      dropped = append(arrays, converted)
      if (decision.attributes !== undefined) dropped += append(arrays, decision.attributes)
    }
    return new RecordedSpan(pipeline, name, parent, context, links, startTime, kind, ids, remote, arrays, dropped)
  }
  const made = EffectTracer.make({
    span: (name, parent, context, links, startTime, kind) => open(name, parent, context, links, startTime, kind, {}),
    context: nativeContext
  })
  starts.set(made, (name, parent, kind, attributes, startTime) => {
    if (parent._tag === "Some" && parent.value instanceof RecordedSpan && !parent.value.sampled) return parent.value
    return open(name(), parent, emptyContext, noLinks, startTime, kind, attributes())
  })
  return made
}

/** Sets every defined attribute of `attributes` on `span` in one call when it is one of Corral's spans. */
export const annotate = (span: EffectTracer.Span, attributes: Readonly<Record<string, unknown>>): boolean => {
  if (!(span instanceof RecordedSpan)) return false
  span.annotate(attributes)
  return true
}
