import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import * as OrgGate from "../../src/session/OrgGate.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"

describe("OrgGate.live", () => {
  it.effect("a spend the store cannot count is logged with the session, the amount and the day, and the call goes on", () =>
    Effect.gen(function*() {
      const inner = yield* MemoryStore.makeMemory
      const settled: Array<readonly [number, number]> = []
      const store: typeof inner = {
        ...inner,
        settleSpend: (_orgId, _day, granted, spent) =>
          Effect.zipRight(
            Effect.sync(() => void settled.push([granted, spent])),
            Effect.fail(new PersistenceFailed({ operation: "settleSpend", message: "the database is gone" }))
          )
      }
      const gate = OrgGate.live(store, "org_a", 1_000_000, "ses_1")
      const hold: OrgGate.Hold = {
        day: "2026-12-06",
        resetsAt: 0,
        granted: 5_000,
        tally: { spentMicros: 0, heldMicros: 5_000 }
      }
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => void lines.push(`${logLevel.label} ${String(message)}`))
      yield* gate.settle(hold, 1_234).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      expect(settled).toEqual([[5_000, 1_234]])
      expect(lines).toEqual([
        "WARN session ses_1: the org's spend of 1234 micro-dollars on 2026-12-06 was not counted " +
        "(settleSpend: the database is gone); its daily budget will not see it"
      ])
      // Nothing held and nothing spent (a call the gate refused): nothing to settle.
      yield* gate.settle({ ...hold, granted: 0 }, 0)
      expect(settled).toHaveLength(1)
    }))
})
