/**
 * Prometheus — every Effect metric of the process in the Prometheus text exposition format (version 0.0.4), for
 * `GET /metrics`: the scrape reads the same `Metric`s the OTLP exporter sends, so both tell the same numbers.
 *
 * Names are the OpenTelemetry names with dots as underscores, plus the unit (`_seconds`) and `_total` for
 * monotonic counters, as the OpenTelemetry-to-Prometheus mapping does: `gen_ai.client.operation.duration` is
 * `gen_ai_client_operation_duration_seconds`, `corral.bursts` is `corral_bursts_total`.
 */
import type { MetricPair } from "effect"
import { Metric, MetricState } from "effect"
import { units } from "./Metrics.js"

/** The content type of the exposition format. */
export const contentType = "text/plain; version=0.0.4; charset=utf-8"

const sanitize = (name: string): string => name.replace(/[^a-zA-Z0-9_:]/g, "_").replace(/^([0-9])/, "_$1")

const escapeLabel = (value: string): string => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, "\\\"")

const escapeHelp = (value: string): string => value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n")

const number = (n: number | bigint): string =>
  typeof n === "bigint"
    ? n.toString()
    : Number.isNaN(n)
    ? "NaN"
    : n === Infinity
    ? "+Inf"
    : n === -Infinity
    ? "-Inf"
    : String(n)

const labelText = (labels: ReadonlyArray<readonly [string, string]>): string =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${sanitize(k)}="${escapeLabel(v)}"`).join(",")}}`

interface Family {
  readonly type: "counter" | "gauge" | "histogram" | "summary"
  readonly help: string
  readonly lines: Array<string>
}

const baseName = (pair: MetricPair.MetricPair.Untyped): string => {
  const name = pair.metricKey.name
  const unit = units[name]
  const base = sanitize(name)
  return unit === undefined || base.endsWith(`_${unit}`) ? base : `${base}_${unit}`
}

/** Renders `pairs` (default: every metric of the process) as Prometheus text. */
export const render = (pairs: ReadonlyArray<MetricPair.MetricPair.Untyped> = Metric.unsafeSnapshot()): string => {
  const families = new Map<string, Family>()
  const family = (name: string, type: Family["type"], help: string) => {
    let found = families.get(name)
    if (found === undefined) {
      found = { type, help, lines: [] }
      families.set(name, found)
    }
    return found
  }
  for (const pair of pairs) {
    const state = pair.metricState
    const labels = pair.metricKey.tags.map((t) => [t.key, t.value] as const)
    const help = pair.metricKey.description._tag === "Some" ? pair.metricKey.description.value : pair.metricKey.name
    const name = baseName(pair)
    if (MetricState.isCounterState(state)) {
      const monotonic = (pair.metricKey.keyType as { readonly incremental?: boolean }).incremental === true
      const series = monotonic && !name.endsWith("_total") ? `${name}_total` : name
      family(series, monotonic ? "counter" : "gauge", help).lines.push(
        `${series}${labelText(labels)} ${number(state.count)}`
      )
    } else if (MetricState.isGaugeState(state)) {
      family(name, "gauge", help).lines.push(`${name}${labelText(labels)} ${number(state.value)}`)
    } else if (MetricState.isHistogramState(state)) {
      const f = family(name, "histogram", help)
      for (const [boundary, count] of state.buckets) {
        f.lines.push(`${name}_bucket${labelText([...labels, ["le", number(boundary)]])} ${number(count)}`)
      }
      if (!state.buckets.some(([boundary]) => boundary === Infinity)) {
        f.lines.push(`${name}_bucket${labelText([...labels, ["le", "+Inf"]])} ${number(state.count)}`)
      }
      f.lines.push(`${name}_sum${labelText(labels)} ${number(state.sum)}`)
      f.lines.push(`${name}_count${labelText(labels)} ${number(state.count)}`)
    } else if (MetricState.isSummaryState(state)) {
      const f = family(name, "summary", help)
      for (const [quantile, value] of state.quantiles) {
        if (value._tag === "Some") {
          f.lines.push(`${name}${labelText([...labels, ["quantile", number(quantile)]])} ${number(value.value)}`)
        }
      }
      f.lines.push(`${name}_sum${labelText(labels)} ${number(state.sum)}`)
      f.lines.push(`${name}_count${labelText(labels)} ${number(state.count)}`)
    } else if (MetricState.isFrequencyState(state)) {
      const series = `${name}_total`
      const f = family(series, "counter", help)
      for (const [word, count] of state.occurrences) {
        f.lines.push(`${series}${labelText([...labels, ["value", word]])} ${number(count)}`)
      }
    }
  }
  const out: Array<string> = []
  for (const name of [...families.keys()].sort()) {
    const f = families.get(name)!
    out.push(`# HELP ${name} ${escapeHelp(f.help)}`, `# TYPE ${name} ${f.type}`, ...f.lines)
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`
}
