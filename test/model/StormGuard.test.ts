import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Either, Fiber, Random, TestClock } from "effect"
import { monitorEventLoopDelay } from "node:perf_hooks"
import type { ErrorKind } from "../../src/domain/ErrorKind.js"
import { ProviderError } from "../../src/domain/Errors.js"
import type { ModelReply } from "../../src/domain/Message.js"
import { Usage } from "../../src/domain/Usage.js"
import type { ModelProvider, ModelRequest } from "../../src/model/ModelProvider.js"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as StormGuard from "../../src/model/StormGuard.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Fake from "../support/FakeProvider.js"

const request: ModelRequest = { system: "", messages: [{ kind: "user", text: "go" }], tools: [] }
const ok: ModelReply = { text: "ok", toolCalls: [], finishReason: "stop", usage: Usage.zero, model: "m" }
const failure = (kind: ErrorKind, retryAfterMs?: number) =>
  new ProviderError({ kind, message: `inner ${kind}`, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) })

/**
 * An in-memory provider whose n-th request (1-based) gets `answer(n)`; it records the Clock time of each request
 * it actually received.
 */
const inner = (answer: (n: number) => Either.Either<ModelReply, ProviderError>, timeoutMs = 120_000) => {
  const received: Array<number> = []
  const provider: ModelProvider = {
    name: "inner",
    model: "m",
    timeoutMs,
    maxAttempts: 3,
    complete: () =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        received.push(now)
        return Either.match(answer(received.length), { onLeft: Effect.fail, onRight: Effect.succeed })
      })
  }
  return { provider, received }
}

/**
 * Runs every effect concurrently, moving the TestClock on in `step` ms steps until all are done. Each sleep fires
 * at its exact instant (TestClock runs due sleeps in order), so the step only bounds how often we poll.
 */
const runAll = <A, E>(effects: ReadonlyArray<Effect.Effect<A, E>>, step = 500) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(Effect.forEach(effects, Effect.either, { concurrency: "unbounded" }))
    for (let i = 0; i < 10_000; i++) {
      yield* Effect.yieldNow()
      const done = yield* Fiber.poll(fiber)
      if (done._tag === "Some") return yield* done.value
      yield* TestClock.adjust(step)
    }
    return yield* Effect.dieMessage("still running after 10 000 clock steps")
  })

const seeded = (seed: number) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.withRandom(effect, Random.make(seed))

describe("StormGuard: the shared gate", () => {
  it.effect("a throttle with Retry-After holds every other session, then releases them spread over the window", () =>
    Effect.gen(function*() {
      const { provider, received } = inner((n) =>
        n === 1 ? Either.left(failure("rate_limit", 1_000)) : Either.right(ok)
      )
      const guard = StormGuard.wrap(provider)
      const first = yield* Effect.either(guard.complete(request))
      expect(Either.isLeft(first)).toBe(true)
      expect(guard.status()).toMatchObject({ gateUntil: 1_000, gateSpreadMs: 1_000 })
      const results = yield* runAll(Array.from({ length: 100 }, () => guard.complete(request)))
      expect(results.every(Either.isRight)).toBe(true)
      const released = received.slice(1)
      // Nobody goes before the provider said; everybody goes within the window after it.
      expect(Math.min(...released)).toBeGreaterThanOrEqual(1_000)
      expect(Math.max(...released)).toBeLessThanOrEqual(2_000)
      // Spread, not a wall: no 100 ms slice of the window holds more than a quarter of the herd.
      const slices = new Map<number, number>()
      for (const at of released) slices.set(Math.floor(at / 100), (slices.get(Math.floor(at / 100)) ?? 0) + 1)
      expect(Math.max(...slices.values())).toBeLessThanOrEqual(25)
      expect(guard.status().gated).toBe(100)
    }).pipe(seeded(42)))

  it.effect("the same seed replays the same release schedule", () =>
    Effect.gen(function*() {
      const schedule = (seed: number) =>
        Effect.gen(function*() {
          const { provider, received } = inner((n) => n === 1 ? Either.left(failure("overloaded")) : Either.right(ok))
          const guard = StormGuard.wrap(provider)
          yield* Effect.either(guard.complete(request))
          const start = yield* Clock.currentTimeMillis
          yield* runAll(Array.from({ length: 20 }, () => guard.complete(request)))
          return received.slice(1).map((at) => at - start)
        }).pipe(seeded(seed))
      const a = yield* schedule(7)
      const b = yield* schedule(7)
      const c = yield* schedule(8)
      expect(a).toEqual(b)
      expect(a).not.toEqual(c)
    }))

  it.effect("without Retry-After the gate closes for a jittered pause of [pause/2, pause]", () =>
    Effect.gen(function*() {
      const { provider } = inner(() => Either.left(failure("rate_limit")))
      const guard = StormGuard.wrap(provider, { pauseMs: 2_000 })
      yield* Effect.either(guard.complete(request))
      const { gateUntil, gateSpreadMs } = guard.status()
      expect(gateUntil).toBeGreaterThanOrEqual(1_000)
      expect(gateUntil).toBeLessThanOrEqual(2_000)
      expect(gateSpreadMs).toBe(2_000)
    }).pipe(seeded(1)))

  it.effect("a Retry-After beyond the cap does not close the gate: sessions fail over instead of waiting", () =>
    Effect.gen(function*() {
      const { provider, received } = inner((n) =>
        n === 1 ? Either.left(failure("rate_limit", 274_579_000)) : Either.right(ok)
      )
      const guard = StormGuard.wrap(provider)
      yield* Effect.either(guard.complete(request))
      expect(guard.status().gateUntil).toBe(0)
      expect(Either.isRight(yield* Effect.either(guard.complete(request)))).toBe(true)
      expect(received).toEqual([0, 0])
    }))

  it.effect("no wait at the gate exceeds half of the provider's attempt timeout", () =>
    Effect.gen(function*() {
      const { provider, received } = inner(
        (n) => n === 1 ? Either.left(failure("rate_limit", 50_000)) : Either.right(ok),
        10_000
      )
      const guard = StormGuard.wrap(provider)
      yield* Effect.either(guard.complete(request))
      yield* runAll([guard.complete(request)])
      expect(received[1]).toBeLessThanOrEqual(5_000)
    }).pipe(seeded(3)))
})

