import { describe, expect, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, FastCheck as fc, Fiber, Option, Random, Ref } from "effect"
import * as TestClock from "effect/TestClock"
import type { ErrorKind } from "../../src/domain/ErrorKind.js"
import type { ProviderError, ProviderExhausted } from "../../src/domain/Errors.js"
import type { RailDecision } from "../../src/domain/Trajectory.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as ProviderChain from "../../src/model/ProviderChain.js"
import * as ProviderErrors from "../../src/model/ProviderError.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Limits from "../../src/rails/Limits.js"
import * as Retry from "../../src/rails/Retry.js"

const request: ModelRequest = { system: "You are a test.", messages: [{ kind: "user", text: "go" }], tools: [] }
const cap = Limits.defaults.retryAfterCapMs

/** Forks `effect` and advances the TestClock a minute at a time until it is done: sleeps fire at their exact instant. */
const runTimed = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    for (let minute = 0; minute < 10_000; minute++) {
      // Let the fiber run up to its next sleep first: a call that never sleeps needs no clock at all.
      yield* Effect.yieldNow()
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return done.value
      yield* TestClock.adjust("60 seconds")
    }
    return yield* Effect.dieMessage("the call never finished")
  })

/** One chain call over `providers` with a fresh (or given) state; returns the exit, the state and the attempts. */
const call = (
  providers: ReadonlyArray<Scripted.Scripted>,
  state?: Ref.Ref<ProviderChain.ChainState>
) =>
  Effect.gen(function*() {
    const ref = state ?? (yield* Ref.make(ProviderChain.initialState))
    const attempts: Array<ProviderChain.AttemptRecord> = []
    const exit = yield* runTimed(
      ProviderChain.callModel({
        providers,
        state: ref,
        request,
        onAttempt: (record) => Effect.sync(() => attempts.push(record))
      })
    )
    return { exit, state: yield* Ref.get(ref), attempts, ref }
  })

const failureOf = <A>(exit: Exit.Exit<A, ProviderError | ProviderExhausted>) =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined

const pair = (first: ReadonlyArray<Scripted.Step>, options: { readonly maxAttempts?: number } = {}) =>
  [
    Scripted.make({ name: "A", script: first, ...options }),
    Scripted.make({ name: "B", script: [Scripted.text("from B")] })
  ] as const

