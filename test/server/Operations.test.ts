/**
 * The operations routes: each provider's state as its storm guard sees it (healthy, throttled until the gate
 * reopens, circuit open, or unguarded), the bursts of the last hour by exit reason, and both behind the bearer keys.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import { ProviderError } from "../../src/domain/Errors.js"
import type { ModelReply } from "../../src/domain/Message.js"
import { Usage } from "../../src/domain/Usage.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import * as StormGuard from "../../src/model/StormGuard.js"
import { sha256 } from "../../src/server/Authentication.js"
import * as ExitWindow from "../../src/server/ExitWindow.js"
import { providerInfo } from "../../src/server/OperationsHandlers.js"
import * as Server from "../../src/server/Server.js"
import { baseUrl, eventually, raw, settings } from "../support/ServerHarness.js"

const ok: ModelReply = { text: "ok", toolCalls: [], finishReason: "stop", usage: Usage.zero, model: "m" }
const request = { system: "", messages: [{ kind: "user" as const, text: "go" }], tools: [] }

/** A provider that fails every request with `error`, or answers when `error` is undefined. */
const provider = (error?: ProviderError): ModelProvider => ({
  name: "alpha",
  model: "alpha-1",
  timeoutMs: 120_000,
  maxAttempts: 3,
  complete: () => error === undefined ? Effect.succeed(ok) : Effect.fail(error)
})

describe("providerInfo", () => {
  it.effect("a guard that saw no throttle is healthy", () =>
    Effect.gen(function*() {
      const guard = StormGuard.wrap(provider())
      yield* guard.complete(request)
      expect(providerInfo(guard, ["default"], 0)).toMatchObject({
        name: "alpha",
        model: "alpha-1",
        tiers: ["default"],
        state: "healthy",
        storms: 0
      })
    }))

  it.effect("a throttle closes the gate: throttled, with the gate's release time, until it reopens", () =>
    Effect.gen(function*() {
      const guard = StormGuard.wrap(
        provider(new ProviderError({ kind: "rate_limit", message: "slow down", retryAfterMs: 30_000 })),
        { jitterMs: 0 }
      )
      yield* Effect.either(guard.complete(request))
      expect(providerInfo(guard, ["default"], 1_000)).toMatchObject({
        state: "throttled",
        gateUntil: new Date(30_000).toISOString(),
        storms: 1
      })
      expect(providerInfo(guard, ["default"], 30_000).state).toBe("healthy")
    }))

  it.effect("five transient failures in a row open the circuit: circuit_open until it closes", () =>
    Effect.gen(function*() {
      const guard = StormGuard.wrap(provider(new ProviderError({ kind: "server", message: "boom" })), {
        openMs: 10_000
      })
      for (let i = 0; i < 5; i++) yield* Effect.either(guard.complete(request))
      const info = providerInfo(guard, ["default"], 0)
      expect(info).toMatchObject({ state: "circuit_open", opened: 1 })
      const until = Date.parse(info.openUntil!)
      expect(until).toBeGreaterThanOrEqual(5_000)
      expect(until).toBeLessThanOrEqual(10_000)
      yield* TestClock.adjust(10_000)
      expect(providerInfo(guard, ["default"], 10_000).state).toBe("healthy")
    }))

  it("a provider without a guard (the scripted demo model) is unguarded", () => {
    expect(providerInfo(provider(), ["demo"], 0)).toEqual({
      name: "alpha",
      model: "alpha-1",
      tiers: ["demo"],
      state: "unguarded"
    })
  })
})

describe("ExitWindow.between", () => {
  const sample = (at: number, counts: ExitWindow.Sample["counts"]): ExitWindow.Sample => ({ at, counts })

  it("counts the bursts since the oldest sample inside the hour, and says from when", () => {
    const hour = ExitWindow.windowMs
    const samples = [
      sample(0, { completed: 10 }),
      sample(hour / 2, { completed: 12, burst_limit: 1 }),
      sample(hour + 1_000, { completed: 15, burst_limit: 1 })
    ]
    const counts = ExitWindow.between(samples, sample(hour + 2_000, { completed: 20, burst_limit: 3, deadline: 1 }))
    // The sample at 0 is more than an hour before now: the window starts at the one after it.
    expect(counts).toEqual({
      from: hour / 2,
      to: hour + 2_000,
      byReason: { completed: 8, burst_limit: 2, deadline: 1 },
      total: 11
    })
  })

  it("keeps only the samples a window can still start from", () => {
    const hour = ExitWindow.windowMs
    const samples = [sample(0, {}), sample(1, {}), sample(hour, {}), sample(hour + 5, {})]
    ExitWindow.prune(samples, hour + 2)
    expect(samples.map((s) => s.at)).toEqual([hour, hour + 5])
  })
})

const key = "ck_ops_0123456789abcdef"

layer(
  Server.layer(settings({ apiKeys: [{ sha256: sha256(key), orgId: "acme", userId: "ops" }] })),
  { excludeTestServices: true }
)("the operations routes", (it) => {
  it.effect(
    "answer 401 without a key; with one, list the providers and count the last hour's exits",
    () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        for (const path of ["/v1/providers", "/v1/exits"]) {
          expect((yield* raw(`${url}${path}`)).status).toBe(401)
        }
        const auth = { authorization: `Bearer ${key}` }
        const providers = JSON.parse((yield* raw(`${url}/v1/providers`, { headers: auth })).text)
        expect(providers.providers).toEqual([
          { name: "demo", model: "corral-demo-script", tiers: ["demo"], state: "unguarded" }
        ])
        const before = JSON.parse((yield* raw(`${url}/v1/exits`, { headers: auth })).text)
        const started = yield* raw(`${url}/v1/sessions?wait=true`, {
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ agentId: "demo", scope: "demo:ops", prompt: "Why are payments failing?" }),
          timeoutMs: 30_000
        })
        expect(JSON.parse(started.text).exitReason).toBe("completed")
        const after = yield* eventually(
          "the completed burst in the window",
          Effect.map(raw(`${url}/v1/exits`, { headers: auth }), (r) => {
            const body = JSON.parse(r.text)
            return body.byReason.completed > before.byReason.completed ? body : undefined
          })
        )
        expect(after.total).toBe(before.total + 1)
        expect(Object.keys(after.byReason)).toHaveLength(17)
        expect(Date.parse(after.from)).toBeLessThanOrEqual(Date.parse(after.to))
      }),
    { timeout: 60_000 }
  )
})
