/**
 * Spans — the span helpers every instrumented call site uses: a span is made only when Effect's tracer is on (the
 * telemetry layer turns it on; `Tracing.scoped` turns it off for a burst otherwise), and its attributes are built
 * only then. With telemetry off an instrumented call costs one fiber-ref read and nothing else: no span, no
 * attribute object, no clock read.
 *
 * Names follow the OpenTelemetry GenAI semantic conventions: `invoke_agent {agent}` for a burst, `chat {model}` for
 * a logical model call with one `chat.attempt {model}` child per attempt, `execute_tool {tool}` for a tool call.
 */
import type { Cause, Fiber } from "effect"
import {
  Clock,
  Context,
  DefaultServices,
  Effect,
  Exit,
  FiberRef,
  FiberRefs,
  HashMap,
  Option,
  Tracer as EffectTracer
} from "effect"
import type { Tracer } from "effect"
import * as SpanTracer from "./SpanTracer.js"

/** Attribute values a span accepts. */
export type Attributes = Record<string, string | number | boolean | ReadonlyArray<string> | undefined>

/** Whether prompt and completion content is recorded on spans (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`). */
export class CaptureContent extends Context.Reference<CaptureContent>()("corral/telemetry/CaptureContent", {
  defaultValue: (): boolean => false
}) {}

const clean = (attributes: Attributes): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const key in attributes) {
    const value = attributes[key]
    if (value !== undefined) out[key] = value
  }
  return out
}

/** Whether spans are being made on this fiber. */
export const enabled: Effect.Effect<boolean> = Effect.withFiberRuntime((fiber) =>
  Effect.succeed(fiber.getFiberRef(FiberRef.currentTracerEnabled))
)

/**
 * The open leaf span of one fiber (see `span`): the current span for Corral's own annotations, events, child spans
 * and log lines, inherited by the fibers it forks, without going into Effect's context.
 *
 * A slot the fiber owns and changes in place: setting a fiber ref copies the fiber's whole map of refs, and this is
 * entered and left for every model call, attempt and tool call. A forked fiber gets its own copy of the slot
 * (`fork`), a joined one leaves its parent's alone (`join`), and a fiber that holds a slot it does not own (the
 * shared initial one, or one it came by otherwise) replaces it before its first change.
 */
interface LeafSlot {
  span: Tracer.Span | undefined
  owner: Fiber.RuntimeFiber<unknown, unknown> | undefined
  /** The span of the innermost uninterruptible leaf region open on the owning fiber (see `innerLeaf`). */
  guard: Tracer.Span | undefined
}
const sharedSlot: LeafSlot = { span: undefined, owner: undefined, guard: undefined }
const currentLeaf: FiberRef.FiberRef<LeafSlot> = FiberRef.unsafeMake<LeafSlot>(sharedSlot, {
  fork: (slot) => slot.span === undefined ? sharedSlot : { span: slot.span, owner: undefined, guard: undefined },
  join: (parent) => parent
})

/** The slot `fiber` owns (claiming a forked copy), or `undefined` when it must set a fresh one first. */
const ownSlot = (fiber: Fiber.RuntimeFiber<unknown, unknown>): LeafSlot | undefined => {
  const slot = fiber.getFiberRef(currentLeaf)
  if (slot.owner === fiber) return slot
  if (slot.owner === undefined && slot !== sharedSlot) {
    slot.owner = fiber
    return slot
  }
  return undefined
}

/** The span a new span of `fiber` goes under. */
const parentOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>, context: Context.Context<never>) => {
  const leaf = fiber.getFiberRef(currentLeaf).span
  return leaf === undefined ? Context.getOption(context, EffectTracer.ParentSpan) : Option.some(leaf)
}

