/**
 * Tracing — whether Corral's spans (`invoke_agent`, `chat`, `chat.attempt`, `execute_tool`: see `GenAi`) are made.
 *
 * Prevents paying for telemetry nobody reads: with no exporter, Effect's native tracer still builds every span (ids,
 * clock reads, attribute maps, the current-span fiber ref) on every model call and burst. Spans are off unless a
 * host turns them on — the telemetry layer does, and an embedder with its own tracer provides `layer(true)` — and
 * then an instrumented call costs one fiber-ref read (`Spans.span`).
 */
import { Context, Effect, Layer } from "effect"

/** Whether Corral makes spans. A `Context.Reference`: absent means off. */
export class Tracing extends Context.Reference<Tracing>()("corral/telemetry/Tracing", {
  defaultValue: (): boolean => false
}) {}

/** A layer that turns Corral's spans on (or off) for everything it provides to. */
export const layer = (enabled: boolean): Layer.Layer<never> => Layer.succeedContext(Context.make(Tracing, enabled))

/** Runs `self` with Effect's tracer on only when Corral's spans are on. */
export const scoped = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Tracing, (enabled) => enabled ? self : Effect.withTracerEnabled(self, false))
