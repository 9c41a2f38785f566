/**
 * Progress and log notifications of a real Streamable HTTP server: progress keeps a call alive past its timeout, up
 * to the hard cap; both become notices for the session's stream. Live clock: the server is a real socket reporting
 * in real time (the deadline's own arithmetic is tested under `TestClock` in internal/progressDeadline.test.ts).
 */
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import type { ToolNotice } from "../../src/tools/ToolNotices.js"
import { ToolNotices } from "../../src/tools/ToolNotices.js"
import * as McpHttpFixture from "../support/McpHttpFixture.js"
import { ctx } from "../support/McpServers.js"

describe("McpRegistry progress", () => {
  it.scopedLive("keeps a call that reports progress alive past its timeout", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start()
      const mcp = yield* McpRegistry.make({ remote: { url: server.url, timeoutMs: 400 } })
      // 8 × 100 ms = 0.8 s, twice the timeout: only progress keeps it going.
      const outcome = yield* mcp.call("progress", `{"everyMs":100,"count":8}`, ctx)
      expect(outcome).toEqual({ content: "done", isError: false })
    }))

  it.scopedLive("stops a call that reports progress for ever at the hard cap, five timeouts after it started", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start()
      const mcp = yield* McpRegistry.make({ remote: { url: server.url, timeoutMs: 300 } })
      const startedAt = yield* Clock.currentTimeMillis
      const outcome = yield* mcp.call("endless", `{"everyMs":50}`, ctx)
      const took = (yield* Clock.currentTimeMillis) - startedAt
      expect(outcome).toMatchObject({ isError: true, failure: "timeout" })
      expect(outcome.content).toMatch(
        /^tool "endless" was still reporting progress after 1500 ms, the most one call may run; it was stopped\. Last progress reported: \d+\./
      )
      expect(took).toBeGreaterThanOrEqual(1450)
      expect(took).toBeLessThan(5000)
    }))

  it.scopedLive("hands the call's progress and its server's log messages to ToolNotices", () =>
    Effect.gen(function*() {
      const server = yield* McpHttpFixture.start()
      const seen: Array<ToolNotice> = []
      const notices = Layer.succeed(ToolNotices, { notify: (notice) => Effect.sync(() => seen.push(notice)) })
      const mcp = yield* McpRegistry.make({ remote: { url: server.url } }).pipe(Effect.provide(notices))
      expect(yield* mcp.call("chatty", "{}", ctx)).toEqual({ content: "chatted", isError: false })
      // Each notice is forked (they arrive in SDK callbacks): poll until both landed, bounded.
      for (let i = 0; i < 100 && seen.length < 2; i++) yield* Effect.sleep("10 millis")
      expect(seen).toEqual([
        {
          _tag: "log",
          sessionId: "ses_1",
          callId: "call_1",
          name: "chatty",
          level: "info",
          message: "fixture: warming up"
        },
        {
          _tag: "progress",
          sessionId: "ses_1",
          callId: "call_1",
          name: "chatty",
          progress: 1,
          total: 2,
          message: undefined
        }
      ])
    }))
})
