/**
 * A test-owned OTLP/HTTP receiver: a real HTTP server on 127.0.0.1 (random port) that accepts the JSON protocol on
 * `/v1/traces` and `/v1/metrics` (answering `{}` like a collector) and keeps what it got (protobuf requests are
 * accepted and kept raw in `requests`), so a test can check what
 * a `corral` process exported. Spans are flattened with their attributes and events decoded from OTLP's
 * `{ key, value: { stringValue | intValue | … } }` form.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** An OTLP attribute value, decoded. */
export type Value = string | number | boolean | ReadonlyArray<Value> | undefined

/** One exported span, flattened. */
export interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly attributes: Readonly<Record<string, Value>>
  readonly events: ReadonlyArray<{ readonly name: string; readonly attributes: Readonly<Record<string, Value>> }>
  readonly resource: Readonly<Record<string, Value>>
}

/** One exported metric data point set, flattened: the metric name and its data points' attributes. */
export interface MetricPoint {
  readonly name: string
  readonly attributes: Readonly<Record<string, Value>>
  readonly value: unknown
}

/** A running receiver. */
export interface Receiver {
  /** `http://127.0.0.1:<port>`: the value of `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly endpoint: string
  readonly spans: () => ReadonlyArray<Span>
  readonly metrics: () => ReadonlyArray<MetricPoint>
  /** Every request: path, content type, headers and body. */
  readonly requests: () => ReadonlyArray<
    {
      readonly path: string
      readonly contentType: string
      readonly headers: http.IncomingHttpHeaders
      readonly body: Buffer
    }
  >
}

type AnyValue = {
  readonly stringValue?: string
  readonly intValue?: string | number
  readonly doubleValue?: number
  readonly boolValue?: boolean
  readonly arrayValue?: { readonly values?: ReadonlyArray<AnyValue> }
}
type KeyValue = { readonly key: string; readonly value: AnyValue }

const decode = (value: AnyValue | undefined): Value => {
  if (value === undefined) return undefined
  if (value.stringValue !== undefined) return value.stringValue
  if (value.intValue !== undefined) return Number(value.intValue)
  if (value.doubleValue !== undefined) return value.doubleValue
  if (value.boolValue !== undefined) return value.boolValue
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(decode)
  return undefined
}

const attributes = (list: ReadonlyArray<KeyValue> | undefined): Record<string, Value> =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, decode(kv.value)]))

/* eslint-disable @typescript-eslint/no-explicit-any */
const spansOf = (body: any): Array<Span> =>
  (body.resourceSpans ?? []).flatMap((rs: any) =>
    (rs.scopeSpans ?? []).flatMap((ss: any) =>
      (ss.spans ?? []).map((s: any): Span => ({
        traceId: s.traceId,
        spanId: s.spanId,
        parentSpanId: s.parentSpanId === "" ? undefined : s.parentSpanId,
        name: s.name,
        attributes: attributes(s.attributes),
        events: (s.events ?? []).map((e: any) => ({ name: e.name, attributes: attributes(e.attributes) })),
        resource: attributes(rs.resource?.attributes)
      }))
    )
  )

const metricsOf = (body: any): Array<MetricPoint> =>
  (body.resourceMetrics ?? []).flatMap((rm: any) =>
    (rm.scopeMetrics ?? []).flatMap((sm: any) =>
      (sm.metrics ?? []).flatMap((m: any) => {
        const data = m.sum ?? m.gauge ?? m.histogram ?? m.exponentialHistogram ?? m.summary ?? {}
        return (data.dataPoints ?? []).map((p: any): MetricPoint => ({
          name: m.name,
          attributes: attributes(p.attributes),
          value: p.asDouble ?? p.asInt ?? { count: p.count, sum: p.sum }
        }))
      })
    )
  )
/* eslint-enable @typescript-eslint/no-explicit-any */

/**
 * Starts a receiver for the scope; closed with it. `refuseTraces`: answer every `/v1/traces` request with that
 * status (kept in `requests`, not decoded) — a collector that refuses what it is sent.
 */
export const makeWith = (options: { readonly refuseTraces?: number }): Effect.Effect<Receiver, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(() => {
      const spans: Array<Span> = []
      const metrics: Array<MetricPoint> = []
      const requests: Array<{ path: string; contentType: string; headers: http.IncomingHttpHeaders; body: Buffer }> = []
      const server = http.createServer((request, response) => {
        const chunks: Array<Buffer> = []
        request.on("data", (chunk: Buffer) => chunks.push(chunk))
        request.on("end", () => {
          const path = request.url ?? ""
          const contentType = request.headers["content-type"] ?? ""
          const body = Buffer.concat(chunks)
          requests.push({ path, contentType, headers: request.headers, body })
          if (options.refuseTraces !== undefined && path === "/v1/traces") {
            response.writeHead(options.refuseTraces, { "content-type": "application/json" }).end("{}")
            return
          }
          // The protobuf protocol is kept raw (see `requests`), answered with an empty ExportServiceResponse.
          if (request.method === "POST" && contentType.startsWith("application/x-protobuf")) {
            response.writeHead(200, { "content-type": "application/x-protobuf" }).end()
            return
          }
          if (request.method !== "POST" || !contentType.startsWith("application/json")) {
            response.writeHead(415, { "content-type": "application/json" }).end("{}")
            return
          }
          try {
            const body: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"))
            if (path === "/v1/traces") spans.push(...spansOf(body))
            else if (path === "/v1/metrics") metrics.push(...metricsOf(body))
            else {
              response.writeHead(404).end()
              return
            }
            response.writeHead(200, { "content-type": "application/json" }).end("{}")
          } catch {
            response.writeHead(400).end()
          }
        })
      })
      return new Promise<{ server: http.Server; receiver: Receiver }>((resolve) =>
        server.listen(0, "127.0.0.1", () => {
          const port = (server.address() as AddressInfo).port
          resolve({
            server,
            receiver: {
              endpoint: `http://127.0.0.1:${port}`,
              spans: () => spans,
              metrics: () => metrics,
              requests: () => requests
            }
          })
        })
      )
    }),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  ).pipe(Effect.map(({ receiver }) => receiver))

/** A receiver that takes everything (see `makeWith`). */
export const make: Effect.Effect<Receiver, never, Scope.Scope> = makeWith({})