/**
 * Runs `self` inside the span `name()` with `attributes()`, both evaluated only when the tracer is on (and, on
 * Corral's `SpanTracer`, only when the span is sampled); otherwise runs `self` as it is. The span ends with `self`'s
 * exit (a failure marks it as an error). On a `SpanTracer` the attributes reach the SDK in one object and a span
 * under an unsampled one costs a few fiber-ref reads; any other tracer gets Effect's `Tracer.span`.
 *
 * A `leaf` span (a model call, an attempt, a tool call) is the current span of `self` and the fibers it forks for
 * Corral — `annotate`, `event`, nested `span`s (an attempt under its call) and the JSON log lines see it — but is not
 * put into Effect's context: that propagation (a copy of the fiber's whole service map, compared key by key when it
 * is set and again when it is restored, and a context diff when a forked fiber joins) was most of what a span cost
 * (docs/benchmarks.md at 09f4c1e, "Telemetry cost"). Spans made by other libraries under it (Effect's `withSpan`) go under the
 * nearest span in Effect's context (the burst's), except where the call site hands the leaf to them with
 * `asParentOfOthers` (the provider adapters' HTTP requests).
 */
export const span = (
  name: () => string,
  attributes: () => Attributes,
  kind: Tracer.SpanKind = "internal",
  options: SpanOptions = {}
) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime<A, E, R>((fiber) => spanIn(fiber, name, attributes, kind, options)(self))

/** How a span of `span` is held: see `span`, `innerLeaf` and `fiberLeaf`. */
export interface SpanOptions {
  readonly leaf?: boolean
  /** A leaf that may ride an enclosing region (or `guardFiber`) of the same fiber instead of one of its own. */
  readonly inner?: boolean
  /** A leaf over the whole run of its fiber, ended with that fiber (`fiberLeaf`). */
  readonly wholeFiber?: boolean
}

/**
 * `span`, for code that already runs on `fiber` (inside `Effect.withFiberRuntime`, or a continuation of an effect
 * that did): the span is set up now, without an operation of its own. `self` must start on `fiber` next.
 */
export const spanIn = (
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  name: () => string,
  attributes: () => Attributes,
  kind: Tracer.SpanKind = "internal",
  options: SpanOptions = {}
) =>
<A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return self
  const services = fiber.getFiberRef(DefaultServices.currentServices)
  const tracer = Context.get(services, EffectTracer.Tracer)
  const clock = Context.get(services, Clock.Clock)
  const context = fiber.getFiberRef(FiberRef.currentContext)
  const parent = parentOf(fiber, context)
  const start = SpanTracer.startOf(tracer)
  const open = (): Tracer.Span => {
    if (start !== undefined) return start(name, parent, kind, attributes, SpanTracer.nowNanos(clock))
    const made = tracer.span(name(), parent, Context.empty(), [], clock.unsafeCurrentTimeNanos(), kind)
    const built = clean(attributes())
    for (const key in built) made.attribute(key, built[key])
    return made
  }
  const corral = start !== undefined
  if (options.leaf === true) {
    // Under an unsampled span of Corral's tracer a span is that span again (SpanTracer): nothing to open or end.
    if (corral && parent._tag === "Some" && parent.value._tag === "Span" && !parent.value.sampled) {
      return self
    }
    if (options.inner === true && corral) {
      const slot = ownSlot(fiber)
      if (slot !== undefined && slot.guard !== undefined && parent._tag === "Some" && slot.span === parent.value) {
        return innerLeaf(slot, self, open(), clock)
      }
    }
    if (options.wholeFiber === true) return fiberLeaf(fiber, self, open(), clock, corral)
    return inLeaf(fiber, self, open, clock, corral)
  }
  const opened = open()
  // Under an unsampled span: that span again, nothing to end.
  if (parent._tag === "Some" && opened === parent.value) return self
  return Effect.onExit(
    Effect.locally(self, FiberRef.currentContext, Context.add(context, EffectTracer.ParentSpan, opened)),
    (exit) =>
      Effect.sync(() =>
        exit._tag === "Success" ? ended(opened, clock, corral, exit.value) : failed(opened, clock, corral, exit.cause)
      )
  )
}

/** Ends `span` as succeeded with `value`: Corral's own spans with no `Exit` and no BigInt (`SpanTracer.succeed`). */
const ended = (span: Tracer.Span, clock: Clock.Clock, corral: boolean, value: unknown): void =>
  corral
    ? SpanTracer.succeed(span, SpanTracer.nowNanos(clock))
    : span.end(clock.unsafeCurrentTimeNanos(), Exit.succeed(value))

