/**
 * InputLimits — what a request's text may hold before anything decodes it: how deep its JSON nests, how long its
 * strings are, and which characters its strings, ids and query values may carry.
 *
 * Prevents: input that costs more to reject than to send, and input the store cannot hold reported as an outage.
 * Decoding a 5,000-deep array recursed until the stack gave out (a 500 with an empty body); a NUL byte in an id or a
 * query value reached Postgres, whose `text` cannot hold U+0000, and came back as a 503 "store unavailable" plus an
 * ERROR log — a false outage alarm. Each check here is linear in the request's size and runs before the schema
 * decode and before any store call, so bad input is a 400 that names the limit.
 *
 * Why the bounds sit where they do: no document Corral accepts nests deeper than an agent spec whose report schema
 * nests objects some twenty levels (two JSON levels per schema level), so 64 leaves room and still bounds every
 * recursion over the value; no field accepts a string longer than a prompt (200,000 characters), so a longer one
 * can only be refused later, at a higher cost; ids are Corral's own (`ses_` + 32 hex) or an agent id (64
 * characters at most), so 100 characters of a URL-safe alphabet hold every real one.
 */
import { Option, Schema } from "effect"

/** The deepest JSON nesting a body may have (arrays and objects, counted together). */
export const maxDepth = 64

/** The longest string (or object key) a body may hold, in UTF-16 code units: the longest field any route accepts. */
export const maxStringChars = 200_000

/**
 * The longest path id (`/v1/sessions/{id}`, `/v1/agents/{id}`), and of any path segment: the router matches no
 * parameter longer than 100 characters (find-my-way's `maxParamLength`), so a longer one would be a 404 "no route".
 */
export const maxIdChars = 100

/** The alphabet of a path id: URL-safe, printable, no whitespace. */
export const idPattern = /^[A-Za-z0-9][A-Za-z0-9._:~@+=-]*$/

/** The longest query value any route accepts. */
export const maxQueryChars = 2048

/** How much of an offending value an error body may quote. */
export const excerptChars = 64

/** One limit a request broke: which (stable name), where, and what the client should know. */
export interface Violation {
  readonly limit: string
  readonly path: ReadonlyArray<string | number>
  readonly message: string
}

/** At most `max` characters of `value`, marked when cut (never splits a surrogate pair). */
export const excerpt = (value: string, max: number = excerptChars): string => {
  if (value.length <= max) return value
  let end = max
  const code = value.charCodeAt(end - 1)
  if (code >= 0xd800 && code <= 0xdbff) end -= 1
  return `${value.slice(0, end)}… (${value.length} chars)`
}

// C0 controls (NUL included) and DEL; tab, newline and carriage return are text.
// eslint-disable-next-line no-control-regex
const forbidden = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** Why a string from a URL (a decoded path segment or query value) cannot be used, if it cannot. */
export const urlStringProblem = (value: string): string | undefined => {
  if (forbidden.test(value)) return "contains a control character (NUL included), which no id or filter may hold"
  if (loneSurrogate.test(value)) return "is not well-formed Unicode"
  return undefined
}

/**
 * The first problem with a request target's path segments and query values: malformed percent-encoding, control
 * characters (NUL included), ill-formed Unicode, or a query value longer than `maxQueryChars`.
 */
export const checkTarget = (target: string): Option.Option<Violation> => {
  const [path = "", query = ""] = splitTarget(target)
  for (const segment of path.split("/")) {
    const decoded = decode(segment)
    if (decoded === undefined) {
      return Option.some({ limit: "encoding", path: ["path"], message: "the path has a malformed %-escape" })
    }
    const problem = urlStringProblem(decoded)
    if (problem !== undefined) {
      return Option.some({ limit: "charset", path: ["path"], message: `a path segment ${problem}` })
    }
    if (decoded.length > maxIdChars) {
      return Option.some({
        limit: "maxIdChars",
        path: ["path"],
        message: `a path segment (an id) is longer than ${maxIdChars} characters; ids are at most ${maxIdChars}`
      })
    }
  }
  if (query === "") return Option.none()
  for (const pair of query.split("&")) {
    const cut = pair.indexOf("=")
    const name = decode((cut < 0 ? pair : pair.slice(0, cut)).replace(/\+/g, " "))
    const value = decode((cut < 0 ? "" : pair.slice(cut + 1)).replace(/\+/g, " "))
    if (name === undefined || value === undefined) {
      return Option.some({ limit: "encoding", path: ["query"], message: "the query has a malformed %-escape" })
    }
    const where = ["query", excerpt(name, 32)]
    const problem = urlStringProblem(name) ?? urlStringProblem(value)
    if (problem !== undefined) return Option.some({ limit: "charset", path: where, message: `?${where[1]} ${problem}` })
    if (value.length > maxQueryChars) {
      return Option.some({
        limit: "maxQueryChars",
        path: where,
        message: `?${where[1]} is longer than ${maxQueryChars} characters`
      })
    }
  }
  return Option.none()
}

