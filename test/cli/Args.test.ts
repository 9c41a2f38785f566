/**
 * The argv parser: values, booleans, `--flag=value`, `--`, help, and errors that name the flag.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as Args from "../../src/cli/Args.js"

const spec: Args.Spec = { agent: "string", scope: "string", demo: "boolean" }

describe("Args.parse", () => {
  it("reads string and boolean flags in any order, with positionals around them", () => {
    const parsed = Either.getOrThrow(
      Args.parse(["--agent", "a.json", "why", "--demo", "--scope=incident:1", "now"], spec)
    )
    expect(parsed.strings.get("agent")).toBe("a.json")
    expect(parsed.strings.get("scope")).toBe("incident:1")
    expect(parsed.booleans.has("demo")).toBe(true)
    expect(parsed.positionals).toEqual(["why", "now"])
  })

  it("takes everything after -- as positionals, and -h/--help anywhere", () => {
    const parsed = Either.getOrThrow(Args.parse(["-h", "--", "--demo", "-x"], spec))
    expect(parsed.booleans.has("help")).toBe(true)
    expect(parsed.booleans.has("demo")).toBe(false)
    expect(parsed.positionals).toEqual(["--demo", "-x"])
  })

  it("names the unknown flag, the flag missing its value, and a value given to a boolean", () => {
    expect(Args.parse(["--frob"], spec)).toEqual(Either.left("unknown option --frob"))
    expect(Args.parse(["--scope"], spec)).toEqual(Either.left("option --scope needs a value"))
    expect(Args.parse(["--scope", "--demo"], spec)).toEqual(Either.left("option --scope needs a value"))
    expect(Args.parse(["--demo=yes"], spec)).toEqual(Either.left("option --demo takes no value"))
  })
})
