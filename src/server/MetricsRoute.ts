/**
 * MetricsRoute — `GET /metrics`: every metric of the process as Prometheus text (`telemetry/Prometheus`), for a
 * scraper. Like `/healthz` and `/readyz` it is an operational endpoint outside `/v1`: no authentication (a scraper
 * holds no API key; the labels carry configuration names, org ids and counts, never content or keys).
 *
 * The gauge of live session actors is read from the supervisor at every scrape and every 5 s (so an OTLP export
 * sees it move too).
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Layer, Schedule } from "effect"
import { Supervisor } from "../session/Supervisor.js"
import * as Metrics from "../telemetry/Metrics.js"
import * as Prometheus from "../telemetry/Prometheus.js"

/** The `/metrics` route on the API router, and the actor gauge's refresh (stopped with the layer). */
export const layer: Layer.Layer<never, never, Supervisor> = Layer.unwrapScoped(
  Effect.gen(function*() {
    const supervisor = yield* Supervisor
    const refresh = Effect.sync(() => Metrics.actorsActive.unsafeUpdate(supervisor.live(), []))
    yield* Effect.forkScoped(Effect.repeat(refresh, Schedule.spaced("5 seconds")))
    return HttpApiBuilder.Router.use((router) =>
      router.get(
        "/metrics",
        Effect.zipRight(
          refresh,
          Effect.sync(() =>
            HttpServerResponse.text(Prometheus.render(), {
              contentType: Prometheus.contentType,
              headers: { "cache-control": "no-store" }
            })
          )
        )
      )
    )
  })
)
