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

// The guard is a persistent list, newest observation first: observing adds one node and shares the rest, where a copy
// of the counts per call (a Map per tool call, growing through the burst) was ~2 % of a turn in workload A. A burst's
// list is bounded by its tool-call budget, so the walk that finds a call's last count stays short. A result is hashed
// only when it could be a repeat — when an earlier call of the burst had the same tool and the same canonical
// arguments: most calls differ in their arguments, and then no hash is computed at all (SHA-1 of kilobyte results was
// another ~2 % of a turn). The nodes hold the results the burst's trajectory holds anyway.
interface Node {
  readonly name: string
  /** Canonical (`canonicalArgs`). */
  readonly args: string
  readonly result: string
  /** The fingerprint, computed the first time a later call with the same tool and arguments compares to it. */
  key: string | undefined
  readonly count: number
  readonly prev: Node | undefined
}

const keyOf = (node: Node): string => node.key ??= fingerprintOf(node.name, node.args, node.result)

/** Occurrences per fingerprint (name + canonical arguments + result) within one burst; made by `empty` and `observe`. */
export interface RepeatGuard {
  readonly _tag: "RepeatGuard"
}

class Guard implements RepeatGuard {
  readonly _tag = "RepeatGuard"
  constructor(readonly head: Node | undefined) {}
  /** How often this call (canonical `args`) returned `result` so far (0 when never), and its fingerprint if taken. */
  countOf(name: string, args: string, result: string): { readonly count: number; readonly key: string | undefined } {
    let key: string | undefined
    for (let node = this.head; node !== undefined; node = node.prev) {
      // Only an earlier call with the same tool and arguments can be a repeat: the others are never hashed.
      if (node.name !== name || node.args !== args) continue
      key ??= fingerprintOf(name, args, result)
      if (keyOf(node) === key) return { count: node.count, key }
    }
    return { count: 0, key }
  }
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
 * probability. Node's one-shot `crypto.hash` over the text: a result is often kilobytes, and native hashing is an
 * order of magnitude cheaper than two passes of a hash in JavaScript (docs/benchmarks.md, "Notes moved from the code").
 */
export const fingerprint = (name: string, argumentsJson: string, resultContent: string): string =>
  fingerprintOf(name, canonicalArgs(argumentsJson), resultContent)

/** `fingerprint` of arguments already canonical. */
const fingerprintOf = (name: string, args: string, resultContent: string): string =>
  // lengths first, so no choice of separator can make ("a", "b|c") and ("a|b", "c") look alike
  hash("sha1", `${name.length}:${name}|${args.length}:${args}|${resultContent}`).slice(0, 28)

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
  const args = canonicalArgs(argumentsJson)
  // Every guard is a Guard: `empty` and `observe` are the only ways to make one.
  const guard = g as Guard
  const seen = guard.countOf(name, args, resultContent)
  const count = seen.count + 1
  const verdict: Verdict = count >= limits.repeatHaltAt ? "halt" : count >= limits.repeatWarnAt ? "warn" : "ok"
  const node: Node = { name, args, result: resultContent, key: seen.key, count, prev: guard.head }
  return { guard: new Guard(node), verdict, count }
}

/** The text appended to the result the model sees when the verdict is `warn`. */
export const warning = (name: string, count: number, haltAt: number): string =>
  `[repeat guard] this exact call to ${name} (same arguments) has now returned the same result ${count} times; ` +
  "repeating it will not change the answer. Use the result you have, or change the query. " +
  `The session halts if this identical call is made ${haltAt} times.`
