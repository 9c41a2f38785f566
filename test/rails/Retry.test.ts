import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, FastCheck as fc, Option, Random } from "effect"
import * as Limits from "../../src/rails/Limits.js"
import * as Retry from "../../src/rails/Retry.js"

const cap = Limits.defaults.retryAfterCapMs

const millisOf = (delay: Option.Option<Duration.Duration>): number =>
  Option.match(delay, { onNone: () => Number.NaN, onSome: Duration.toMillis })

const backoffDelays = (attempts: number) =>
  Effect.forEach(
    Array.from({ length: attempts }, (_, i) => i + 1),
    (attempt) => Effect.map(Retry.delayFor(attempt, undefined, cap), millisOf)
  )

describe("Retry.delayFor", () => {
  it.effect("waits exactly the Retry-After when it is within the cap", () =>
    Effect.gen(function*() {
      expect(millisOf(yield* Retry.delayFor(1, 7_000, cap))).toBe(7_000)
      expect(millisOf(yield* Retry.delayFor(3, 0, cap))).toBe(0)
      expect(millisOf(yield* Retry.delayFor(2, cap, cap))).toBe(cap)
    }))

  it.effect("fails over instead of sleeping when the Retry-After exceeds the cap", () =>
    Effect.gen(function*() {
      expect(Option.isNone(yield* Retry.delayFor(1, cap + 1, cap))).toBe(true)
      expect(Option.isNone(yield* Retry.delayFor(1, 3_600_000, cap))).toBe(true)
      // The spend-limit reply that motivated the cap.
      expect(Option.isNone(yield* Retry.delayFor(1, 274_579_000, cap))).toBe(true)
    }))

  it.effect("backs off exponentially within the equal-jitter bounds when no Retry-After is given", () =>
    Effect.gen(function*() {
      const delays = yield* backoffDelays(7)
      delays.forEach((delay, i) => {
        const ceiling = 500 * 2 ** i
        expect(delay).toBeGreaterThanOrEqual(ceiling / 2)
        expect(delay).toBeLessThanOrEqual(ceiling)
        expect(Number.isInteger(delay)).toBe(true)
      })
      // Two steps apart the floor of the later wait is above the ceiling of the earlier one: growth is real.
      for (let i = 0; i + 2 < delays.length; i++) {
        expect(delays[i + 2]!).toBeGreaterThan(delays[i]!)
      }
    }).pipe(Effect.withRandom(Random.make(42))))

  it.effect("reproduces the same jitter from the same seed and different jitter from another", () =>
    Effect.gen(function*() {
      const a = yield* backoffDelays(8).pipe(Effect.withRandom(Random.make(7)))
      const b = yield* backoffDelays(8).pipe(Effect.withRandom(Random.make(7)))
      const c = yield* backoffDelays(8).pipe(Effect.withRandom(Random.make(8)))
      expect(a).toEqual(b)
      expect(c).not.toEqual(a)
    }))

  it.effect("never backs off above the cap, however many attempts failed", () =>
    Effect.gen(function*() {
      const late = yield* Effect.map(Retry.delayFor(30, undefined, cap), millisOf)
      expect(late).toBeLessThanOrEqual(cap)
      expect(late).toBeGreaterThanOrEqual(cap / 2)
      const tight = yield* Effect.map(Retry.delayFor(10, undefined, 1_000), millisOf)
      expect(tight).toBeLessThanOrEqual(1_000)
    }).pipe(Effect.withRandom(Random.make(1))))

  it.prop(
    "no delay ever exceeds the cap, and Retry-After is obeyed exactly or refused",
    {
      attempt: fc.integer({ min: 1, max: 200 }),
      capMs: fc.integer({ min: 1, max: 120_000 }),
      retryAfterMs: fc.option(fc.integer({ min: 0, max: 400_000_000 }), { nil: undefined }),
      seed: fc.integer()
    },
    ({ attempt, capMs, retryAfterMs, seed }) =>
      Effect.runSync(
        Effect.gen(function*() {
          const delay = yield* Retry.delayFor(attempt, retryAfterMs, capMs)
          if (retryAfterMs !== undefined && retryAfterMs > capMs) {
            expect(Option.isNone(delay)).toBe(true)
          } else if (retryAfterMs !== undefined) {
            expect(millisOf(delay)).toBe(retryAfterMs)
          } else {
            expect(millisOf(delay)).toBeLessThanOrEqual(capMs)
            expect(millisOf(delay)).toBeGreaterThanOrEqual(Math.floor(Retry.ceilingFor(attempt, capMs) / 2))
          }
        }).pipe(Effect.withRandom(Random.make(seed)))
      ),
    { fastCheck: { numRuns: 200, seed: 7 } }
  )

  it.effect("draws the whole range of the equal jitter, both ends included", () =>
    Effect.gen(function*() {
      // A ceiling of 2 ms: the wait is 1 or 2, and forty seeds draw both.
      const drawn = new Set<number>()
      for (let seed = 0; seed < 40; seed++) {
        drawn.add(yield* Retry.jitteredMillis(1, 2).pipe(Effect.withRandom(Random.make(seed))))
      }
      expect([...drawn].sort()).toEqual([1, 2])
    }))
})
