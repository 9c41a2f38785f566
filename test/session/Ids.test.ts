import { describe, expect, it } from "@effect/vitest"
import * as Ids from "../../src/session/Ids.js"

describe("Ids.random", () => {
  it("mints ids of the documented shapes, never the same one twice across the pool's refills", () => {
    const seen = new Set<string>()
    // 10,000 ids of 16 bytes and tokens of 24: the 4 KiB pool is refilled dozens of times on the way.
    for (let i = 0; i < 10_000; i++) {
      const run = Ids.random.runId()
      const token = Ids.random.token()
      expect(run).toMatch(/^run_[0-9a-f]{32}$/)
      expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/)
      seen.add(run)
      seen.add(token)
    }
    expect(Ids.random.sessionId()).toMatch(/^ses_[0-9a-f]{32}$/)
    expect(Ids.random.messageId()).toMatch(/^msg_[0-9a-f]{32}$/)
    expect(seen.size).toBe(20_000)
  })
})