describe("ProviderChain.callModel classification", () => {
  it.effect.each(["rate_limit", "overloaded", "server", "timeout"] as const)(
    "retries %s on the same provider",
    (kind) =>
      Effect.gen(function*() {
        const [a, b] = pair([Scripted.fault(kind), Scripted.text("from A")])
        const { attempts, exit, state } = yield* call([a, b])
        expect(Exit.isSuccess(exit) && exit.value.provider.name).toBe("A")
        expect([a.requests.length, b.requests.length]).toEqual([2, 0])
        expect(state).toEqual({ index: 0, exhausted: false })
        expect(attempts.map((record) => record.error?.kind ?? "reply")).toEqual([kind, "reply"])
      })
  )

  it.effect.each(["auth", "quota"] as const)(
    "fails over on %s at once, without sleeping",
    (kind) =>
      Effect.gen(function*() {
        const [a, b] = pair([Scripted.fault(kind), Scripted.text("from A")])
        const { attempts, exit, state } = yield* call([a, b])
        expect(Exit.isSuccess(exit) && exit.value.reply.text).toBe("from B")
        expect([a.requests.length, b.requests.length]).toEqual([1, 1])
        expect(state).toEqual({ index: 1, exhausted: false })
        expect(attempts.map((record) => record.startedAt)).toEqual([0, 0])
      })
  )

  it.effect.each(["context_overflow", "bad_request", "refused", "filtered"] as const)(
    "fails now on %s, leaving the index where it was",
    (kind) =>
      Effect.gen(function*() {
        const [a, b] = pair([Scripted.fault(kind), Scripted.text("from A")])
        const { exit, state } = yield* call([a, b])
        expect(failureOf(exit)).toMatchObject({ _tag: "ProviderError", kind, provider: "A" })
        expect([a.requests.length, b.requests.length]).toEqual([1, 0])
        expect(state).toEqual({ index: 0, exhausted: false })
      })
  )

  it.effect("every ErrorKind is covered by exactly one of the three rules above", () =>
    Effect.sync(() => {
      const kinds: ReadonlyArray<ErrorKind> = ProviderErrors.ErrorKind.literals
      expect(kinds.map(ProviderErrors.disposition)).toEqual(
        kinds.map((kind) =>
          ["rate_limit", "overloaded", "server", "timeout"].includes(kind)
            ? "retry"
            : ["auth", "quota"].includes(kind)
            ? "fail_over"
            : "fail_now"
        )
      )
    }))

  it.effect("fails over after maxAttempts transient failures", () =>
    Effect.gen(function*() {
      const [a, b] = pair([Scripted.fault("server"), Scripted.fault("server"), Scripted.fault("server")], {
        maxAttempts: 3
      })
      const { attempts, exit, state } = yield* call([a, b])
      expect(Exit.isSuccess(exit) && exit.value.provider.name).toBe("B")
      expect([a.requests.length, b.requests.length]).toEqual([3, 1])
      expect(state.index).toBe(1)
      expect(attempts.map((record) => `${record.provider}#${record.attempt}`)).toEqual(["A#1", "A#2", "A#3", "B#1"])
      // No sleep after the last attempt on A: B starts the moment A#3 ends.
      const [a3, b1] = [attempts[2]!, attempts[3]!]
      expect(b1.startedAt).toBe(a3.startedAt + a3.durationMs)
    }))

  it.effect("keeps the failover sticky: the next call starts at the provider that answered", () =>
    Effect.gen(function*() {
      const a = Scripted.make({ name: "A", script: [Scripted.fault("auth")], whenDone: Scripted.text("A is back") })
      const b = Scripted.make({ name: "B", script: [Scripted.text("one"), Scripted.text("two")] })
      const first = yield* call([a, b])
      const second = yield* call([a, b], first.ref)
      expect(Exit.isSuccess(second.exit) && second.exit.value.reply.text).toBe("two")
      expect([a.requests.length, b.requests.length]).toEqual([1, 2])
      expect(second.state).toEqual({ index: 1, exhausted: false })
    }))

  it.effect("exhausts the route with the last error, stickily: later calls make no request", () =>
    Effect.gen(function*() {
      const a = Scripted.make({ name: "A", script: [], whenDone: Scripted.fault("auth") })
      const b = Scripted.make({ name: "B", script: [], whenDone: Scripted.fault("overloaded"), maxAttempts: 2 })
      const first = yield* call([a, b])
      expect(failureOf(first.exit)).toMatchObject({
        _tag: "ProviderExhausted",
        last: { kind: "overloaded", provider: "B" }
      })
      expect(first.state).toEqual({ index: 1, exhausted: true })
      expect([a.requests.length, b.requests.length]).toEqual([1, 2])

      const second = yield* call([a, b], first.ref)
      expect(failureOf(second.exit)?._tag).toBe("ProviderExhausted")
      expect(second.attempts).toEqual([])
      expect([a.requests.length, b.requests.length]).toEqual([1, 2])
    }))

  it.effect("fails ProviderExhausted for an empty route", () =>
    Effect.gen(function*() {
      const { exit, state } = yield* call([])
      expect(failureOf(exit)?._tag).toBe("ProviderExhausted")
      expect(state.exhausted).toBe(true)
    }))

  it.effect("lets a provider defect through as a defect", () =>
    Effect.gen(function*() {
      const [a, b] = pair([Scripted.defect("adapter bug")])
      const { exit } = yield* call([a, b])
      expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
      expect(b.requests).toHaveLength(0)
    }))
})