/** Ends `span` as failed with `cause`. */
const failed = (span: Tracer.Span, clock: Clock.Clock, corral: boolean, cause: Cause.Cause<unknown>): void =>
  corral
    ? SpanTracer.fail(span, SpanTracer.nowNanos(clock), cause)
    : span.end(clock.unsafeCurrentTimeNanos(), Exit.failCause(cause))

/**
 * Runs `self` in a span `open()` makes as `fiber`'s leaf, then restores the one before and ends the span with
 * `self`'s exit — `Effect.locally` plus `Effect.onExit` in one uninterruptible region (the span opens inside it, so
 * an interruption cannot leave it open) with a third of their operations and no copy of the fiber's refs (see
 * `LeafSlot`): this runs for every model call, attempt and tool call.
 */
const inLeaf = <A, E, R>(
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  self: Effect.Effect<A, E, R>,
  open: () => Tracer.Span,
  clock: Clock.Clock,
  corral: boolean
): Effect.Effect<A, E, R> =>
  Effect.uninterruptibleMask((restore) => {
    const span = open()
    const owned = ownSlot(fiber)
    const slot = owned ?? { span: fiber.getFiberRef(currentLeaf).span, owner: fiber, guard: undefined }
    const previous = slot.span
    const previousGuard = slot.guard
    slot.span = span
    slot.guard = span
    const run = Effect.matchCauseEffect(restore(self), {
      onFailure: (cause) => {
        leave(slot, span, previous, previousGuard, clock)
        failed(span, clock, corral, cause)
        return Effect.failCause(cause)
      },
      onSuccess: (value) => {
        leave(slot, span, previous, previousGuard, clock)
        ended(span, clock, corral, value)
        return Effect.succeed(value)
      }
    })
    // The first leaf of a fiber that owns no slot yet: one fiber-ref write, then changes in place.
    if (owned === undefined) setLeaf(fiber, slot)
    return run
  })

/**
 * Sets `fiber`'s slot in place: `FiberRef.set` is the same write plus an operation of its own, for code that already
 * runs on the fiber (`withFiberRuntime`). `setFiberRef` is the fiber runtime's own method (the one `FiberRef.set`
 * calls), not on the `RuntimeFiber` interface.
 */
const setLeaf = (fiber: Fiber.RuntimeFiber<unknown, unknown>, slot: LeafSlot): void =>
  (fiber as unknown as { setFiberRef(ref: FiberRef.FiberRef<LeafSlot>, value: LeafSlot): void }).setFiberRef(
    currentLeaf,
    slot
  )

/**
 * Runs `self`, the whole run of the fiber it runs on (a burst's loop, raced against its active-time deadline:
 * session/Loop), with that fiber's end as the guard of the `inner` leaf spans opened on it under its current span: a
 * model call's span then needs no region of its own (four run-loop operations a call). Whatever way the fiber ends,
 * an observer ends every span still open below that one as interrupted — an interruption skips the handlers of the
 * spans it came through, and a fiber once interrupted runs nothing but its finalizers before it ends.
 */
export const guardFiber = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime<A, E, R>((fiber) => {
    if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return self
    const owned = ownSlot(fiber)
    const slot = owned ?? { span: fiber.getFiberRef(currentLeaf).span, owner: fiber, guard: undefined }
    const base = slot.span
    // Already guarded by a region of its own, or no span to guard under.
    if (slot.guard !== undefined || base === undefined) return self
    slot.guard = base
    if (owned === undefined) setLeaf(fiber, slot)
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    fiber.addObserver(() => {
      if (slot.span !== base && slot.span !== undefined) {
        SpanTracer.interruptUpTo(slot.span, base, SpanTracer.nowNanos(clock))
      }
    })
    return self
  })