describe("StormGuard: the circuit breaker", () => {
  it.effect("opens after N consecutive transient failures; attempts then fail fast with the same kind", () =>
    Effect.gen(function*() {
      const { provider, received } = inner(() => Either.left(failure("server")))
      const guard = StormGuard.wrap(provider, { failureThreshold: 3, openMs: 10_000 })
      for (let i = 0; i < 3; i++) yield* Effect.either(guard.complete(request))
      const { openUntil } = guard.status()
      expect(openUntil).toBeGreaterThanOrEqual(5_000)
      expect(openUntil).toBeLessThanOrEqual(10_000)
      const rejected = yield* Effect.flip(guard.complete(request))
      expect(rejected).toMatchObject({ kind: "server", provider: "inner" })
      expect(rejected.message).toContain("circuit open")
      // The Retry-After lands in a jittered slot just after the open period, so rejected sessions do not return at once.
      expect(rejected.retryAfterMs).toBeGreaterThanOrEqual(openUntil)
      expect(received).toHaveLength(3)
      expect(guard.status()).toMatchObject({ opened: 1, rejected: 1 })
    }).pipe(seeded(5)))

  it.effect("half-open after the period: one more failure reopens at once, a success closes", () =>
    Effect.gen(function*() {
      let healthy = false
      const { provider, received } = inner(() => healthy ? Either.right(ok) : Either.left(failure("timeout")))
      const guard = StormGuard.wrap(provider, { failureThreshold: 3, openMs: 4_000 })
      for (let i = 0; i < 3; i++) yield* Effect.either(guard.complete(request))
      yield* TestClock.adjust(4_001)
      yield* Effect.either(guard.complete(request)) // the probe fails: reopened at once
      expect(received).toHaveLength(4)
      expect(guard.status().opened).toBe(2)
      expect(Either.isLeft(yield* Effect.either(guard.complete(request)))).toBe(true)
      expect(received).toHaveLength(4)
      yield* TestClock.adjust(8_001)
      healthy = true
      expect(Either.isRight(yield* Effect.either(guard.complete(request)))).toBe(true)
      expect(guard.status().consecutiveFailures).toBe(0)
    }).pipe(seeded(9)))

  it.effect("rate limits do not open the circuit; a success or a coherent answer resets the count", () =>
    Effect.gen(function*() {
      const answers: Array<Either.Either<ModelReply, ProviderError>> = [
        Either.left(failure("server")),
        Either.left(failure("server")),
        Either.right(ok),
        Either.left(failure("server")),
        Either.left(failure("bad_request")),
        ...Array.from({ length: 10 }, () => Either.left(failure("rate_limit", 0)))
      ]
      const { provider } = inner((n) => answers[n - 1] ?? Either.right(ok))
      const guard = StormGuard.wrap(provider, { failureThreshold: 3 })
      // One at a time, each past the gate the previous throttle closed.
      for (let i = 0; i < answers.length; i++) yield* runAll([guard.complete(request)])
      expect(guard.status()).toMatchObject({ opened: 0, consecutiveFailures: 0 })
    }))

  it.effect("an attempt interrupted from outside (the chain's timeout) counts as a timeout failure", () =>
    Effect.gen(function*() {
      const hang: ModelProvider = {
        name: "hang",
        model: "m",
        timeoutMs: 1_000,
        maxAttempts: 1,
        complete: () => Effect.never
      }
      const guard = StormGuard.wrap(hang, { failureThreshold: 2 })
      for (let i = 0; i < 2; i++) {
        const fiber = yield* Effect.fork(guard.complete(request).pipe(Effect.timeout(1_000)))
        yield* TestClock.adjust(1_000)
        yield* Fiber.await(fiber)
      }
      expect(guard.status().opened).toBe(1)
      expect(yield* Effect.flip(guard.complete(request))).toMatchObject({ kind: "timeout" })
    }).pipe(seeded(11)))
})

