/**
 * `corral/providers` from an embedder's side: a real adapter, given as a layer, reaches a model over HTTP (the fake
 * provider, a real server on 127.0.0.1) and runs a session through `Corral` end to end.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { Corral } from "../../src/Corral.js"
import { LiveEvents, MemoryStore, Principal, ToolRegistry } from "../../src/index.js"
import { Anthropic, defaultTier, layerHttpClient, OpenAiCompat, Providers } from "../../src/providers.js"
import type { ModelProvider } from "../../src/providers.js"
import * as Fake from "../support/FakeProvider.js"

const me = new Principal({ orgId: "acme", userId: "ops" })

const status = ToolRegistry.define<{ service: string }>({
  name: "status",
  description: "Health of a service.",
  parameters: { type: "object", properties: { service: { type: "string" } }, required: ["service"] },
  run: ({ service }) => Effect.succeed(`${service}: degraded`)
})

/** The embedding as a host writes it: Corral over its ports, the model routes from `corral/providers`. */
const runtime = <E>(providers: Layer.Layer<Providers, E, never>) =>
  Corral.layer().pipe(
    Layer.provide(Layer.mergeAll(providers, LiveEvents.layer, ToolRegistry.layer([status]))),
    Layer.provide(MemoryStore.layerMemory)
  )

const triage = Effect.gen(function*() {
  const corral = yield* Corral
  yield* corral.publishAgent(me, {
    id: "triage",
    version: 1,
    name: "Triage",
    instructions: "Find the cause of the incident.",
    tools: ["status"]
  })
  return yield* corral.run(me, { agentId: "triage", scope: "incident:INC-42", prompt: "Why is checkout down?" })
})

describe("corral/providers", () => {
  it.scopedLive("an OpenAI-compatible adapter in Providers.layer runs a session end to end", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const providers = Providers.layer({
        [defaultTier]: [
          OpenAiCompat.make({
            name: "fake-openai",
            baseUrl: fake.openAiBaseUrl,
            model: "fake-model",
            apiKey: Redacted.make("sk-test")
          })
        ]
      }).pipe(Layer.provide(layerHttpClient))
      const view = yield* triage.pipe(Effect.provide(runtime(providers)))

      expect(view.exitReason).toBe("completed")
      expect(view.toolCalls).toBe(1)
      expect(view.report?.data).toEqual(Fake.demoReport)
      // The demo conversation: a tool call, an answer, the finalize call; every one with the key, over the wire.
      expect(fake.requests.length).toBeGreaterThanOrEqual(3)
      expect(fake.requests.every((r) => r.wire === "openai" && r.headers.authorization === "Bearer sk-test")).toBe(
        true
      )
      expect(fake.requests[0]?.body.model).toBe("fake-model")
    }))

  it.scopedLive("Anthropic.layer alone is the default route", () =>
    Effect.gen(function*() {
      const fake = yield* Fake.make()
      const providers = Anthropic.layer({ name: "fake-claude", baseUrl: fake.anthropicBaseUrl, model: "claude-x" })
        .pipe(Layer.provide(layerHttpClient))
      const view = yield* triage.pipe(Effect.provide(runtime(providers)))

      expect(view.exitReason).toBe("completed")
      expect(view.report?.data).toEqual(Fake.demoReport)
      expect(fake.requests.every((r) => r.wire === "anthropic")).toBe(true)
    }))

  it.effect("Providers.layer builds an adapter listed in several tiers once, and keeps the failover order", () =>
    Effect.gen(function*() {
      let builds = 0
      const named = (name: string): ModelProvider => ({
        name,
        model: name,
        timeoutMs: 1_000,
        maxAttempts: 1,
        complete: () => Effect.die("not called")
      })
      const shared = Effect.sync(() => {
        builds++
        return named("shared")
      })
      const routes = yield* Providers.pipe(
        Effect.provide(Providers.layer({ [defaultTier]: [named("first"), shared], fast: [shared] }))
      )
      expect(builds).toBe(1)
      expect(routes.tiers).toEqual(["default", "fast"])
      const names = (tier: string) =>
        routes.route(tier).pipe((o) => o._tag === "Some" ? o.value.map((p) => p.name) : [])
      expect(names(defaultTier)).toEqual(["first", "shared"])
      expect(names("fast")).toEqual(["shared"])
      const [a, b] = [routes.route(defaultTier), routes.route("fast")]
      expect(a._tag === "Some" && b._tag === "Some" && a.value[1] === b.value[0]).toBe(true)
    }))
})
