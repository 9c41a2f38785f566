import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer } from "effect"
import * as Limits from "../../src/rails/Limits.js"

describe("Limits", () => {
  it("seeds the ceilings of the design", () => {
    expect(Limits.defaults).toMatchObject({
      modelCallsPerBurst: 20,
      modelCallsPerSession: 60,
      toolCalls: 50,
      toolCallsPerTurn: 8,
      repeatWarnAt: 2,
      repeatHaltAt: 4,
      strikes: 3,
      emptyNudges: 2,
      retryAfterCapMs: 60_000,
      activeTimeMs: 300_000,
      persistTimeoutMs: 10_000
    })
  })

  it("keeps the ceiling when there is no override", () => {
    expect(Limits.tighten(Limits.defaults, undefined)).toEqual(Either.right(Limits.defaults))
  })

  it("applies tighter values and keeps the rest", () => {
    const out = Limits.tighten(Limits.defaults, { modelCallsPerBurst: 5, toolCalls: 10 })
    expect(out).toEqual(Either.right({ ...Limits.defaults, modelCallsPerBurst: 5, toolCalls: 10 }))
  })

  it("accepts a value equal to the ceiling", () => {
    expect(Limits.tighten(Limits.defaults, { strikes: 3 })).toEqual(Either.right(Limits.defaults))
  })

  it("refuses to loosen a ceiling and names the field", () => {
    const out = Limits.tighten(Limits.defaults, { modelCallsPerBurst: 21 })
    expect(Either.isLeft(out)).toBe(true)
    if (Either.isLeft(out)) {
      expect(out.left._tag).toBe("InvalidRequest")
      expect(out.left.issues.map((i) => i.path)).toEqual(["limits.modelCallsPerBurst"])
      expect(out.left.issues[0]?.message).toContain("at most 20")
    }
  })

  it("refuses as a whole, saying limits may only be tightened", () => {
    const out = Limits.tighten(Limits.defaults, { toolCalls: 51 })
    expect(Either.isLeft(out) && out.left.message).toBe("limits may only be tightened")
  })

  it("runs an agent under the tighter value field by field, leaving a looser one's ceiling in force", () => {
    expect(Limits.effective(Limits.defaults, undefined)).toBe(Limits.defaults)
    expect(Limits.effective(Limits.defaults, { modelCallsPerBurst: 30, strikes: 1, toolCalls: 50 })).toEqual({
      ...Limits.defaults,
      strikes: 1
    })
  })

  it.effect("a host's layer tightens the ceilings; one that would loosen them fails naming the field", () =>
    Effect.gen(function*() {
      const limits = yield* Effect.provide(Limits.Limits, Limits.layer({ toolCalls: 5 }))
      expect(limits).toEqual({ ...Limits.defaults, toolCalls: 5 })
      const refused = yield* Effect.flip(Effect.provide(Limits.Limits, Limits.layer({ toolCalls: 51 })))
      expect(refused.issues.map((i) => i.path)).toEqual(["limits.toolCalls"])
    }))

  it("lists every loosened field, under the given path prefix", () => {
    const out = Limits.tighten(Limits.defaults, { toolCalls: 51, strikes: 1, tokens: 3_000_000 }, "agent.limits")
    expect(Either.isLeft(out) ? out.left.issues.map((i) => i.path) : []).toEqual([
      "agent.limits.toolCalls",
      "agent.limits.tokens"
    ])
  })

  it("tightens an already tightened ceiling only further", () => {
    const host = Either.getOrThrow(Limits.tighten(Limits.defaults, { modelCallsPerSession: 30 }))
    expect(Either.isLeft(Limits.tighten(host, { modelCallsPerSession: 40 }))).toBe(true)
    expect(Limits.tighten(host, { modelCallsPerSession: 10 })).toEqual(
      Either.right({ ...Limits.defaults, modelCallsPerSession: 10 })
    )
  })

  it.effect("reads the seed defaults when no layer provides limits", () =>
    Effect.gen(function*() {
      expect(yield* Limits.Limits).toEqual(Limits.defaults)
    }))

  it.effect("reads tighter limits provided by a layer", () =>
    Effect.gen(function*() {
      const limits = yield* Limits.Limits
      expect(limits.toolCalls).toBe(5)
    }).pipe(Effect.provide(Layer.succeed(Limits.Limits, { ...Limits.defaults, toolCalls: 5 }))))
})
