/**
 * Truncate — a tool result larger than `toolResultMaxBytes` (16 KiB) is cut to fit.
 *
 * Prevents: one oversized result (a full log dump, an unfiltered query) eating the context window and pushing the
 * earlier findings out. 16 KiB is a few hundred log lines: enough to read, small enough that a turn of 8 results
 * still fits. The head (2/3) and the tail (1/3) are kept, because the start says what the result is and the end is
 * where errors and totals usually sit. Cuts fall on line boundaries when that keeps at least half of the room, and
 * never inside a UTF-8 character (a split surrogate pair would poison the whole request). The notice tells the
 * model what was dropped and how to ask for less, instead of leaving it to guess.
 */

/** A possibly shortened result: `omittedBytes` is the UTF-8 size of the dropped middle (0 when unchanged). */
export interface Truncated {
  readonly text: string
  readonly truncated: boolean
  readonly omittedBytes: number
}

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff

// UTF-8 size of the code unit(s) at `i`: [units consumed, bytes]; a lone surrogate encodes as U+FFFD (3 bytes)
const stepForward = (text: string, i: number): readonly [number, number] => {
  const c = text.charCodeAt(i)
  if (c < 0x80) return [1, 1]
  if (c < 0x800) return [1, 2]
  if (isHigh(c) && i + 1 < text.length && isLow(text.charCodeAt(i + 1))) return [2, 4]
  return [1, 3]
}

// the same, for the code unit(s) ending just before `j`
const stepBackward = (text: string, j: number): readonly [number, number] => {
  const c = text.charCodeAt(j - 1)
  if (c < 0x80) return [1, 1]
  if (c < 0x800) return [1, 2]
  if (isLow(c) && j - 2 >= 0 && isHigh(text.charCodeAt(j - 2))) return [2, 4]
  return [1, 3]
}

/** The UTF-8 byte length of `text` (what `Buffer.byteLength(text, "utf8")` reports). */
export const utf8Length = (text: string): number => {
  let bytes = 0
  for (let i = 0; i < text.length;) {
    const [units, size] = stepForward(text, i)
    i += units
    bytes += size
  }
  return bytes
}

// the longest prefix end (a code-point boundary) whose UTF-8 size is <= budget
const prefixEnd = (text: string, budget: number): number => {
  let i = 0
  let used = 0
  while (i < text.length) {
    const [units, size] = stepForward(text, i)
    if (used + size > budget) break
    used += size
    i += units
  }
  return i
}

// the earliest suffix start (a code-point boundary) whose UTF-8 size is <= budget
const suffixStart = (text: string, budget: number): number => {
  let j = text.length
  let used = 0
  while (j > 0) {
    const [units, size] = stepBackward(text, j)
    if (used + size > budget) break
    used += size
    j -= units
  }
  return j
}

const countLines = (text: string): number => {
  let lines = 0
  for (let i = text.indexOf("\n"); i !== -1; i = text.indexOf("\n", i + 1)) lines++
  return lines
}

const notice = (omittedBytes: number, omittedLines: number, totalBytes: number): string =>
  `\n[truncated: ${omittedBytes} bytes (${omittedLines} lines) omitted from the middle of this ${totalBytes}-byte ` +
  "result. Narrow the query to see the rest: add filters, request a smaller range, or paginate.]\n"

/**
 * Cuts `text` to at most `maxBytes` UTF-8 bytes, notice included, keeping about 2/3 head and 1/3 tail; text that
 * fits is returned unchanged. For `maxBytes >= 512` the output always fits and keeps a non-empty head and tail;
 * below that the notice alone may not fit, and the output is the notice with whatever head and tail still fit.
 */
export const truncate = (text: string, maxBytes: number): Truncated => {
  // A UTF-16 code unit is at most 3 UTF-8 bytes: short texts need no measuring (the common case, per tool call).
  if (text.length * 3 <= maxBytes) return { text, truncated: false, omittedBytes: 0 }
  const totalBytes = utf8Length(text)
  if (totalBytes <= maxBytes) return { text, truncated: false, omittedBytes: 0 }
  // reserve the notice at its widest: the real counts are never larger than the totals
  const reserved = utf8Length(notice(totalBytes, countLines(text), totalBytes))
  const room = Math.max(0, maxBytes - reserved)
  const headBudget = Math.floor((room * 2) / 3)
  const tailBudget = room - headBudget

  let headEnd = prefixEnd(text, headBudget)
  const lastBreak = text.lastIndexOf("\n", headEnd - 1)
  if (lastBreak >= 0 && utf8Length(text.slice(0, lastBreak + 1)) * 2 >= headBudget) headEnd = lastBreak + 1

  let tailStart = suffixStart(text, tailBudget)
  const firstBreak = text.indexOf("\n", tailStart)
  if (firstBreak >= 0 && utf8Length(text.slice(firstBreak + 1)) * 2 >= tailBudget) tailStart = firstBreak + 1

  // head + tail <= room < totalBytes, so the two never overlap
  const head = text.slice(0, headEnd)
  const tail = text.slice(tailStart)
  const omitted = text.slice(headEnd, tailStart)
  const omittedBytes = utf8Length(omitted)
  const body = notice(omittedBytes, countLines(omitted), totalBytes)
  return { text: head + body + tail, truncated: true, omittedBytes }
}
