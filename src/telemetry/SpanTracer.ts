/**
 * SpanTracer — Corral's Effect `Tracer` over an OpenTelemetry SDK tracer: each Effect span is one SDK span, made
 * directly, with nothing in between.
 *
 * Prevents telemetry from costing more than the work it watches. @effect/opentelemetry's tracer (measured in
 * docs/benchmarks.md, "Telemetry cost") wraps every SDK span in a second object that keeps a copy of every
 * attribute, converts each attribute on its own, builds a fresh OpenTelemetry context for every parent lookup, and
 * makes an SDK span even for the children of a span the sampler dropped. Here:
 *
 * - a span's attributes go to the SDK in one object when it starts (`start`, used by `Spans.span`), so a sampler
 *   sees them and the SDK sanitises them once;
 * - the OpenTelemetry context that carries a span (its children's parent) is built once per span, on first use;
 * - **a child of a span that is not sampled is that same span**: no SDK call, no ids, no allocation. Every standard
 *   sampler (`always_*`, `traceidratio` — the trace id is the trace's — and every `parentbased_*`) drops the
 *   children of a dropped local span, so nothing is lost, and with `always_off` or a ratio a dropped burst costs one
 *   SDK call for the burst and nearly nothing for its model and tool calls;
 * - attributes and events on an unsampled span are not even converted.
 *
 * An embedder's own tracer keeps working: `Spans.span` falls back to `Tracer.span` for any other tracer.
 */
import type * as OtelApi from "@opentelemetry/api"
import type { Exit, Option } from "effect"
import { Cause, Context, DefaultServices, Tracer as EffectTracer } from "effect"

/** The parts of @opentelemetry/api the tracer uses (passed in: the API is loaded only when telemetry is on). */
export interface Api {
  readonly trace: Pick<typeof OtelApi.trace, "setSpan" | "setSpanContext">
  readonly ROOT_CONTEXT: OtelApi.Context
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
const billion = 1_000_000_000n
const noAttributes: ReadonlyMap<string, unknown> = new Map()
const emptyContext: Context.Context<never> = Context.empty()
const noLinks: ReadonlyArray<EffectTracer.SpanLink> = []

const hrTime = (nanos: bigint): OtelApi.HrTime => [Number(nanos / billion), Number(nanos % billion)]

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

/** Attributes for the SDK: `undefined` values left out, the rest converted. */
export const attributesOf = (attributes: Readonly<Record<string, unknown>>): OtelApi.Attributes => {
  const out: OtelApi.Attributes = {}
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) out[key] = attributeValue(value)
  }
  return out
}

/** One span: an SDK span (a non-recording one when the sampler dropped it) behind Effect's `Span` interface. */
class SdkSpan implements EffectTracer.Span {
  readonly _tag = "Span"
  readonly spanId: string
  readonly traceId: string
  readonly sampled: boolean
  /** Not kept (the SDK span has them); Effect reads this map only for its own console tracer. */
  readonly attributes = noAttributes
  status: EffectTracer.SpanStatus
  private carrying: OtelApi.Context | undefined

  constructor(
    private readonly api: Api,
    readonly otel: OtelApi.Span,
    readonly name: string,
    readonly parent: Option.Option<EffectTracer.AnySpan>,
    readonly context: Context.Context<never>,
    readonly links: Array<EffectTracer.SpanLink>,
    startTime: bigint,
    readonly kind: EffectTracer.SpanKind
  ) {
    const ids = otel.spanContext()
    this.spanId = ids.spanId
    this.traceId = ids.traceId
    this.sampled = (ids.traceFlags & 1) === 1
    this.status = { _tag: "Started", startTime }
  }

  /** The OpenTelemetry context whose active span is this one (built once). */
  carrier(): OtelApi.Context {
    if (this.carrying === undefined) this.carrying = this.api.trace.setSpan(this.api.ROOT_CONTEXT, this.otel)
    return this.carrying
  }

  attribute(key: string, value: unknown): void {
    if (this.sampled) this.otel.setAttribute(key, attributeValue(value))
  }

  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    if (this.sampled) {
      this.otel.addEvent(name, attributes === undefined ? undefined : attributesOf(attributes), hrTime(startTime))
    }
  }

  addLinks(links: ReadonlyArray<EffectTracer.SpanLink>): void {
    this.links.push(...links)
    if (this.sampled) {
      this.otel.addLinks(links.map((l) => ({ context: contextOf(l.span), attributes: attributesOf(l.attributes) })))
    }
  }

  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (this.status._tag === "Ended") return
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
    if (!this.sampled) return
    const at = hrTime(endTime)
    if (exit._tag === "Success") this.otel.setStatus({ code: OK })
    else if (Cause.isInterruptedOnly(exit.cause)) {
      this.otel.setStatus({ code: OK })
      this.otel.setAttribute("status.interrupted", true)
    } else {
      const first = Cause.prettyErrors(exit.cause)[0]
      if (first === undefined) this.otel.setStatus({ code: OK })
      else {
        this.otel.recordException(first, at)
        this.otel.setStatus({ code: ERROR, message: first.message })
      }
    }
    this.otel.end(at)
  }
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
 * property, another `context` function) makes that call site polymorphic for the whole process — measured at
 * ~50 µs CPU per model turn in the workload, more than the spans themselves.
 */
const starts = new WeakMap<EffectTracer.Tracer, Start>()

/** The `start` of `tracer` when it is one `make` built (Corral's tracer). */
export const startOf = (tracer: EffectTracer.Tracer): Start | undefined => starts.get(tracer)

/** Effect's own `context` (it runs `f`): shared so the per-operation call stays monomorphic (see `starts`). */
const nativeContext = Context.get(DefaultServices.liveServices, EffectTracer.Tracer).context

/** The tracer over `tracer` (an SDK tracer), with `api` for its contexts; its `start` is `startOf(it)`. */
export const make = (api: Api, tracer: OtelApi.Tracer): EffectTracer.Tracer => {
  const parentContext = (parent: Option.Option<EffectTracer.AnySpan>): OtelApi.Context => {
    if (parent._tag === "None") return api.ROOT_CONTEXT
    const span = parent.value
    return span instanceof SdkSpan ? span.carrier() : api.trace.setSpanContext(api.ROOT_CONTEXT, contextOf(span))
  }
  const open = (
    name: string,
    parent: Option.Option<EffectTracer.AnySpan>,
    context: Context.Context<never>,
    links: ReadonlyArray<EffectTracer.SpanLink>,
    startTime: bigint,
    kind: EffectTracer.SpanKind,
    attributes: OtelApi.Attributes | undefined
  ): SdkSpan => {
    const options: OtelApi.SpanOptions = { kind: kinds[kind], startTime: hrTime(startTime) }
    if (attributes !== undefined) options.attributes = attributes
    if (links.length > 0) {
      options.links = links.map((l) => ({ context: contextOf(l.span), attributes: attributesOf(l.attributes) }))
    }
    const otel = tracer.startSpan(name, options, parentContext(parent))
    return new SdkSpan(api, otel, name, parent, context, links.slice(), startTime, kind)
  }
  const made = EffectTracer.make({
    span: (name, parent, context, links, startTime, kind) =>
      open(name, parent, context, links, startTime, kind, undefined),
    context: nativeContext
  })
  starts.set(made, (name, parent, kind, attributes, startTime) => {
    if (parent._tag === "Some" && parent.value instanceof SdkSpan && !parent.value.sampled) return parent.value
    return open(name(), parent, emptyContext, noLinks, startTime, kind, attributesOf(attributes()))
  })
  return made
}
