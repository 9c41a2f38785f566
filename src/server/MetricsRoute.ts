/**
 * MetricsRoute — `GET /metrics`: every metric of the process as Prometheus text (`telemetry/Prometheus`), for a
 * scraper. Like `/healthz` and `/readyz` it is an operational endpoint outside `/v1`: no authentication (a scraper
 * holds no API key; the labels carry configuration names, org ids and counts, never content or keys).
 *
 * The gauge of live session actors is read from the supervisor, and the gauge of pending approvals from the store
 * (its live tokens, counted up to `approvalsCap`), at every scrape and every 5 s (so an OTLP export sees them move
 * too). The store read is bounded by `approvalsTimeout`: a store that does not answer in time leaves the gauge at
 * its last value and logs a warning; a scrape never waits longer than that.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Layer, Schedule } from "effect"
import { Supervisor } from "../session/Supervisor.js"
import { SessionStore } from "../store/SessionStore.js"
import * as Metrics from "../telemetry/Metrics.js"
import * as Prometheus from "../telemetry/Prometheus.js"

/** The most pending approvals counted (a bound on the store query; beyond it the gauge reads this). */
const approvalsCap = 100_000
/** How long one refresh waits for the store's count. */
const approvalsTimeout = "2 seconds"

/** The `/metrics` route on the API router, and the actor gauge's refresh (stopped with the layer). */
export const layer: Layer.Layer<never, never, Supervisor | SessionStore> = Layer.unwrapScoped(
  Effect.gen(function*() {
    const supervisor = yield* Supervisor
    const store = yield* SessionStore
    const count = store.countPendingApprovals
    const pending = count === undefined ?
      Effect.void :
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        count(now, approvalsCap).pipe(
          Effect.timeout(approvalsTimeout),
          Effect.tap((n) => Effect.sync(() => Metrics.approvalsPending.unsafeUpdate(n, []))),
          Effect.catchAll((error) =>
            Effect.logWarning(
              `metrics: pending approvals not refreshed (kept at the last value): ${
                error._tag === "TimeoutException"
                  ? `the store did not answer within ${approvalsTimeout}`
                  : error.message
              }`
            )
          )
        ))
    const refresh = Effect.zipRight(
      Effect.sync(() => {
        Metrics.actorsActive.unsafeUpdate(supervisor.live(), [])
        Metrics.burstsWaiting.unsafeUpdate(supervisor.admission().waiting, [])
      }),
      pending
    )
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
