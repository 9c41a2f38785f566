/**
 * SpanTracer — Corral's Effect `Tracer`: each Effect span records itself and, when it ends, goes to the OpenTelemetry
 * SDK's span processor (batching, export) as a finished `ReadableSpan`, with nothing in between.
 *
 * Prevents telemetry from costing more than the work it watches. @effect/opentelemetry's tracer (measured in
 * docs/benchmarks.md at 09f4c1e, "Telemetry cost") wraps every SDK span in a second object that keeps a copy of every
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
 * - ids come from the shared pool of CSPRNG bytes (`internal/randomPool`); times are the Effect clock's, kept as
 *   epoch nanoseconds in a double (exact to 256 ns) — no BigInt per clock read on Corral's own path;
 * - **a span is its own finished record**: the attributes are two parallel arrays and Corral's exporter
 *   (`OtlpSpans`) encodes the span object itself when it ends; a `ReadableSpan` view is made only for any other
 *   SDK processor.
 *
 * The span limits are the SDK's defaults (128 attributes, 128 events — the oldest dropped and counted — per span).
 * An embedder's own tracer keeps working: `Spans.span` falls back to `Tracer.span` for any other tracer.
 */
import type * as OtelApi from "@opentelemetry/api"
import type { Resource } from "@opentelemetry/resources"
import type { ReadableSpan, Sampler, SpanProcessor, TimedEvent } from "@opentelemetry/sdk-trace-base"
import type { Option } from "effect"
import { Cause, Clock, Context, DefaultServices, Exit, FiberId, Tracer as EffectTracer } from "effect"
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
  /**
   * Receives every finished sampled span: as the span record itself (`onEndRecord`, Corral's exporter) when it
   * takes one, else as a `ReadableSpan` (`onEnd`: the SDK's batch or simple processor).
   */
  readonly processor: Pick<SpanProcessor, "onEnd"> & {
    readonly onEndRecord?: ((span: OtlpEncoding.SpanRecord) => void) | undefined
  }
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
const noOtelLinks: ReadonlyArray<OtelApi.Link> = []
const noEvents: ReadonlyArray<TimedEvent> = []
const maxAttributes = 128
const maxEvents = 128
/** The instrumentation scope of every span Corral makes. */
export const scope: { readonly name: string } = { name: "corral" }

/**
 * Epoch nanoseconds as OpenTelemetry's `[seconds, nanoseconds]`, in floating point (exact to 256 ns at today's
 * epoch, finer than the clocks that stamp spans): BigInt division allocates.
 */
