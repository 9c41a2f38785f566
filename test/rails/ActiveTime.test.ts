import { describe, expect, it } from "@effect/vitest"
import * as ActiveTime from "../../src/rails/ActiveTime.js"
import { defaults } from "../../src/rails/Limits.js"

const minute = 60_000

describe("ActiveTime", () => {
  it("counts the current burst on top of earlier bursts", () => {
    expect(ActiveTime.spent(90_000, 1_000_000, 1_030_000)).toBe(120_000)
  })

  it("does not count the gap between bursts", () => {
    // the burst started long after the previous one ended; only its own 10 s count
    expect(ActiveTime.remainingMs(defaults, 2 * minute, 50 * minute, 50 * minute + 10_000)).toBe(
      3 * minute - 10_000
    )
  })

  it("has five minutes of room in a fresh session", () => {
    expect(ActiveTime.remainingMs(defaults, 0, 1000, 1000)).toBe(5 * minute)
  })

  it("has no room once five minutes of active time are spent across bursts", () => {
    expect(ActiveTime.remainingMs(defaults, 4 * minute, 0, minute - 1)).toBe(1)
    expect(ActiveTime.remainingMs(defaults, 4 * minute, 0, minute)).toBe(0)
  })

  it("never reports negative time left after an overrun", () => {
    expect(ActiveTime.remainingMs(defaults, 4 * minute, 0, 10 * minute)).toBe(0)
  })

  it("ignores a clock that appears to run backwards", () => {
    expect(ActiveTime.spent(1000, 5000, 4000)).toBe(1000)
  })
})
