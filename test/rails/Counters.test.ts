import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc, Option } from "effect"
import * as Counters from "../../src/rails/Counters.js"
import * as ExitPolicy from "../../src/rails/ExitPolicy.js"
import { defaults } from "../../src/rails/Limits.js"

/** What the loop's gate asks before a model call, with the counters `c` (session/Burst's `facts`, nothing else used). */
const gate = (c: Counters.Counters, limits = defaults) =>
  Option.map(
    ExitPolicy.decide(ExitPolicy.defaults, "before_model", {
      limits,
      modelCallsBurst: c.burst,
      modelCallsSession: c.session,
      toolCallsBurst: 0,
      toolCallsSession: 0,
      tokensBurst: 0,
      tokensSession: 0,
      costBurst: 0,
      costSession: 0,
      activeMs: 0,
      burstMs: 0,
      strikes: 0,
      exhausted: false,
      providers: 1
    }),
    (d) => d.reason
  )

describe("Counters", () => {
  it("starts a burst at zero while carrying the session's earlier calls", () => {
    expect(Counters.start(17)).toEqual({ burst: 0, session: 17 })
  })

  it("increments the burst and the session counter together", () => {
    expect(Counters.increment({ burst: 3, session: 40 })).toEqual({ burst: 4, session: 41 })
  })

  it("lets a call through the gate while both ceilings have room", () => {
    expect(gate({ burst: 19, session: 59 })).toEqual(Option.none())
  })

  it("stops at the per-burst ceiling of 20 calls", () => {
    expect(gate({ burst: 20, session: 20 })).toEqual(Option.some("burst_limit"))
  })

  it("stops at the per-session ceiling across bursts", () => {
    expect(gate({ burst: 5, session: 60 })).toEqual(Option.some("session_limit"))
  })

  it("names the burst ceiling when both are reached at once", () => {
    expect(gate({ burst: 20, session: 60 })).toEqual(Option.some("burst_limit"))
  })

  it("honours an agent's tighter ceilings", () => {
    const limits = { ...defaults, modelCallsPerBurst: 3, modelCallsPerSession: 5 }
    expect(gate({ burst: 2, session: 4 }, limits)).toEqual(Option.none())
    expect(gate({ burst: 3, session: 3 }, limits)).toEqual(Option.some("burst_limit"))
    expect(gate({ burst: 2, session: 5 }, limits)).toEqual(Option.some("session_limit"))
  })

  it.prop(
    "moves burst and session together and the gate names a ceiling exactly when one is reached",
    {
      before: fc.integer({ min: 0, max: 80 }),
      calls: fc.integer({ min: 0, max: 100 }),
      perBurst: fc.integer({ min: 1, max: 30 }),
      perSession: fc.integer({ min: 1, max: 90 })
    },
    ({ before, calls, perBurst, perSession }) => {
      const limits = { ...defaults, modelCallsPerBurst: perBurst, modelCallsPerSession: perSession }
      let c = Counters.start(before)
      for (let i = 0; i < calls; i++) {
        const verdict = gate(c, limits)
        expect(Option.isSome(verdict)).toBe(c.burst >= perBurst || c.session >= perSession)
        if (Option.isSome(verdict)) {
          expect(verdict.value).toBe(c.burst >= perBurst ? "burst_limit" : "session_limit")
          break
        }
        c = Counters.increment(c)
        expect(c.session - c.burst).toBe(before)
      }
      expect(c.burst).toBeLessThanOrEqual(perBurst)
      expect(c.session).toBeLessThanOrEqual(Math.max(before, perSession))
    },
    { fastCheck: { numRuns: 300, seed: 42 } }
  )
})
