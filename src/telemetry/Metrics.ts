/**
 * Metrics — Corral's operational numbers as Effect `Metric`s: read back with the Metric API, exported over OTLP by
 * the telemetry layer, and served as Prometheus text at `GET /metrics` (`telemetry/Prometheus`).
 *
 * Names follow the GenAI semantic conventions where they define one (`gen_ai.client.operation.duration`,
 * `gen_ai.client.token.usage`), `corral.*` otherwise. Updates are synchronous (`unsafeUpdate`) with label arrays
 * cached per label set: a counter on the hot path costs a map lookup and an add, no fiber, no allocation after the
 * first time a label set is seen. Label cardinality is bounded by configuration (providers, models, tools, orgs,
 * exit reasons, error kinds), never by a session or run id.
 */
import { Effect, Metric, MetricBoundaries, MetricLabel } from "effect"

const seconds = MetricBoundaries.fromIterable([
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
  120
])
const tokenBuckets = MetricBoundaries.exponential({ start: 1, factor: 4, count: 12 })

/** Bursts running now, in this process. */
export const burstsActive = Metric.counter("corral.bursts.active", {
  description: "Bursts running now",
  incremental: false
})
/** Session actors alive now (a session with an actor in memory), in this process. */
export const actorsActive = Metric.gauge("corral.actors.active", {
  description: "Session actors alive now (one per live session)"
})
/** Bursts waiting for a place under the process's cap on running bursts (`session/Admission`), in this process. */
export const burstsWaiting = Metric.gauge("corral.bursts.waiting", {
  description: "Bursts waiting for a place under the cap on bursts running at once (their messages are stored)"
})
/** Bursts ended, by exit reason. */
export const bursts = Metric.counter("corral.bursts", {
  description: "Bursts ended, by exit reason",
  incremental: true
})
/** HTTP requests being worked on now: handed to the handler, their answer not started (`server/RequestGate`). */
export const requestsInFlight = Metric.gauge("corral.http.requests.in_flight", {
  description: "HTTP requests being worked on now (handed to the handler, answer not started)"
})
/** HTTP requests waiting for a place under `server.maxRequestsInFlight` (`server/RequestGate`). */
export const requestsWaiting = Metric.gauge("corral.http.requests.waiting", {
  description: "HTTP requests waiting for a place under server.maxRequestsInFlight"
})
/** HTTP requests the request gate answered 503, by reason (`line_full`, `waited_too_long`, `shutting_down`). */
export const requestsRefused = Metric.counter("corral.http.requests.refused", {
  description: "HTTP requests answered 503 by the request gate, by reason (line_full, waited_too_long, shutting_down)",
  incremental: true
})
/** Duration of one logical model call (retries and failovers included), GenAI convention. */
export const operationDuration = Metric.histogram(
  "gen_ai.client.operation.duration",
  seconds,
  "Duration of one logical model call in seconds, retries and failovers included"
)
/** Attempts one logical model call took. */
export const attempts = Metric.histogram(
  "corral.model_call.attempts",
  MetricBoundaries.linear({ start: 1, width: 1, count: 10 }),
  "Attempts one logical model call took (across providers)"
)
/** Retries, by error kind and provider. */
export const retries = Metric.counter("corral.model_call.retries", {
  description: "Retries after a failed attempt, by error kind and provider",
  incremental: true
})
/** Failovers, by error kind and the provider left. */
export const failovers = Metric.counter("corral.model_call.failovers", {
  description: "Failovers to the next provider of the route, by error kind and provider left",
  incremental: true
})
/** Tokens per logical model call, by type (GenAI convention). */
export const tokenUsage = Metric.histogram(
  "gen_ai.client.token.usage",
  tokenBuckets,
  "Tokens used by one logical model call, by token type"
)
/** Tokens spent, by provider, model, org and type. */
export const tokens = Metric.counter("corral.tokens", {
  description: "Tokens spent, by provider, model, org and token type",
  incremental: true
})
/**
 * Money spent on model attempts, in micro-dollars (integers; failed attempts included), by provider, model, agent
 * and org. Only priced providers count (`pricing` in their configuration).
 */
