/**
 * Random bytes from the operating system's CSPRNG, drawn 4 KiB at a time: one `randomFillSync` per ~170 ids instead
 * of one per id (a call per id showed in a session's start and in every run: docs/benchmarks.md, "Notes moved from
 * the code").
 * The bytes are the CSPRNG's either way (Node's own `randomUUID` pools the same way); each is handed out once.
 */
import { randomFillSync } from "node:crypto"

const pool = Buffer.allocUnsafe(4096)
let at = pool.length

const take = (bytes: number): number => {
  if (at + bytes > pool.length) {
    randomFillSync(pool)
    at = 0
  }
  const start = at
  at += bytes
  return start
}

/** Where a prefixed id is put together; the largest is a 4-character prefix and 32 hex digits. */
const scratch = Buffer.allocUnsafe(64)
const digits = Buffer.from("0123456789abcdef", "latin1")

/**
 * `bytes` random bytes as lowercase hex (2 × `bytes` characters) after `prefix` (one-byte characters), as ONE flat
 * string: `prefix + hex` would be a concatenation, two strings and a pair (80 bytes for a run id instead of 56), and
 * a host keeps ids for as long as it keeps sessions, turns and trajectories. `bytes` must be at most 4,096.
 */
export const hex = (bytes: number, prefix = ""): string => {
  const start = take(bytes)
  if (prefix === "") return pool.toString("hex", start, start + bytes)
  if (prefix.length + 2 * bytes > scratch.length) return prefix + pool.toString("hex", start, start + bytes)
  let out = scratch.write(prefix, 0, "latin1")
  for (let i = start; i < start + bytes; i++) {
    const byte = pool[i]!
    scratch[out++] = digits[byte >> 4]!
    scratch[out++] = digits[byte & 15]!
  }
  return scratch.toString("latin1", 0, out)
}

/** `bytes` random bytes as unpadded base64url. `bytes` must be at most 4,096. */
export const base64url = (bytes: number): string => {
  const start = take(bytes)
  return pool.toString("base64url", start, start + bytes)
}
