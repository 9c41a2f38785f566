/**
 * OperationsHandlers — the handlers of `OperationsApi`: every provider of every route with its storm guard's state
 * read now (a provider listed in several tiers is one provider, one guard), and the exit window.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Clock, Effect, Layer } from "effect"
import * as ExitReasons from "../domain/ExitReason.js"
import type { ModelProvider } from "../model/ModelProvider.js"
import { Providers } from "../model/ModelProvider.js"
import * as StormGuard from "../model/StormGuard.js"
import { Api } from "./Api.js"
import * as ExitWindow from "./ExitWindow.js"
import type { ProviderInfo } from "./OperationsApi.js"

const iso = (millis: number) => new Date(millis).toISOString()

/** The view of one provider at `now`, with the tiers that route to it. */
export const providerInfo = (provider: ModelProvider, tiers: ReadonlyArray<string>, now: number): ProviderInfo => {
  const base = { name: provider.name, model: provider.model, tiers }
  const status = StormGuard.statusOf(provider)
  if (status === undefined) return { ...base, state: "unguarded" }
  const open = now < status.openUntil
  const throttled = !open && status.storm && (now < status.gateUntil || status.waiting > 0)
  return {
    ...base,
    state: open ? "circuit_open" : throttled ? "throttled" : "healthy",
    ...(throttled ? { gateUntil: iso(status.gateUntil) } : {}),
    ...(open ? { openUntil: iso(status.openUntil) } : {}),
    rate: status.rate,
    waiting: status.waiting,
    consecutiveFailures: status.consecutiveFailures,
    storms: status.storms,
    gated: status.gated,
    opened: status.opened,
    rejected: status.rejected
  }
}

const handlers = HttpApiBuilder.group(Api, "operations", (handlers) =>
  Effect.gen(function*() {
    const providers = yield* Providers
    const window = yield* ExitWindow.ExitWindow
    return handlers
      .handle("listProviders", () =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          const seen = new Map<ModelProvider, Array<string>>()
          for (const tier of providers.tiers) {
            const route = providers.route(tier)
            if (route._tag === "None") continue
            for (const provider of route.value) seen.set(provider, [...(seen.get(provider) ?? []), tier])
          }
          return {
            at: iso(now),
            providers: [...seen].map(([provider, tiers]) => providerInfo(provider, tiers, now))
          }
        }))
      .handle("recentExits", () =>
        Effect.map(window.counts, (counts) => ({
          from: iso(counts.from),
          to: iso(counts.to),
          byReason: Object.fromEntries(ExitReasons.all.map((r) => [r, counts.byReason[r] ?? 0])) as Record<
            ExitReasons.ExitReason,
            number
          >,
          total: counts.total
        })))
  }))

/** The `operations` group's handlers, with their exit window (sampling while the server runs). Needs `Providers`. */
export const layer = handlers.pipe(Layer.provide(ExitWindow.layer))