describe("ProviderChain.callModel timing", () => {
  it.effect("waits exactly a 7 s Retry-After before retrying", () =>
    Effect.gen(function*() {
      const [a, b] = pair([Scripted.fault("rate_limit", { retryAfterMs: 7_000 }), Scripted.text("from A")])
      const state = yield* Ref.make(ProviderChain.initialState)
      const fiber = yield* Effect.fork(
        ProviderChain.callModel({ providers: [a, b], state, request, onAttempt: () => Effect.void })
      )
      yield* TestClock.adjust(6_900)
      expect(a.requests).toHaveLength(1)
      yield* TestClock.adjust(100)
      expect(a.requests).toHaveLength(2)
      const result = yield* Fiber.join(fiber)
      expect(result.reply.text).toBe("from A")
      expect(b.requests).toHaveLength(0)
    }))

  it.effect("fails over at once on a Retry-After beyond the cap (3600 s), never sleeping past the cap", () =>
    Effect.gen(function*() {
      const [a, b] = pair([Scripted.fault("rate_limit", { retryAfterMs: 3_600_000 }), Scripted.text("from A")])
      const { attempts, exit, state } = yield* call([a, b])
      expect(Exit.isSuccess(exit) && exit.value.provider.name).toBe("B")
      expect(state.index).toBe(1)
      expect(attempts[1]?.startedAt).toBe(0)
    }))

  it.effect("applies a tightened Retry-After cap from Limits", () =>
    Effect.gen(function*() {
      const [a, b] = pair([Scripted.fault("overloaded", { retryAfterMs: 7_000 }), Scripted.text("from A")])
      const { exit } = yield* call([a, b]).pipe(
        Effect.provideService(Limits.Limits, { ...Limits.defaults, retryAfterCapMs: 5_000 })
      )
      expect(Exit.isSuccess(exit) && exit.value.provider.name).toBe("B")
    }))

  it.effect("times out a slow attempt as kind timeout and retries it", () =>
    Effect.gen(function*() {
      const a = Scripted.make({
        name: "A",
        timeoutMs: 1_000,
        script: [Scripted.delay(5_000, Scripted.text("too late")), Scripted.text("in time")]
      })
      const { attempts, exit } = yield* call([a])
      expect(Exit.isSuccess(exit) && exit.value.reply.text).toBe("in time")
      expect(attempts[0]).toMatchObject({ attempt: 1, durationMs: 1_000, error: { kind: "timeout", provider: "A" } })
      expect(attempts[0]?.usage.total).toBe(0)
      expect(attempts[1]?.reply?.text).toBe("in time")
    }))

  it.effect("backs off with seeded jitter: the gaps are exactly Retry.delayFor's, growing within bounds", () =>
    Effect.gen(function*() {
      const faults = [1, 2, 3, 4].map(() => Scripted.fault("server"))
      const a = Scripted.make({ name: "A", maxAttempts: 5, script: [...faults, Scripted.text("finally")] })
      const { attempts, exit } = yield* call([a]).pipe(Effect.withRandom(Random.make(11)))
      expect(Exit.isSuccess(exit)).toBe(true)
      const gaps = attempts.slice(1).map((record, i) =>
        record.startedAt - (attempts[i]!.startedAt + attempts[i]!.durationMs)
      )
      const expected = yield* Effect.forEach(
        [1, 2, 3, 4],
        (attempt) => Effect.map(Retry.delayFor(attempt, undefined, cap), Option.getOrThrow)
      ).pipe(Effect.withRandom(Random.make(11)))
      expect(gaps).toEqual(expected.map(Duration.toMillis))
      gaps.forEach((gap, i) => {
        expect(gap).toBeGreaterThanOrEqual(250 * 2 ** i)
        expect(gap).toBeLessThanOrEqual(500 * 2 ** i)
      })
    }))
})

describe("ProviderChain.callModel attempts", () => {
  it.effect("reports every attempt with its usage, failed ones included", () =>
    Effect.gen(function*() {
      const a = Scripted.make({
        name: "A",
        script: [Scripted.fault("server", { usage: { input: 7, output: 0 } }), Scripted.text("ok", { input: 20 })]
      })
      const { attempts } = yield* call([a])
      expect(attempts.map((record) => [record.attempt, record.usage.inputTokens, record.usage.outputTokens])).toEqual([
        [1, 7, 0],
        [2, 20, 5]
      ])
      expect(attempts[0]?.error?.kind).toBe("server")
      expect(attempts[1]?.reply?.text).toBe("ok")
    }))
})

// --- The invariants, over any script ------------------------------------------------------------------------------

