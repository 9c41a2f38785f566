import { describe, expect, it } from "@effect/vitest"
import * as Strikes from "../../src/rails/Strikes.js"

describe("Strikes", () => {
  it("adds one strike for a turn with one bad call", () => {
    expect(Strikes.observeTurn(0, [false, true, false])).toBe(1)
  })

  it("adds up consecutive turns' strikes", () => {
    expect(Strikes.observeTurn(Strikes.observeTurn(Strikes.observeTurn(0, [true]), [true]), [true])).toBe(3)
  })

  it("counts every bad call of a turn", () => {
    expect(Strikes.observeTurn(1, [true, true, true])).toBe(4)
  })

  it("resets the count after a turn with no strike", () => {
    expect(Strikes.observeTurn(2, [false, false])).toBe(0)
  })

  it("treats a turn with no calls as a turn with no strike", () => {
    expect(Strikes.observeTurn(2, [])).toBe(0)
  })
})