/** The busiest 100 ms window of `times` (milliseconds), and the spread from first to last. */
const windows = (times: ReadonlyArray<number>) => {
  const sorted = [...times].sort((a, b) => a - b)
  let busiest = 0
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while ((sorted[i] ?? 0) - (sorted[j] ?? 0) >= 100) j++
    busiest = Math.max(busiest, i - j + 1)
  }
  const spreadMs = sorted.length > 0 ? Math.round((sorted.at(-1) ?? 0) - (sorted[0] ?? 0)) : 0
  return { busiest, spreadMs, share: sorted.length > 0 ? busiest / sorted.length : 0 }
}
const percent = (share: number) => `${(share * 100).toFixed(1)}%`

describe("StormGuard: a storm over real HTTP", () => {
  const sessions = 200
  const limited = 150
  const retryAfterSeconds = 2

  /**
   * Runs `sessions` concurrent sessions against a fake that holds the whole first wave, then answers it at once —
   * the first `limited` requests with 429 + Retry-After, the rest normally — the moment a provider sheds load.
   */
  const storm = (guarded: boolean) =>
    Effect.scoped(
      Effect.gen(function*() {
        let waveArrived: () => void = () => undefined
        const wave = new Promise<void>((resolve) => {
          waveArrived = resolve
        })
        const fake = yield* Fake.make({
          fallback: (req) => {
            if (req.n === sessions) waveArrived()
            if (req.n > sessions) return Fake.demo(req)
            return Fake.after(
              wave,
              req.n <= limited ? Fake.rateLimited({ seconds: retryAfterSeconds }) : Fake.demo(req)
            )
          }
        })
        const adapter = yield* OpenAiCompat.make({ name: "primary", model: "fake-model", baseUrl: fake.openAiBaseUrl })
        const planned: Array<number> = []
        const provider = guarded ? StormGuard.wrap(adapter, { onRelease: ({ slot }) => planned.push(slot) }) : adapter
        const spec = Harness.agent()
        const lag = monitorEventLoopDelay({ resolution: 10 })
        lag.enable()
        const landed = yield* Effect.forEach(
          Array.from({ length: sessions }, (_, i) => i),
          (i) =>
            Harness.runBurst({
              spec,
              session: Harness.session(spec, { id: `ses_storm_${i}` }),
              prompt: `Incident ${i}: why is checkout failing?`
            }),
          { concurrency: "unbounded" }
        ).pipe(Effect.provide(Harness.layer({ providers: [provider] })))
        lag.disable()
        // A retry is a request whose conversation the provider has already seen.
        const seen = new Set<string>()
        const retries: Array<number> = []
        for (const req of fake.requests) {
          const key = JSON.stringify(req.body.messages)
          if (seen.has(key)) retries.push(req.at)
          seen.add(key)
        }
        const observed = windows(retries)
        const scheduled = windows(planned)
        const stallMs = Math.round(lag.max / 1e6)
        const report = `${fake.requests.length} requests received; ${retries.length} retries arrived over ` +
          `${observed.spreadMs} ms, busiest 100 ms window ${observed.busiest} (${percent(observed.share)})` +
          (guarded
            ? `; the gate released ${planned.length} attempts over ${scheduled.spreadMs} ms, busiest 100 ms ` +
              `window ${scheduled.busiest} (${percent(scheduled.share)})`
            : "") +
          `; longest event-loop stall ${stallMs} ms`
        return { landed, requests: fake.requests.length, retries: retries.length, observed, scheduled, stallMs, report }
      }).pipe(Effect.provide(NodeHttpClient.layerUndici))
    )

  it.live(
    `${sessions} sessions against a rate-limiting provider: retries spread, no synchronised wave, every session lands`,
    () =>
      Effect.gen(function*() {
        const result = yield* storm(true)
        console.info(`storm, guarded: ${result.report}`)
        expect(result.landed).toHaveLength(sessions)
        expect(result.landed.every((l) => l.reason === "completed" && l.report.source === "model")).toBe(true)
        // Each session: one opening call and one finalize call; the throttled ones retried once.
        expect(result.retries).toBe(limited)
        expect(result.requests).toBe(2 * sessions + limited)
        // The gate plans releases uniformly over ~2 s: a 100 ms window expects ~5% of the herd. (Unguarded,
        // `storm(false)`, every throttled session sleeps the same Retry-After: ~90% land in one window.)
        expect(result.scheduled.share).toBeLessThanOrEqual(0.3)
        expect(result.scheduled.spreadMs).toBeGreaterThanOrEqual(1_000)
        // What the provider observed matches the plan unless this process itself stalled (GC, an overloaded
        // machine): a stalled event loop fires every timer that fell due during the stall at once, whatever the
        // plan. Observed arrivals are asserted only when the process kept time.
        if (result.stallMs < 100) expect(result.observed.share).toBeLessThanOrEqual(0.3)
      }),
    60_000
  )
})