/**
 * A leaf span for an effect that is the whole run of the fiber it runs on (a tool call on a fiber of its own:
 * session/ToolCall's sync-first dispatch): `span` is the fiber's leaf from now on and ends with the fiber's exit —
 * an observer, where `inLeaf` is an uninterruptible region of four run-loop operations, paid twice a turn by a model
 * that asks for two tools. Whatever way the fiber ends, the observer runs (an interruption included, and then it
 * first ends an `inner` span the fiber was interrupted in, like `leave`); it runs after the fiber's own finalizers,
 * which belong to the call anyway. Wrong for an effect followed by anything else on its fiber: the span would
 * include that too.
 */
const fiberLeaf = <A, E, R>(
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  self: Effect.Effect<A, E, R>,
  span: Tracer.Span,
  clock: Clock.Clock,
  corral: boolean
): Effect.Effect<A, E, R> => {
  const owned = ownSlot(fiber)
  const slot = owned ?? { span: undefined, owner: fiber, guard: undefined }
  slot.span = span
  slot.guard = span
  if (owned === undefined) setLeaf(fiber, slot)
  fiber.addObserver((exit) => {
    leave(slot, span, undefined, undefined, clock)
    if (exit._tag === "Success") ended(span, clock, corral, exit.value)
    else failed(span, clock, corral, exit.cause)
  })
  return self
}

/** Restores the leaf and guard a region of `span` found, first ending an inner span it was interrupted in. */
const leave = (
  slot: LeafSlot,
  span: Tracer.Span,
  previous: Tracer.Span | undefined,
  previousGuard: Tracer.Span | undefined,
  clock: Clock.Clock
): void => {
  // An inner span the fiber was interrupted in (its own handler skipped, see `innerLeaf`) ends here.
  if (slot.span !== span && slot.span !== undefined) {
    SpanTracer.interruptUpTo(slot.span, span, SpanTracer.nowNanos(clock))
  }
  slot.span = previous
  slot.guard = previousGuard
}

/**
 * An `inner` leaf: `span` (already open) as the leaf of `self` on a fiber that has a `guard` — it is inside one of
 * Corral's leaf regions (`inLeaf`), or its end guards it (`fiberLeaf`, `guardFiber`): a model attempt inside its
 * logical call, a call on the burst's loop fiber — with no uninterruptible region of its own. On success or failure
 * it ends and restores the leaf like `inLeaf`; when the fiber is interrupted inside it, Effect skips this handler,
 * and the guard (the enclosing region's handler, or the fiber's observer), which runs whatever happens, ends it as
 * interrupted. The guard is on the same fiber (a forked fiber's slot has none), so no span is left open. One region
 * fewer per span: the region's operations and allocations were about a fifth of what a span cost.
 */
const innerLeaf = <A, E, R>(
  slot: LeafSlot,
  self: Effect.Effect<A, E, R>,
  span: Tracer.Span,
  clock: Clock.Clock
): Effect.Effect<A, E, R> => {
  const previous = slot.span
  slot.span = span
  return Effect.matchCauseEffect(self, {
    onFailure: (cause) => {
      slot.span = previous
      failed(span, clock, true, cause)
      return Effect.failCause(cause)
    },
    onSuccess: (value) => {
      slot.span = previous
      ended(span, clock, true, value)
      return Effect.succeed(value)
    }
  })
}

/**
 * Runs `self` with the fiber's leaf span (see `span`) as the parent of the spans other libraries make inside it —
 * an HTTP client's request span under the model attempt that sends it. A leaf is not in Effect's context, so the
 * call site that hands work to such a library puts it there for that call alone: the context copy is paid once per
 * HTTP request, not once per span on every call (a scripted or cached model makes no request and pays nothing).
 */
export const asParentOfOthers = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiberRuntime<A, E, R>((fiber) => {
    const leaf = fiber.getFiberRef(currentLeaf).span
    if (leaf === undefined || !fiber.getFiberRef(FiberRef.currentTracerEnabled)) return self
    const context = fiber.getFiberRef(FiberRef.currentContext)
    return Effect.locally(self, FiberRef.currentContext, Context.add(context, EffectTracer.ParentSpan, leaf))
  })

const none = Option.none<Tracer.Span>()