export const cost = Metric.counter("corral.cost", {
  description: "Micro-dollars (1e-6 USD) spent on model attempts, by provider, model, agent and org",
  incremental: true
})
/** Duration of one tool call, by tool and server. */
export const toolDuration = Metric.histogram(
  "corral.tool_call.duration",
  seconds,
  "Duration of one tool call in seconds, by tool and server"
)
/** Latency of one transcript append to the store. */
export const storeAppend = Metric.histogram(
  "corral.store.append.duration",
  seconds,
  "Latency of one transcript append to the store, in seconds"
)
/** Turns written by one statement of the SQL store's group commit (appends of any sessions batched together). */
export const storeAppendBatch = Metric.histogram(
  "corral.store.append.batch_size",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 11 }),
  "Turns the SQL store wrote in one batched append statement"
)
/**
 * Writes waiting for a person's approval: the live approval tokens of the store (unspent, not expired), read from
 * the store at each `/metrics` scrape and every 5 s (server/MetricsRoute), so a restart or another process's
 * sessions do not skew it and expired tokens drop out.
 */
export const approvalsPending = Metric.gauge("corral.approvals.pending", {
  description: "Writes waiting for a person's approval (live approval tokens in the store)"
})

/** Finished spans the OTLP exporter could not deliver, by reason (telemetry/OtlpSpans). */
export const spansDropped = Metric.counter("corral.telemetry.spans.dropped", {
  description: "Finished spans not exported, by reason (queue_full, export_failed, export_timeout)",
  incremental: true
})

/** The unit of each metric, for the Prometheus suffix (`_seconds`); absent: a count. */
export const units: Readonly<Record<string, string>> = {
  "gen_ai.client.operation.duration": "seconds",
  "corral.tool_call.duration": "seconds",
  "corral.store.append.duration": "seconds"
}

// The label arrays already built, as a tree keyed by each key and value in turn: a lookup walks the pairs' own
// strings (their hashes cached by the engine) instead of joining them into a new string to hash on every update —
// this runs for every metric update of every model and tool call.
interface LabelNode {
  labels: ReadonlyArray<MetricLabel.MetricLabel> | undefined
  readonly next: Map<string, LabelNode>
}
const labelTree: LabelNode = { labels: undefined, next: new Map() }
let labelNodes = 0

const build = (pairs: ReadonlyArray<string>): ReadonlyArray<MetricLabel.MetricLabel> => {
  const built: Array<MetricLabel.MetricLabel> = []
  for (let i = 0; i + 1 < pairs.length; i += 2) built.push(MetricLabel.make(pairs[i]!, pairs[i + 1]!))
  return built
}

/** The label array of `pairs` (cached: the same pairs give the same array). */
export const labels = (...pairs: ReadonlyArray<string>): ReadonlyArray<MetricLabel.MetricLabel> => {
  let node = labelTree
  for (const part of pairs) {
    let child = node.next.get(part)
    if (child === undefined) {
      // Bounded by configuration; the guard only protects against a caller that passes ids by mistake.
      if (labelNodes >= 10_000) return build(pairs)
      child = { labels: undefined, next: new Map() }
      node.next.set(part, child)
      labelNodes++
    }
    node = child
  }
  return node.labels ??= build(pairs)
}

/** Adds `value` to `metric` under `labelPairs` (key, value, key, value …), synchronously. */
export const add = (
  metric: Metric.Metric.Counter<number> | Metric.Metric.Histogram<number>,
  value: number,
  ...labelPairs: ReadonlyArray<string>
): void => {
  metric.unsafeUpdate(value, labels(...labelPairs))
}

/** A store whose `appendTurn` is what `timeAppends` times. */
interface Appending {
  readonly appendTurn: (...args: never) => Effect.Effect<unknown, unknown>
}

const timed = new WeakMap<object, object>()

/**
 * `store` with every `appendTurn` timed into `corral.store.append.duration` (Clock time, so a TestClock reads 0).
 * The wrapper is made once per store and reused.
 */
export const timeAppends = <S extends Appending>(store: S): S => {
  const found = timed.get(store)
  if (found !== undefined) return found as S
  const append = store.appendTurn as (...args: ReadonlyArray<unknown>) => Effect.Effect<unknown, unknown>
  // Delegates everything else to `store` (whatever its shape: a literal or a class instance).
  const wrapped = Object.assign(Object.create(store) as object, {
    appendTurn: (...args: ReadonlyArray<unknown>) =>
      // The clock read in place, twice: this runs for every turn of every session.
      Effect.clockWith((clock) => {
        const start = clock.unsafeCurrentTimeMillis()
        return Effect.map(append(...args), (turn) => {
          storeAppend.unsafeUpdate((clock.unsafeCurrentTimeMillis() - start) / 1000, [])
          return turn
        })
      })
  }) as unknown as S
  timed.set(store, wrapped)
  return wrapped
}
