import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { defaults } from "../../src/rails/Limits.js"
import * as RepeatGuard from "../../src/rails/RepeatGuard.js"

const observeAll = (
  observations: ReadonlyArray<readonly [string, string, string]>,
  limits = defaults
): ReadonlyArray<RepeatGuard.Verdict> => {
  let guard = RepeatGuard.empty
  return observations.map(([name, args, result]) => {
    const step = RepeatGuard.observe(guard, name, args, result, limits)
    guard = step.guard
    return step.verdict
  })
}

describe("RepeatGuard", () => {
  it("lets the first call through", () => {
    const step = RepeatGuard.observe(RepeatGuard.empty, "search", "{\"q\":1}", "r", defaults)
    expect([step.verdict, step.count]).toEqual(["ok", 1])
  })

  it("warns at the second identical call with an identical result", () => {
    expect(observeAll([["search", "{\"q\":1}", "r"], ["search", "{\"q\":1}", "r"]])).toEqual(["ok", "warn"])
  })

  it("halts at the fourth identical call with an identical result", () => {
    const same = ["search", "{\"q\":1}", "r"] as const
    expect(observeAll([same, same, same, same])).toEqual(["ok", "warn", "warn", "halt"])
  })

  it("treats reordered keys and whitespace as the same call", () => {
    expect(observeAll([["search", "{\"a\":1,\"b\":2}", "r"], ["search", "{ \"b\": 2, \"a\": 1 }", "r"]])).toEqual([
      "ok",
      "warn"
    ])
  })

  it("does not count the same call returning a new result (a status being polled)", () => {
    expect(observeAll([["status", "{}", "pending"], ["status", "{}", "running"], ["status", "{}", "done"]])).toEqual(
      ["ok", "ok", "ok"]
    )
  })

  it("does not count different arguments or a different tool as repeats", () => {
    expect(observeAll([["search", "{\"q\":1}", "r"], ["search", "{\"q\":2}", "r"], ["grep", "{\"q\":1}", "r"]]))
      .toEqual(["ok", "ok", "ok"])
  })

  it("does not mutate the guard it was given", () => {
    const first = RepeatGuard.observe(RepeatGuard.empty, "t", "{}", "r", defaults)
    RepeatGuard.observe(first.guard, "t", "{}", "r", defaults)
    expect(RepeatGuard.observe(RepeatGuard.empty, "t", "{}", "r", defaults).count).toBe(1)
    expect(RepeatGuard.observe(first.guard, "t", "{}", "r", defaults).count).toBe(2)
  })

  it("sorts object keys recursively, including inside arrays", () => {
    expect(RepeatGuard.canonicalArgs("{ \"z\": [ {\"b\": 1, \"a\": null} ], \"a\": {\"y\": true, \"x\": \"s\"} }"))
      .toBe("{\"a\":{\"x\":\"s\",\"y\":true},\"z\":[{\"a\":null,\"b\":1}]}")
  })

  it("returns unparseable arguments unchanged", () => {
    expect(RepeatGuard.canonicalArgs("{\"q\": 1")).toBe("{\"q\": 1")
  })

  it("keeps a __proto__ key as data", () => {
    expect(RepeatGuard.canonicalArgs("{\"__proto__\":{\"x\":1},\"a\":2}")).toBe("{\"__proto__\":{\"x\":1},\"a\":2}")
  })

  it("gives a short stable fingerprint that separates name, arguments and result", () => {
    const fp = RepeatGuard.fingerprint("search", "{\"q\":1}", "r")
    expect(fp).toMatch(/^[0-9a-f]{28}$/)
    expect(RepeatGuard.fingerprint("search", "{ \"q\": 1 }", "r")).toBe(fp)
    expect(RepeatGuard.fingerprint("search", "{\"q\":1}", "r2")).not.toBe(fp)
    expect(RepeatGuard.fingerprint("a", "b", "c")).not.toBe(RepeatGuard.fingerprint("ab", "", "c"))
  })

  it("warns that repeating will not change the answer and says when the session halts", () => {
    const text = RepeatGuard.warning("search_logs", 2, 4)
    expect(text).toContain("search_logs")
    expect(text).toContain("same result 2 times")
    expect(text).toContain("will not change the answer")
    expect(text).toContain("halts if this identical call is made 4 times")
  })

  it.prop(
    "goes ok, then warn, then halt at exactly the configured counts for k identical observations",
    {
      k: fc.integer({ min: 1, max: 12 }),
      warnAt: fc.integer({ min: 1, max: 6 }),
      extra: fc.integer({ min: 0, max: 5 }),
      name: fc.string(),
      args: fc.json(),
      result: fc.string()
    },
    ({ args, extra, k, name, result, warnAt }) => {
      const limits = { ...defaults, repeatWarnAt: warnAt, repeatHaltAt: warnAt + extra }
      const verdicts = observeAll(Array.from({ length: k }, () => [name, args, result] as const), limits)
      const expected = Array.from(
        { length: k },
        (_, i): RepeatGuard.Verdict => i + 1 >= limits.repeatHaltAt ? "halt" : i + 1 >= warnAt ? "warn" : "ok"
      )
      expect(verdicts).toEqual(expected)
    },
    { fastCheck: { numRuns: 300, seed: 42 } }
  )

  it.prop(
    "canonicalises arguments independently of key order",
    { value: fc.jsonValue(), seed: fc.integer() },
    ({ seed, value }) => {
      // rebuild every object with its keys in a seed-determined order
      const shuffle = (v: unknown, depth: number): unknown => {
        if (Array.isArray(v)) return v.map((x) => shuffle(x, depth + 1))
        if (v !== null && typeof v === "object") {
          const keys = Object.keys(v)
          const rotated = keys.map((_, i) => keys[(((i + seed + depth) % keys.length) + keys.length) % keys.length]!)
          const ordered = ((seed + depth) & 1) === 0 ? rotated : rotated.reverse()
          return Object.fromEntries(
            ordered.map((key) => [key, shuffle((v as Record<string, unknown>)[key], depth + 1)])
          )
        }
        return v
      }
      const original = JSON.stringify(value)
      const reordered = JSON.stringify(shuffle(value, 0), null, (seed & 3) + 1)
      expect(RepeatGuard.canonicalArgs(reordered)).toBe(RepeatGuard.canonicalArgs(original))
      expect(RepeatGuard.fingerprint("t", reordered, "r")).toBe(RepeatGuard.fingerprint("t", original, "r"))
    },
    { fastCheck: { numRuns: 300, seed: 42 } }
  )
})
