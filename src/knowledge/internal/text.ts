/**
 * Text helpers shared by the retrievers: query terms, a crude English stem, and the bounded excerpt a chunk
 * carries. Chunks are bounded so that five of them can never crowd the question out of the first user turn.
 */

/** The most characters of a document one chunk carries. */
export const maxChunkChars = 2_000

// websearch_to_tsquery's own operators, and words too common to locate a passage by.
const ignored = new Set(["or", "and", "not", "the", "a", "an", "of", "to", "in", "is", "on", "for"])

/** A rough stand-in for the 'english' stemmer: enough to find "restarts" when asked for "restart". */
export const stem = (word: string): string => {
  for (const suffix of ["ing", "ed", "es", "s"]) {
    if (word.length > suffix.length + 2 && word.endsWith(suffix)) return word.slice(0, -suffix.length)
  }
  return word
}

/** The words of `text`, lower-cased, in order. */
export const words = (text: string): ReadonlyArray<string> => text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []

/** The distinct stemmed terms of a query, negated ("-word") and operator words left out. */
export const queryTerms = (query: string): ReadonlyArray<string> => {
  const terms = new Set<string>()
  for (const token of query.toLowerCase().split(/\s+/)) {
    if (token.startsWith("-")) continue
    for (const word of words(token)) if (!ignored.has(word)) terms.add(stem(word))
  }
  return [...terms]
}

/**
 * At most `maxChars` of `body`: the whole body when it fits, else a window that opens a little before the first
 * occurrence of a query term (or the head when none is found), cut on word boundaries where possible.
 */
export const excerpt = (body: string, terms: ReadonlyArray<string>, maxChars: number = maxChunkChars): string => {
  if (body.length <= maxChars) return body
  // Two characters are kept for the ellipses that mark a cut, so a chunk never exceeds `maxChars`.
  const budget = maxChars - 2
  const lower = body.toLowerCase()
  let first = -1
  for (const term of terms) {
    const at = lower.indexOf(term)
    if (at >= 0 && (first < 0 || at < first)) first = at
  }
  // A quarter of the window before the match keeps the sentence that introduces it.
  let start = first < 0 ? 0 : Math.max(0, Math.min(first - Math.floor(budget / 4), body.length - budget))
  if (start > 0) {
    const space = body.indexOf(" ", start)
    if (space >= 0 && space < start + 40 && space < first) start = space + 1
  }
  let end = Math.min(body.length, start + budget)
  if (end < body.length) {
    const space = body.lastIndexOf(" ", end)
    if (space > start + budget / 2) end = space
  }
  return `${start > 0 ? "…" : ""}${body.slice(start, end)}${end < body.length ? "…" : ""}`
}