type StepSpec =
  | { readonly _tag: "reply" }
  | { readonly _tag: "fault"; readonly kind: ErrorKind; readonly retryAfterMs: number | undefined }
  | { readonly _tag: "slow"; readonly millis: number }

const stepSpec: fc.Arbitrary<StepSpec> = fc.oneof(
  fc.constant({ _tag: "reply" as const }),
  fc.record({
    _tag: fc.constant("fault" as const),
    kind: fc.constantFrom(...ProviderErrors.ErrorKind.literals),
    retryAfterMs: fc.option(fc.oneof(fc.integer({ min: 0, max: 2 * cap }), fc.constant(3_600_000)), {
      nil: undefined
    })
  }),
  fc.record({ _tag: fc.constant("slow" as const), millis: fc.integer({ min: 0, max: 4_000 }) })
)

const providerSpec = fc.record({
  maxAttempts: fc.integer({ min: 1, max: 3 }),
  script: fc.array(stepSpec, { maxLength: 8 }),
  whenDone: stepSpec
})

const toStep = (spec: StepSpec): Scripted.Step =>
  spec._tag === "reply"
    ? Scripted.text("ok")
    : spec._tag === "slow"
    ? Scripted.delay(spec.millis, Scripted.text("slow ok"))
    : Scripted.fault(spec.kind, spec.retryAfterMs !== undefined ? { retryAfterMs: spec.retryAfterMs } : {})

describe("ProviderChain.callModel invariants", () => {
  it.effect.prop(
    "the index never decreases, exhaustion is sticky and no sleep exceeds the cap",
    {
      providers: fc.array(providerSpec, { minLength: 1, maxLength: 3 }),
      calls: fc.integer({ min: 1, max: 5 }),
      seed: fc.integer()
    },
    ({ calls, providers: specs, seed }) =>
      Effect.gen(function*() {
        const providers = specs.map((spec, i) =>
          Scripted.make({
            name: `P${i}`,
            timeoutMs: 2_000,
            maxAttempts: spec.maxAttempts,
            script: spec.script.map(toStep),
            whenDone: toStep(spec.whenDone)
          })
        )
        const state = yield* Ref.make(ProviderChain.initialState)
        const seen: Array<number> = []
        for (let n = 0; n < calls; n++) {
          const before = yield* Ref.get(state)
          const requestsBefore = providers.map((provider) => provider.requests.length)
          const attempts: Array<ProviderChain.AttemptRecord> = []
          const exit = yield* runTimed(
            ProviderChain.callModel({
              providers,
              state,
              request,
              onAttempt: (record) =>
                Effect.gen(function*() {
                  attempts.push(record)
                  seen.push((yield* Ref.get(state)).index)
                })
            })
          )
          const after = yield* Ref.get(state)

          expect(after.index).toBeGreaterThanOrEqual(before.index)
          if (before.exhausted) {
            expect(failureOf(exit)?._tag).toBe("ProviderExhausted")
            expect(after.exhausted).toBe(true)
            expect(providers.map((provider) => provider.requests.length)).toEqual(requestsBefore)
          }
          if (failureOf(exit)?._tag === "ProviderExhausted") expect(after.exhausted).toBe(true)
          if (Exit.isSuccess(exit)) expect(after.exhausted).toBe(false)
          for (let i = 1; i < attempts.length; i++) {
            const previous = attempts[i - 1]!
            const gap = attempts[i]!.startedAt - (previous.startedAt + previous.durationMs)
            expect(gap).toBeGreaterThanOrEqual(0)
            expect(gap).toBeLessThanOrEqual(cap)
          }
          attempts.forEach((record) => expect(record.durationMs).toBeLessThanOrEqual(2_000))
        }
        seen.forEach((index, i) => expect(index).toBeGreaterThanOrEqual(seen[i - 1] ?? 0))
      }).pipe(Effect.withRandom(Random.make(seed))),
    // Each TestClock step costs a few real event-loop turns; 200 runs of up to 5 calls take ~10 s on a laptop.
    { timeout: 120_000, fastCheck: { numRuns: 200, seed: 7 } }
  )
})