const splitTarget = (target: string): [string, string] => {
  const cut = target.indexOf("?")
  return cut < 0 ? [target, ""] : [target.slice(0, cut), target.slice(cut + 1)]
}

const decode = (text: string): string | undefined => {
  try {
    return decodeURIComponent(text)
  } catch {
    return undefined
  }
}

const tooDeep = (): Violation => ({
  limit: "maxDepth",
  path: [],
  message: `the body nests deeper than ${maxDepth} levels of arrays and objects`
})

const tooLong = (): Violation => ({
  limit: "maxStringChars",
  path: [],
  message: `the body holds a string longer than ${maxStringChars} characters (no field accepts more)`
})

/**
 * Scans JSON text once, without parsing it: the first nesting deeper than `maxDepth` or string longer than
 * `maxStringChars` (in UTF-16 units, as `String.length` counts them, an escape as one). Linear time, constant space;
 * text that is not JSON is the parser's to refuse, after this scan.
 */
export const scanJson = (text: string): Option.Option<Violation> => {
  let depth = 0
  let inString = false
  let run = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x22) {
        inString = false
        continue
      }
      // An escape is one UTF-16 unit, like the character it stands for: `\uXXXX` spans six source characters.
      if (c === 0x5c) i += text.charCodeAt(i + 1) === 0x75 ? 5 : 1
      if (++run > maxStringChars) return Option.some(tooLong())
      continue
    }
    if (c === 0x22) {
      inString = true
      run = 0
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return Option.some(tooDeep())
    } else if (c === 0x5d || c === 0x7d) {
      depth--
    }
  }
  return Option.none()
}

/**
 * Walks a parsed body (at most `maxDepth` deep, see `scanJson`) for what no route may accept: a string or key longer
 * than `maxStringChars`, a NUL (Postgres cannot store U+0000 in text or JSON), or ill-formed Unicode (a lone
 * surrogate, which the store cannot round-trip). Names the path of the first offence.
 */
export const checkValue = (value: unknown): Option.Option<Violation> => {
  // Paths are rebuilt from parent links only for the offence: the walk allocates one small node per value.
  interface Node {
    readonly value: unknown
    readonly key: string | number | undefined
    readonly parent: Node | undefined
  }
  const pathOf = (node: Node | undefined, last?: string): ReadonlyArray<string | number> => {
    const path: Array<string | number> = last === undefined ? [] : [excerpt(last, 32)]
    for (let at = node; at !== undefined && at.key !== undefined; at = at.parent) {
      path.unshift(typeof at.key === "string" ? excerpt(at.key, 32) : at.key)
    }
    return path
  }
  const problem = (text: string): Omit<Violation, "path"> | undefined => {
    if (text.length > maxStringChars) return tooLong()
    if (text.includes("\u0000")) {
      return { limit: "charset", message: "a string holds a NUL (U+0000), which Corral cannot store" }
    }
    if (loneSurrogate.test(text)) {
      return { limit: "charset", message: "a string is not well-formed Unicode (a lone surrogate)" }
    }
    return undefined
  }
  const stack: Array<Node> = [{ value, key: undefined, parent: undefined }]
  while (stack.length > 0) {
    const node = stack.pop()!
    if (typeof node.value === "string") {
      const found = problem(node.value)
      if (found !== undefined) return Option.some({ ...found, path: pathOf(node) })
    } else if (Array.isArray(node.value)) {
      node.value.forEach((item, index) => stack.push({ value: item, key: index, parent: node }))
    } else if (typeof node.value === "object" && node.value !== null) {
      for (const [key, item] of Object.entries(node.value)) {
        const found = problem(key)
        if (found !== undefined) return Option.some({ ...found, path: pathOf(node, key) })
        stack.push({ value: item, key, parent: node })
      }
    }
  }
  return Option.none()
}

/**
 * A path id (a session's or an agent's): bounded and URL-safe, so an id no store could hold (a NUL byte, 100 KB of
 * text) is a 400 from the contract and never reaches a store call. Here (not in `Api`) so that groups defined in
 * their own files share the one schema.
 */
export const PathId = Schema.String.pipe(
  Schema.maxLength(maxIdChars, {
    message: () => `an id of at most ${maxIdChars} characters`
  }),
  Schema.pattern(idPattern, {
    message: () => "an id of letters, digits and . _ : ~ @ + = - (starting with a letter or digit)"
  })
).annotations({ identifier: "PathId", description: "A session id (`ses_…`) or an agent id" })