const hrTimeOf = (n: number): OtelApi.HrTime => {
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

/** One span behind Effect's `Span` interface, and — sampled and ended — the record its exporter encodes. */
class RecordedSpan implements EffectTracer.Span, OtlpEncoding.SpanRecord {
  readonly _tag = "Span"
  readonly spanId: string
  readonly traceId: string
  readonly sampled: boolean
  /** Not kept here (see `attributeKeys`); Effect reads this map only for its own console tracer. */
  readonly attributes = noAttributes
  links: Array<EffectTracer.SpanLink> = noLinks as Array<EffectTracer.SpanLink>
  readonly spanKind: number
  endNanos = Number.NaN
  statusCode = OK
  statusMessage: string | undefined = undefined
  readonly attributeKeys: Array<string> = []
  readonly attributeValues: Array<OtelApi.AttributeValue> = []
  droppedAttributes = 0
  spanEvents: Array<TimedEvent> = noEvents as Array<TimedEvent>
  droppedEvents = 0
  spanLinks: Array<OtelApi.Link> = noOtelLinks as Array<OtelApi.Link>
  readonly droppedLinks = 0
  private exit: Exit.Exit<unknown, unknown> | undefined = undefined

  constructor(
    private readonly pipeline: Pipeline,
    readonly name: string,
    readonly parent: Option.Option<EffectTracer.AnySpan>,
    readonly context: Context.Context<never>,
    readonly startNanos: number,
    readonly kind: EffectTracer.SpanKind,
    readonly ids: OtelApi.SpanContext,
    readonly parentIds: OtelApi.SpanContext | undefined
  ) {
    this.spanId = ids.spanId
    this.traceId = ids.traceId
    this.sampled = (ids.traceFlags & 1) === 1
    this.spanKind = kinds[kind]
  }

  /** Effect's view of its state (made when asked: Corral's own path never asks). */
  get status(): EffectTracer.SpanStatus {
    const startTime = BigInt(Math.round(this.startNanos))
    return Number.isNaN(this.endNanos)
      ? { _tag: "Started", startTime }
      : { _tag: "Ended", startTime, endTime: BigInt(Math.round(this.endNanos)), exit: this.exit ?? Exit.void }
  }

  /** Its ids, as OpenTelemetry writes them (a child's trace id, flags and state come from here). */
  spanContext(): OtelApi.SpanContext {
    return this.ids
  }

  private get open(): boolean {
    return this.sampled && Number.isNaN(this.endNanos)
  }

  attribute(key: string, value: unknown): void {
    if (this.open) this.set(key, attributeValue(value))
  }

  private set(key: string, value: OtelApi.AttributeValue): void {
    const at = this.attributeKeys.indexOf(key)
    if (at >= 0) this.attributeValues[at] = value
    else if (this.attributeKeys.length >= maxAttributes) this.droppedAttributes++
    else {
      this.attributeKeys.push(key)
      this.attributeValues.push(value)
    }
  }

  /** Sets every defined attribute of `attributes` (one call for an annotation of many). */
  annotate(attributes: Readonly<Record<string, unknown>>): void {
    if (!this.open) return
    for (const key in attributes) {
      const value = attributes[key]
      if (value !== undefined) this.set(key, attributeValue(value))
    }
  }

  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    if (this.open) {
      this.record(name, hrTimeOf(Number(startTime)), attributes === undefined ? {} : attributesOf(attributes))
    }
  }

  private record(name: string, time: OtelApi.HrTime, attributes: OtelApi.Attributes): void {
    if (this.spanEvents === noEvents) this.spanEvents = []
    if (this.spanEvents.length >= maxEvents) {
      this.spanEvents.shift()
      this.droppedEvents++
    }
    this.spanEvents.push({ name, time, attributes, droppedAttributesCount: 0 })
  }

  addLinks(links: ReadonlyArray<EffectTracer.SpanLink>): void {
    this.links = [...this.links, ...links]
    if (this.sampled) {
      this.spanLinks = [
        ...this.spanLinks,
        ...links.map((l) => ({ context: contextOf(l.span), attributes: attributesOf(l.attributes) }))
      ]
    }
  }

  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (!Number.isNaN(this.endNanos)) return
    this.exit = exit
    if (exit._tag === "Failure") this.fail(Number(endTime), exit.cause)
    else this.succeed(Number(endTime))
  }

  /** Ends the span as succeeded at `nanos` (Corral's own path: no `Exit`, no BigInt). */
  succeed(nanos: number): void {
    if (!Number.isNaN(this.endNanos)) return
    this.endNanos = nanos
    if (this.sampled) this.deliver()
  }

  /** Ends the span as failed with `cause` at `nanos`: an interruption is marked, an error recorded. */
  fail(nanos: number, cause: Cause.Cause<unknown>): void {
    if (!Number.isNaN(this.endNanos)) return
    if (this.sampled) {
      if (Cause.isInterruptedOnly(cause)) this.set("status.interrupted", true)
      else {
        const first = Cause.prettyErrors(cause)[0]
        if (first !== undefined) {
          this.record("exception", hrTimeOf(nanos), exceptionAttributes(first))
          this.statusCode = ERROR
          this.statusMessage = first.message
        }
      }
    }
    this.endNanos = nanos
    if (this.sampled) this.deliver()
  }

  private deliver(): void {
    const { processor, resource } = this.pipeline
    if (processor.onEndRecord !== undefined) processor.onEndRecord(this)
    else processor.onEnd(new Finished(this, resource))
  }
}

