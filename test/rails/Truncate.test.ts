import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import * as Truncate from "../../src/rails/Truncate.js"

const bytes = (text: string): number => Buffer.byteLength(text, "utf8")

const logLines = (n: number): string =>
  Array.from({ length: n }, (_, i) => `2024-05-01T10:00:${String(i % 60).padStart(2, "0")}Z line ${i} ok`).join("\n")

describe("Truncate", () => {
  it("returns text that fits unchanged", () => {
    expect(Truncate.truncate("small result\n", 1024)).toEqual({
      text: "small result\n",
      truncated: false,
      omittedBytes: 0
    })
  })

  it("keeps text of exactly the cap unchanged", () => {
    const text = "é".repeat(512)
    expect(Truncate.truncate(text, 1024).truncated).toBe(false)
  })

  it("keeps the head and the tail of an oversized result within the cap", () => {
    const text = logLines(2000)
    const out = Truncate.truncate(text, 4096)
    expect(out.truncated).toBe(true)
    expect(bytes(out.text)).toBeLessThanOrEqual(4096)
    expect(out.text.startsWith("2024-05-01T10:00:00Z line 0 ok\n")).toBe(true)
    expect(out.text.endsWith("line 1999 ok")).toBe(true)
  })

  it("cuts at line boundaries when the lines are short", () => {
    const text = logLines(2000)
    const out = Truncate.truncate(text, 4096)
    const [head, rest] = out.text.split("\n[truncated:")
    const tail = rest!.slice(rest!.indexOf("]\n") + 2)
    expect(head!.endsWith(" ok\n")).toBe(true)
    expect(text.startsWith(head!)).toBe(true)
    expect(tail).toMatch(/^2024-05-01T/)
    expect(text.endsWith(tail)).toBe(true)
  })

  it("keeps roughly two thirds head and one third tail", () => {
    const out = Truncate.truncate(logLines(2000), 8192)
    const [head, rest] = out.text.split("\n[truncated:")
    const tail = rest!.slice(rest!.indexOf("]\n") + 2)
    expect(bytes(head!) / (bytes(head!) + bytes(tail))).toBeGreaterThan(0.55)
    expect(bytes(head!) / (bytes(head!) + bytes(tail))).toBeLessThan(0.75)
  })

  it("tells the model how much was omitted and how to narrow the query", () => {
    const text = logLines(2000)
    const out = Truncate.truncate(text, 4096)
    expect(out.text).toContain(`${out.omittedBytes} bytes`)
    expect(out.text).toMatch(/\(\d+ lines\) omitted/)
    expect(out.text).toContain(`of this ${bytes(text)}-byte result`)
    expect(out.text).toContain("add filters, request a smaller range, or paginate")
  })

  it("counts the omitted middle exactly", () => {
    const text = logLines(500)
    const out = Truncate.truncate(text, 2048)
    const [head, rest] = out.text.split("\n[truncated:")
    const tail = rest!.slice(rest!.indexOf("]\n") + 2)
    expect(out.omittedBytes).toBe(bytes(text) - bytes(head!) - bytes(tail))
  })

  it("cuts a single huge line at a character boundary", () => {
    const text = "x".repeat(100_000)
    const out = Truncate.truncate(text, 1000)
    expect(bytes(out.text)).toBeLessThanOrEqual(1000)
    expect(out.text.startsWith("xxxx")).toBe(true)
    expect(out.text.endsWith("xxxx")).toBe(true)
  })

  it("never splits an emoji or a CJK character", () => {
    const text = "日本語😀".repeat(5000)
    const out = Truncate.truncate(text, 700)
    expect(bytes(out.text)).toBeLessThanOrEqual(700)
    expect(Buffer.from(out.text, "utf8").toString("utf8")).toBe(out.text)
    expect(out.text.startsWith("日本語😀")).toBe(true)
    expect(out.text.endsWith("😀")).toBe(true)
  })

  it.prop(
    "fits the cap, keeps a prefix and a suffix, and never splits a character",
    {
      // size "max" so most inputs overflow the cap: small strings would only ever exercise the unchanged path
      text: fc.oneof(
        fc.string({ unit: "grapheme", maxLength: 6000, size: "max" }),
        fc.string({ unit: "binary", maxLength: 6000, size: "max" }),
        fc.array(
          fc.oneof(
            fc.constant("\n"),
            fc.constant("😀"),
            fc.constant("日本語"),
            fc.string({ unit: "grapheme", maxLength: 120 })
          ),
          { maxLength: 2000, size: "max" }
        ).map((parts) => parts.join(""))
      ),
      maxBytes: fc.integer({ min: 512, max: 8192 })
    },
    ({ maxBytes, text }) => {
      const out = Truncate.truncate(text, maxBytes)
      expect(bytes(out.text)).toBeLessThanOrEqual(maxBytes)
      expect(Buffer.from(out.text, "utf8").toString("utf8")).toBe(out.text)
      if (!out.truncated) {
        expect(out.text).toBe(text)
        expect(bytes(text)).toBeLessThanOrEqual(maxBytes)
        return
      }
      const at = out.text.indexOf("\n[truncated:")
      const head = out.text.slice(0, at)
      const tail = out.text.slice(out.text.indexOf("]\n", at) + 2)
      expect(head.length).toBeGreaterThan(0)
      expect(tail.length).toBeGreaterThan(0)
      expect(text.startsWith(head)).toBe(true)
      expect(text.endsWith(tail)).toBe(true)
      expect(out.omittedBytes).toBe(bytes(text) - bytes(head) - bytes(tail))
    },
    { fastCheck: { numRuns: 300, seed: 42 } }
  )

  it("reports the UTF-8 length Buffer reports, lone surrogates included", () => {
    for (const text of ["", "abc", "é", "日", "😀", "\ud800", "a\udc00b", "😀\ud83d"]) {
      expect(Truncate.utf8Length(text)).toBe(bytes(text))
    }
  })

  it("cuts exactly where the rules say at every cap, for texts of short and long lines", () => {
    const texts = [
      "ab\ncd€\n😀ef\n" + "x".repeat(40) + "\néé\n" + "\u0800\u07ff\n".repeat(30) + "tail😀\nend",
      Array.from({ length: 120 }, (_, i) => `${i}${"é".repeat(i % 7)}`).join("\n")
    ]
    for (const text of texts) {
      for (let cap = 0; cap <= bytes(text) + 1; cap++) {
        expect([cap, Truncate.truncate(text, cap).text]).toEqual([cap, reference(text, cap)])
      }
    }
  })

  it.prop(
    "counts UTF-8 bytes as Node encodes them, lone surrogates included",
    { text: fc.array(fragment, { maxLength: 60 }).map((parts) => parts.join("")) },
    ({ text }) => {
      expect(Truncate.utf8Length(text)).toBe(bytes(text))
    },
    { fastCheck: { numRuns: 300, seed: 11, endOnFailure: true } }
  )

  it.prop(
    "cuts exactly where the rules say: the longest head (2/3 of the room) and tail, moved to a line break that keeps half",
    {
      text: fc.array(fragment, { minLength: 1, maxLength: 400 }).map((parts) => parts.join("")),
      maxBytes: fc.integer({ min: 0, max: 1_500 })
    },
    ({ maxBytes, text }) => {
      expect(Truncate.truncate(text, maxBytes).text).toBe(reference(text, maxBytes))
    },
    { fastCheck: { numRuns: 400, seed: 12, endOnFailure: true } }
  )
})

