/**
 * A wait at a provider's storm gate is part of the attempt that waited, and the burst's record says so: the chain
 * records it as a `storm_wait` decision (stamped at its release, with how long it waited), which the viewer's waterfall
 * draws.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Ref, TestClock } from "effect"
import { ProviderError } from "../../src/domain/Errors.js"
import type { ModelReply } from "../../src/domain/Message.js"
import type { RailDecision } from "../../src/domain/Trajectory.js"
import { Usage } from "../../src/domain/Usage.js"
import type { ModelProvider, ModelRequest } from "../../src/model/ModelProvider.js"
import * as ProviderChain from "../../src/model/ProviderChain.js"
import * as StormGuard from "../../src/model/StormGuard.js"

const request: ModelRequest = { system: "", messages: [{ kind: "user", text: "go" }], tools: [] }
const ok: ModelReply = { text: "ok", toolCalls: [], finishReason: "stop", usage: Usage.zero, model: "m" }

/** A provider whose first request is throttled for `retryAfterMs`; every later one answers. */
const throttledOnce = (retryAfterMs: number): ModelProvider => {
  let n = 0
  return {
    name: "alpha",
    model: "m",
    timeoutMs: 120_000,
    maxAttempts: 3,
    complete: () =>
      ++n === 1
        ? Effect.fail(new ProviderError({ kind: "rate_limit", message: "slow down", retryAfterMs }))
        : Effect.succeed(ok)
  }
}

const call = (guard: ModelProvider, decisions: Array<RailDecision>) =>
  Effect.flatMap(Ref.make(ProviderChain.initialState), (state) =>
    ProviderChain.callModel({
      providers: [guard],
      state,
      request,
      onAttempt: () => Effect.void,
      onDecision: (decision) => Effect.sync(() => decisions.push(decision))
    }))

describe("ProviderChain: storm-gate waits", () => {
  it.effect("an attempt that waited at the gate is recorded as a storm_wait decision with its release and wait", () =>
    Effect.gen(function*() {
      const guard = StormGuard.wrap(throttledOnce(1_500), { jitterMs: 0 })
      // Another session's throttle closes the gate for 1.5 s.
      yield* Effect.either(guard.complete(request))
      yield* TestClock.adjust(500)
      const decisions: Array<RailDecision> = []
      const fiber = yield* Effect.fork(call(guard, decisions))
      yield* TestClock.adjust(1_000)
      yield* Fiber.join(fiber)
      expect(decisions).toEqual([{ _tag: "storm_wait", at: 1_500, provider: "alpha", waitMs: 1_000 }])
    }))

  it.effect("an attempt the gate releases at once records no storm_wait decision, only the retry", () =>
    Effect.gen(function*() {
      const guard = StormGuard.wrap(throttledOnce(0), { jitterMs: 0 })
      const decisions: Array<RailDecision> = []
      yield* TestClock.adjust(10)
      // Throttled with a Retry-After of 0: the gate is at once, so the retry goes through without waiting.
      yield* call(guard, decisions).pipe(
        Effect.fork,
        Effect.tap(() => TestClock.adjust(60_000)),
        Effect.flatMap(Fiber.join)
      )
      expect(decisions.map((d) => d._tag)).toEqual(["retry"])
    }))
})