describe("ProviderError helpers", () => {
  it("classifies statuses, reading the body where providers reuse a status", () => {
    const cases: ReadonlyArray<readonly [number, string, ErrorKind]> = [
      [401, "", "auth"],
      [403, "forbidden", "auth"],
      [402, "", "quota"],
      [429, "Rate limit reached for requests", "rate_limit"],
      [429, "{\"error\":{\"code\":\"insufficient_quota\"}}", "quota"],
      [400, "This model's maximum context length is 128000 tokens", "context_overflow"],
      [400, "prompt is too long: 210000 tokens > 200000 maximum", "context_overflow"],
      [400, "Your credit balance is too low", "quota"],
      [400, "The response was filtered due to the prompt triggering content management policy", "filtered"],
      [400, "invalid tool schema", "bad_request"],
      [413, "", "context_overflow"],
      [408, "", "timeout"],
      [500, "internal", "server"],
      [502, "bad gateway", "server"],
      [503, "", "overloaded"],
      [529, "{\"type\":\"overloaded_error\"}", "overloaded"]
    ]
    for (const [status, body, kind] of cases) {
      expect([status, body, ProviderErrors.classifyStatus(status, body)]).toEqual([status, body, kind])
    }
  })

  it("parses Retry-After as milliseconds, seconds or an HTTP date, uncapped", () => {
    const now = Date.parse("2025-01-01T00:00:00Z")
    expect(ProviderErrors.parseRetryAfter({ "retry-after-ms": "1500.2" }, now)).toBe(1501)
    expect(ProviderErrors.parseRetryAfter({ "Retry-After": "7" }, now)).toBe(7_000)
    expect(ProviderErrors.parseRetryAfter({ "retry-after": "274579" }, now)).toBe(274_579_000)
    expect(ProviderErrors.parseRetryAfter({ "retry-after": "Wed, 01 Jan 2025 00:00:30 GMT" }, now)).toBe(30_000)
    expect(ProviderErrors.parseRetryAfter({ "retry-after": "Tue, 31 Dec 2024 00:00:00 GMT" }, now)).toBe(0)
    expect(ProviderErrors.parseRetryAfter({ "retry-after": "soon" }, now)).toBeUndefined()
    expect(ProviderErrors.parseRetryAfter({}, now)).toBeUndefined()
  })
})