/**
 * Pieces of 1, 2, 3 and 4 UTF-8 bytes (each size's first and last code point among them), line breaks, and lone
 * surrogates (3 bytes each, as U+FFFD).
 */
const fragment = fc.constantFrom(
  "a",
  "z ",
  "\n",
  "\u007f",
  "\u0080",
  "é",
  "\u07ff",
  "\u0800",
  "€",
  "\uffff",
  "😀",
  "\ud800\udc00",
  "\udbff\udfff",
  "\ud800",
  "\udc00",
  "line\n",
  "ß€😀"
)

/**
 * The rules of `Truncate.truncate` (module header), written with Node's own UTF-8 sizes and the string's code points:
 * room = cap − the widest notice; the longest head within 2/3 of it, then back to the last line break when the
 * head up to it keeps at least half its budget; the longest tail within the rest, then forward past the first
 * line break on the same terms.
 */
const reference = (text: string, maxBytes: number): string => {
  const total = bytes(text)
  if (total <= maxBytes) return text
  const lines = (s: string) => s.split("\n").length - 1
  const notice = (omitted: number, omittedLines: number) =>
    `\n[truncated: ${omitted} bytes (${omittedLines} lines) omitted from the middle of this ${total}-byte ` +
    "result. Narrow the query to see the rest: add filters, request a smaller range, or paginate.]\n"
  const room = Math.max(0, maxBytes - bytes(notice(total, lines(text))))
  const headBudget = Math.floor((room * 2) / 3)
  const tailBudget = room - headBudget
  const points = Array.from(text)
  let headEnd = 0
  for (let i = 0, used = 0; i < points.length && used + bytes(points[i]!) <= headBudget; i++) {
    used += bytes(points[i]!)
    headEnd += points[i]!.length
  }
  const lastBreak = text.lastIndexOf("\n", headEnd - 1)
  if (lastBreak >= 0 && bytes(text.slice(0, lastBreak + 1)) * 2 >= headBudget) headEnd = lastBreak + 1
  let tailStart = text.length
  for (let i = points.length - 1, used = 0; i >= 0 && used + bytes(points[i]!) <= tailBudget; i--) {
    used += bytes(points[i]!)
    tailStart -= points[i]!.length
  }
  const firstBreak = text.indexOf("\n", tailStart)
  if (firstBreak >= 0 && bytes(text.slice(firstBreak + 1)) * 2 >= tailBudget) tailStart = firstBreak + 1
  const omitted = text.slice(headEnd, tailStart)
  return text.slice(0, headEnd) + notice(bytes(omitted), lines(omitted)) + text.slice(tailStart)
}
