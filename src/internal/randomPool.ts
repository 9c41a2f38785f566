/**
 * Random bytes from the operating system's CSPRNG, drawn 4 KiB at a time: one `randomFillSync` per ~170 ids instead
 * of one per id (a call per id cost ~1 µs of a session's start and of every run, measured in scenario A's profile).
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

/** `bytes` random bytes as lowercase hex (2 × `bytes` characters). `bytes` must be at most 4,096. */
export const hex = (bytes: number): string => {
  const start = take(bytes)
  return pool.toString("hex", start, start + bytes)
}

/** `bytes` random bytes as unpadded base64url. `bytes` must be at most 4,096. */
export const base64url = (bytes: number): string => {
  const start = take(bytes)
  return pool.toString("base64url", start, start + bytes)
}
