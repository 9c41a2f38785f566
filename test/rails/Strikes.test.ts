import { describe, expect, it } from "@effect/vitest"
import { defaults } from "../../src/rails/Limits.js"
import * as Strikes from "../../src/rails/Strikes.js"

describe("Strikes", () => {
  it("adds one strike for a turn with one bad call", () => {
    expect(Strikes.observeTurn(0, [false, true, false], defaults)).toEqual({ strikes: 1, halt: false })
  })

  it("halts at the third consecutive strike", () => {
    const first = Strikes.observeTurn(0, [true], defaults)
    const second = Strikes.observeTurn(first.strikes, [true], defaults)
    const third = Strikes.observeTurn(second.strikes, [true], defaults)
    expect([first.halt, second.halt, third]).toEqual([false, false, { strikes: 3, halt: true }])
  })

  it("counts every bad call of a turn, so three in one turn halt at once", () => {
    expect(Strikes.observeTurn(0, [true, true, true], defaults)).toEqual({ strikes: 3, halt: true })
  })

  it("resets the count after a turn with no strike", () => {
    expect(Strikes.observeTurn(2, [false, false], defaults)).toEqual({ strikes: 0, halt: false })
  })

  it("treats a turn with no calls as a turn with no strike", () => {
    expect(Strikes.observeTurn(2, [], defaults)).toEqual({ strikes: 0, halt: false })
  })

  it("honours an agent's tighter strike limit", () => {
    expect(Strikes.observeTurn(0, [true], { ...defaults, strikes: 1 })).toEqual({ strikes: 1, halt: true })
  })
})