/** The span a fiber with `refs` is in, whether sampled or not (its leaf, else its context's). */
export const currentOf = (refs: FiberRefs.FiberRefs): Option.Option<Tracer.Span> => {
  const leaf = FiberRefs.getOrDefault(refs, currentLeaf).span
  if (leaf !== undefined) return Option.some(leaf)
  const parent = Context.getOption(FiberRefs.getOrDefault(refs, FiberRef.currentContext), EffectTracer.ParentSpan)
  return Option.isSome(parent) && parent.value._tag === "Span" ? Option.some(parent.value) : none
}

/**
 * The span `fiber` is in, when spans are on and there is one that is sampled (one fiber-ref read when they are
 * off): attributes and events for a span nobody records are not built.
 */
const spanOf = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Option.Option<Tracer.Span> => {
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return none
  const leaf = fiber.getFiberRef(currentLeaf).span
  if (leaf !== undefined) return leaf.sampled ? Option.some(leaf) : none
  const parent = Context.getOption(fiber.getFiberRef(FiberRef.currentContext), EffectTracer.ParentSpan)
  return Option.isSome(parent) && parent.value._tag === "Span" && parent.value.sampled
    ? Option.some(parent.value)
    : none
}

/** The span this fiber is in, when spans are on and there is one. */
export const current: Effect.Effect<Option.Option<Tracer.Span>> = Effect.withFiberRuntime((fiber) =>
  Effect.succeed(spanOf(fiber))
)

/** Whether this fiber is in a span that records (spans on, and the span sampled). */
export const recording: Effect.Effect<boolean> = Effect.withFiberRuntime((fiber) =>
  Effect.succeed(Option.isSome(spanOf(fiber)))
)

/** Sets attributes on the current span (built only when there is one). */
export const annotate = (attributes: () => Attributes): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    annotateIn(fiber, attributes)
    return Effect.void
  })

/**
 * `annotate`, done now on the span `fiber` is in: for code that already runs with its fiber at hand (inside
 * `Effect.withFiberRuntime`, or a continuation of an effect that did) and would otherwise pay an operation of its own.
 */
export const annotateIn = (fiber: Fiber.RuntimeFiber<unknown, unknown>, attributes: () => Attributes): void => {
  const span = spanOf(fiber)
  if (Option.isNone(span)) return
  const built = attributes()
  // Corral's own spans take the whole annotation in one call.
  if (SpanTracer.annotate(span.value, built)) return
  for (const key in built) {
    const value = built[key]
    if (value === undefined) continue
    // @effect/opentelemetry would write an array as its JSON text; OpenTelemetry takes string arrays as they are
    // (`gen_ai.response.finish_reasons` is one).
    const otel = Array.isArray(value) ? otelSpanOf(span.value) : undefined
    if (otel === undefined) span.value.attribute(key, value)
    else otel.setAttribute(key, value as Array<string>)
  }
}

/** The OpenTelemetry span under an @effect/opentelemetry span, if that is what `span` is. */
const otelSpanOf = (span: Tracer.Span): { setAttribute(key: string, value: Array<string>): unknown } | undefined => {
  const inner: unknown = (span as unknown as { readonly span?: unknown }).span
  return typeof inner === "object" && inner !== null && "setAttribute" in inner &&
      typeof inner.setAttribute === "function"
    ? inner as { setAttribute(key: string, value: Array<string>): unknown }
    : undefined
}

/** Adds an event to the current span at `atMs` (epoch milliseconds). */
export const event = (name: string, atMs: number, attributes: Attributes): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    const span = spanOf(fiber)
    if (Option.isSome(span)) span.value.event(name, BigInt(Math.round(atMs)) * 1_000_000n, clean(attributes))
    return Effect.void
  })

/** Adds `session_id`/`run_id`-style annotations to every log line of the rest of this fiber's run. */
export const annotateLogs = (annotations: Readonly<Record<string, string>>): Effect.Effect<void> =>
  FiberRef.update(FiberRef.currentLogAnnotations, (map) => {
    let next = map
    for (const key in annotations) next = HashMap.set(next, key, annotations[key])
    return next
  })