/** A finished span as the SDK's processors and exporters read it, made from its record when one asks. */
class Finished implements ReadableSpan {
  readonly ended = true
  readonly instrumentationScope = scope
  readonly name: string
  readonly kind: OtelApi.SpanKind
  readonly parentSpanContext?: OtelApi.SpanContext
  readonly startTime: OtelApi.HrTime
  readonly endTime: OtelApi.HrTime
  readonly duration: OtelApi.HrTime
  readonly status: OtelApi.SpanStatus
  readonly attributes: OtelApi.Attributes = {}
  readonly links: Array<OtelApi.Link>
  readonly events: Array<TimedEvent>
  readonly droppedAttributesCount: number
  readonly droppedEventsCount: number
  readonly droppedLinksCount: number
  constructor(private readonly record: OtlpEncoding.SpanRecord, readonly resource: Resource) {
    this.name = record.name
    this.kind = record.spanKind
    if (record.parentIds !== undefined) this.parentSpanContext = record.parentIds
    this.startTime = hrTimeOf(record.startNanos)
    this.endTime = hrTimeOf(record.endNanos)
    this.duration = hrTimeOf(Math.max(0, record.endNanos - record.startNanos))
    this.status = record.statusMessage === undefined
      ? { code: record.statusCode }
      : { code: record.statusCode, message: record.statusMessage }
    for (let i = 0; i < record.attributeKeys.length; i++) {
      this.attributes[record.attributeKeys[i]!] = record.attributeValues[i] as OtelApi.AttributeValue
    }
    this.links = [...record.spanLinks]
    this.events = [...record.spanEvents]
    this.droppedAttributesCount = record.droppedAttributes
    this.droppedEventsCount = record.droppedEvents
    this.droppedLinksCount = record.droppedLinks
  }
  spanContext(): OtelApi.SpanContext {
    return this.record.ids
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
 * Starts a span named `name()` under `parent` with `attributes()` at `startNanos` (epoch nanoseconds, `nowNanos`).
 * Under a span that is not sampled it returns that span (see the module header) without calling `name` or
 * `attributes`. End what it returns with `succeed` or `fail`.
 */
export type Start = (
  name: () => string,
  parent: Option.Option<EffectTracer.AnySpan>,
  kind: EffectTracer.SpanKind,
  attributes: () => Readonly<Record<string, unknown>>,
  startNanos: number
) => EffectTracer.Span

/** Ends a span `Start` made as succeeded at `nanos`. */
export const succeed = (span: EffectTracer.Span, nanos: number): void => (span as RecordedSpan).succeed(nanos)

/** Ends a span `Start` made as failed with `cause` at `nanos`. */
export const fail = (span: EffectTracer.Span, nanos: number, cause: Cause.Cause<unknown>): void =>
  (span as RecordedSpan).fail(nanos, cause)

const interrupted = Cause.interrupt(FiberId.none)

/**
 * Ends `span` and every open ancestor of it below `guard` as interrupted at `nanos`: the inner spans a fiber was
 * interrupted in, ended by the region that encloses them (telemetry/Spans).
 */
export const interruptUpTo = (span: EffectTracer.Span, guard: EffectTracer.Span, nanos: number): void => {
  let at: EffectTracer.AnySpan | undefined = span
  while (at !== undefined && at !== guard && at instanceof RecordedSpan) {
    at.fail(nanos, interrupted)
    at = at.parent._tag === "Some" ? at.parent.value : undefined
  }
}

const liveClock = Context.get(DefaultServices.liveServices, Clock.Clock)
const origin = Date.now() * 1e6 - performance.now() * 1e6

/**
 * `clock`'s time in epoch nanoseconds as a double: Effect's live clock read as a number (its own reading is a BigInt
 * made of two more), any other clock (a `TestClock`) through its own reading.
 */
export const nowNanos = (clock: Clock.Clock): number =>
  clock === liveClock ? origin + performance.now() * 1e6 : Number(clock.unsafeCurrentTimeNanos())

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
    startNanos: number,
    kind: EffectTracer.SpanKind,
    attributes: Readonly<Record<string, unknown>>
  ): RecordedSpan => {
    const spanId = randomHex(8)
    const local = parent._tag === "Some" && parent.value instanceof RecordedSpan ? parent.value : undefined
    let span: RecordedSpan
    if (local !== undefined) {
      // A local parent's decision is its children's (see the module header).
      const of = local.ids
      const ids: OtelApi.SpanContext = of.traceState === undefined
        ? { traceId: of.traceId, spanId, traceFlags: of.traceFlags }
        : { traceId: of.traceId, spanId, traceFlags: of.traceFlags, traceState: of.traceState }
      span = new RecordedSpan(pipeline, name, parent, context, startNanos, kind, ids, of)
      span.annotate(attributes)
    } else {
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
      span = new RecordedSpan(pipeline, name, parent, context, startNanos, kind, ids, remote)
      span.annotate(converted)
      if (decision.attributes !== undefined) span.annotate(decision.attributes)
    }
    if (links.length > 0) span.addLinks(links)
    return span
  }
  const made = EffectTracer.make({
    span: (name, parent, context, links, startTime, kind) =>
      open(name, parent, context, links, Number(startTime), kind, {}),
    context: nativeContext
  })
  starts.set(made, (name, parent, kind, attributes, startNanos) => {
    if (parent._tag === "Some" && parent.value instanceof RecordedSpan && !parent.value.sampled) return parent.value
    return open(name(), parent, emptyContext, noLinks, startNanos, kind, attributes())
  })
  return made
}

/** A finished span record as the SDK's `ReadableSpan` (what a processor without `onEndRecord` receives). */
export const readable = (span: OtlpEncoding.SpanRecord, resource: Resource): ReadableSpan =>
  new Finished(span, resource)

/** Sets every defined attribute of `attributes` on `span` in one call when it is one of Corral's spans. */
export const annotate = (span: EffectTracer.Span, attributes: Readonly<Record<string, unknown>>): boolean => {
  if (!(span instanceof RecordedSpan)) return false
  span.annotate(attributes)
  return true
}