describe("ProviderChain.callModel rail decisions", () => {
  /** One chain call recording its decisions, jitter from `random`, the ambient `Random` another seed. */
  const decided = (
    providers: ReadonlyArray<Scripted.Scripted>,
    options: { readonly random?: Random.Random; readonly request?: ModelRequest } = {}
  ) =>
    Effect.gen(function*() {
      const decisions: Array<RailDecision> = []
      const state = yield* Ref.make(ProviderChain.initialState)
      const exit = yield* runTimed(
        ProviderChain.callModel({
          providers,
          state,
          request: options.request ?? request,
          onAttempt: () => Effect.void,
          onDecision: (decision) => Effect.sync(() => decisions.push(decision)),
          ...(options.random === undefined ? {} : { random: options.random })
        })
      ).pipe(Effect.withRandom(Random.make(999)))
      return { exit, decisions }
    })

  it.effect("each retry and failover is recorded with the numbers behind it; the jitter comes from the call's Random", () =>
    Effect.gen(function*() {
      const a = Scripted.make({
        name: "A",
        script: [
          Scripted.fault("rate_limit", { retryAfterMs: 2_000 }),
          Scripted.fault("server"),
          Scripted.fault("server")
        ]
      })
      const b = Scripted.make({ name: "B", script: [Scripted.fault("rate_limit", { retryAfterMs: 3_600_000 })] })
      const { decisions, exit } = yield* decided([a, b], { random: Random.make(7) })
      const [first, second] = yield* Effect.all([
        Retry.delayFor(1, 2_000, cap),
        Retry.delayFor(2, undefined, cap)
      ]).pipe(Effect.map(Option.all), Effect.map(Option.getOrThrow), Effect.withRandom(Random.make(7)))
      const d1 = Duration.toMillis(first)
      const d2 = Duration.toMillis(second)
      // Strict: a field set to `undefined` (a `retryAfterMs` the error did not carry) is not the field left out.
      expect(decisions).toStrictEqual([
        { _tag: "retry", at: 0, provider: "A", attempt: 1, kind: "rate_limit", delayMs: d1, retryAfterMs: 2_000 },
        { _tag: "retry", at: d1, provider: "A", attempt: 2, kind: "server", delayMs: d2 },
        { _tag: "failover", at: d1 + d2, from: "A", to: "B", kind: "server" },
        { _tag: "failover", at: d1 + d2, from: "B", kind: "rate_limit", retryAfterMs: 3_600_000 }
      ])
      const failure = failureOf(exit)
      expect(failure?._tag).toBe("ProviderExhausted")
      expect(failure?.message).toMatch(/^every provider of the route is spent; last failure: .*B/)
    }))

  it.effect("an exhausted route and a timed-out attempt say so in their messages", () =>
    Effect.gen(function*() {
      expect(failureOf((yield* call([])).exit)?.message).toBe("every provider of the route is spent")
      const spent = yield* Ref.make({ ...ProviderChain.initialState, exhausted: true })
      expect(failureOf((yield* call([Scripted.make({ name: "A", script: [] })], spent)).exit)?.message).toBe(
        "every provider of the route was spent earlier in this session"
      )
      const slow = Scripted.make({
        name: "A",
        timeoutMs: 1_000,
        script: [Scripted.delay(5_000, Scripted.text("too late")), Scripted.text("in time")]
      })
      const { attempts } = yield* call([slow])
      expect(attempts[0]?.error?.message).toBe("no reply from A within 1000 ms")
    }))

  it.effect("reasoning another provider made is dropped for this one, and that is recorded with the count", () =>
    Effect.gen(function*() {
      const withReasoning: ModelRequest = {
        ...request,
        messages: [
          { kind: "user", text: "go" },
          {
            kind: "assistant",
            text: "looking",
            toolCalls: [],
            finishReason: "stop",
            reasoning: [
              { type: "thinking", provider: "other", thinking: "hmm", signature: "sig" },
              { type: "redacted_thinking", provider: "other", data: "xyz" },
              { type: "thinking", provider: "A", thinking: "mine", signature: "sig2" }
            ]
          },
          { kind: "user", text: "and?" }
        ]
      }
      const a = Scripted.make({ name: "A", script: [Scripted.text("ok")] })
      const { decisions } = yield* decided([a], { request: withReasoning })
      expect(decisions).toEqual([{ _tag: "reasoning_dropped", at: 0, provider: "A", parts: 2 }])
      const own = Scripted.make({ name: "other", script: [Scripted.text("ok")] })
      const mine = yield* decided([own], { request: withReasoning })
      expect(mine.decisions).toEqual([{ _tag: "reasoning_dropped", at: 0, provider: "other", parts: 1 }])
      const none = yield* decided([Scripted.make({ name: "B", script: [Scripted.text("ok")] })])
      expect(none.decisions).toEqual([])
    }))

  it.effect("the sticky index never moves back, even when two calls on one session's state race", () =>
    Effect.gen(function*() {
      // Both calls start at A. The first hears from A after 1 s, spends B at once and answers from C; the second
      // hears from A only after 5 s, when the state already points at C, and answers from B.
      const route = (aAfterMs: number, b: Scripted.Step) => [
        Scripted.make({ name: "A", script: [Scripted.delay(aAfterMs, Scripted.fault("auth"))] }),
        Scripted.make({ name: "B", script: [b] }),
        Scripted.make({ name: "C", script: [Scripted.text("from C")] })
      ]
      const state = yield* Ref.make(ProviderChain.initialState)
      const both = Effect.all([
        ProviderChain.callModel({
          providers: route(1_000, Scripted.fault("auth")),
          state,
          request,
          onAttempt: () => Effect.void
        }),
        ProviderChain.callModel({
          providers: route(5_000, Scripted.text("from B")),
          state,
          request,
          onAttempt: () => Effect.void
        })
      ], { concurrency: "unbounded" })
      const exit = yield* runTimed(both)
      expect(Exit.isSuccess(exit) && exit.value.map((r) => r.provider.name)).toEqual(["C", "B"])
      expect((yield* Ref.get(state)).index).toBe(2)
    }))
})
