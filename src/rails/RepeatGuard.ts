/**
 * RepeatGuard — the same call returning the same result, again and again.
 *
 * Prevents: a model stuck in a loop, re-issuing an identical query and hoping for a different answer until a
 * counter ceiling finally stops it. Both halves matter: the same call with a NEW result (a status being polled
 * while it changes) is legitimate. At the second identical occurrence the model is told plainly that repeating
 * will not help (models usually correct course on an explicit nudge); at the fourth the burst halts
 * (`repeat_call_halt`), early enough that the loop has not eaten the burst's model-call ceiling.
 * State lives for one burst: a follow-up message may legitimately re-check the same thing.
 */
import { hash } from "node:crypto"
import type { Limits } from "../domain/Limits.js"

/** Occurrences per fingerprint (name + canonical arguments + result) within one burst. */
export interface RepeatGuard {
  readonly counts: ReadonlyMap<string, number>
}

// The guard is a persistent list, newest observation first: observing adds one node and shares the rest, where a copy
// of the counts per call (a Map per tool call, growing through the burst) was ~2 % of a turn in workload A. A burst's
// list is bounded by its tool-call budget, so the walk that finds a fingerprint's last count stays short.
interface Node {
  readonly key: string
  readonly count: number
  readonly prev: Node | undefined
}

class Guard implements RepeatGuard {
  constructor(readonly head: Node | undefined) {}
  /** The count of `key` so far (0 when never seen). */
  countOf(key: string): number {
    for (let node = this.head; node !== undefined; node = node.prev) if (node.key === key) return node.count
    return 0
  }
  get counts(): ReadonlyMap<string, number> {
    const counts = new Map<string, number>()
    for (let node = this.head; node !== undefined; node = node.prev) {
      if (!counts.has(node.key)) counts.set(node.key, node.count)
    }
    return counts
  }
}

/** A guard given as plain counts (not built by `observe`), as a list. */
const fromCounts = (counts: ReadonlyMap<string, number>): Guard => {
  let head: Node | undefined
  for (const [key, count] of counts) head = { key, count, prev: head }
  return new Guard(head)
}

/** The state at the start of a burst. */
export const empty: RepeatGuard = new Guard(undefined)

const sortKeys = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(sortKeys)
  if (value !== null && typeof value === "object") {
    // fromEntries defines own properties, so a "__proto__" key stays data and never touches the prototype
    return Object.fromEntries(
      Object.keys(value).sort().map((key) => [key, sortKeys((value as Record<string, unknown>)[key])])
    )
  }
  return value
}

/**
 * The arguments as compact JSON with object keys sorted recursively, so key order and whitespace do not make two
 * calls look different; text that is not valid JSON is returned unchanged (it is compared verbatim).
 */
export const canonicalArgs = (argumentsJson: string): string => {
  let parsed: unknown
  try {
    parsed = JSON.parse(argumentsJson)
  } catch {
    return argumentsJson
  }
  return JSON.stringify(sortKeys(parsed))
}

/**
 * A short hash (28 hex chars, 112 bits of SHA-1), stable across processes, of the tool name, the canonical arguments
 * and the result text; equal inputs always give equal fingerprints, different ones collide only with negligible
 * probability. Node's one-shot `crypto.hash` over the text: a result is often kilobytes, and two passes of a hash in
 * JavaScript (cyrb53 with two seeds, before) cost ~15 µs per kilobyte-sized call against ~1.3 µs (measured).
 */
export const fingerprint = (name: string, argumentsJson: string, resultContent: string): string => {
  // lengths first, so no choice of separator can make ("a", "b|c") and ("a|b", "c") look alike
  const args = canonicalArgs(argumentsJson)
  return hash("sha1", `${name.length}:${name}|${args.length}:${args}|${resultContent}`).slice(0, 28)
}

/** What the loop does after observing a call: carry on, warn the model, or halt the burst. */
export type Verdict = "ok" | "warn" | "halt"

/**
 * Counts one completed call. `count` includes this one; the verdict is `halt` when `count >= repeatHaltAt`,
 * else `warn` when `count >= repeatWarnAt`, else `ok`. Never fails; the input state is not mutated.
 */
export const observe = (
  g: RepeatGuard,
  name: string,
  argumentsJson: string,
  resultContent: string,
  limits: Limits
): { readonly guard: RepeatGuard; readonly verdict: Verdict; readonly count: number } => {
  const key = fingerprint(name, argumentsJson, resultContent)
  const guard = g instanceof Guard ? g : fromCounts(g.counts)
  const count = guard.countOf(key) + 1
  const verdict: Verdict = count >= limits.repeatHaltAt ? "halt" : count >= limits.repeatWarnAt ? "warn" : "ok"
  return { guard: new Guard({ key, count, prev: guard.head }), verdict, count }
}

/** The text appended to the result the model sees when the verdict is `warn`. */
export const warning = (name: string, count: number, haltAt: number): string =>
  `[repeat guard] this exact call to ${name} (same arguments) has now returned the same result ${count} times; ` +
  "repeating it will not change the answer. Use the result you have, or change the query. " +
  `The session halts if this identical call is made ${haltAt} times.`
