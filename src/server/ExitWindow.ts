/**
 * ExitWindow — how the bursts of the last hour ended, for the operations page (`GET /v1/exits`).
 *
 * The `corral.bursts` metric counts every burst since the process started, by exit reason; a count since the start
 * tells an operator nothing about now. The window samples the counter every `sampleEveryMs` (30 s) and answers
 * "now minus the oldest sample inside the hour": exact for the bursts after that sample, so the window it states
 * (`from`) may start up to 30 s later than an hour ago, never earlier. At most one hour of samples plus one is kept
 * (121 at the defaults). Thirty seconds because the page refreshes every few seconds and an hour-long view does
 * not need finer steps; sampling is a walk over the metric registry, cheap at that rate.
 */
import { Clock, Context, Effect, Layer, Metric, MetricState, Schedule } from "effect"
import type { ExitReason } from "../domain/ExitReason.js"

/** Bursts ended so far, by exit reason, at `at` (Clock millis). */
export interface Sample {
  readonly at: number
  readonly counts: Readonly<Partial<Record<ExitReason, number>>>
}

/** Bursts ended in `[from, to]`, by exit reason. */
export interface Counts {
  readonly from: number
  readonly to: number
  readonly byReason: Readonly<Partial<Record<ExitReason, number>>>
  readonly total: number
}

/** The window's length (one hour) and the sampling period (30 s). */
export const windowMs = 3_600_000
export const sampleEveryMs = 30_000

/** The name of the counter sampled (`telemetry/Metrics.bursts`). */
const burstsMetric = "corral.bursts"

/** The `corral.bursts` counter now, summed over tiers, by exit reason. */
export const read = (): Sample["counts"] => {
  const counts: Partial<Record<ExitReason, number>> = {}
  for (const pair of Metric.unsafeSnapshot()) {
    if (pair.metricKey.name !== burstsMetric) continue
    if (!MetricState.isCounterState(pair.metricState)) continue
    const reason = pair.metricKey.tags.find((t) => t.key === "corral.exit_reason")?.value as ExitReason | undefined
    if (reason === undefined) continue
    counts[reason] = (counts[reason] ?? 0) + Number(pair.metricState.count)
  }
  return counts
}

/**
 * The bursts between the oldest of `samples` taken at or after `now - window` and `current` (taken at `now`).
 * Pure. With no such sample, the window is empty (`from` = `now`).
 */
export const between = (samples: ReadonlyArray<Sample>, current: Sample, window: number = windowMs): Counts => {
  const base = samples.find((s) => s.at >= current.at - window && s.at <= current.at)
  const byReason: Partial<Record<ExitReason, number>> = {}
  let total = 0
  if (base !== undefined) {
    for (const [reason, count] of Object.entries(current.counts) as Array<[ExitReason, number]>) {
      const n = count - (base.counts[reason] ?? 0)
      if (n > 0) {
        byReason[reason] = n
        total += n
      }
    }
  }
  return { from: base?.at ?? current.at, to: current.at, byReason, total }
}

/** Drops the samples no window ending at `now` or later can start from (keeps the oldest inside the hour). */
export const prune = (samples: Array<Sample>, now: number, window: number = windowMs): void => {
  while (samples.length > 1 && samples[0]!.at < now - window) samples.shift()
}

/** The window: the bursts of the last hour, by exit reason. */
export class ExitWindow extends Context.Tag("corral/server/ExitWindow")<ExitWindow, {
  readonly counts: Effect.Effect<Counts>
}>() {}

/** Samples the counter at once and then every 30 s for as long as the layer lives. */
export const layer: Layer.Layer<ExitWindow> = Layer.scoped(
  ExitWindow,
  Effect.gen(function*() {
    const samples: Array<Sample> = []
    const sample = Effect.map(Clock.currentTimeMillis, (at): Sample => ({ at, counts: read() }))
    const take = Effect.flatMap(sample, (s) =>
      Effect.sync(() => {
        samples.push(s)
        prune(samples, s.at)
      }))
    yield* take
    yield* Effect.forkScoped(Effect.repeat(take, Schedule.spaced(sampleEveryMs)).pipe(Effect.delay(sampleEveryMs)))
    return { counts: Effect.map(sample, (current) => between(samples, current)) }
  })
)
