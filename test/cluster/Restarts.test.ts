/**
 * Real faults, several rounds in a row, with the checker over the whole store after each (issue 46;
 * test/cluster/Restarts.ts runs the rounds). The soak (`scripts/bench/restarts.ts`) runs the same rounds 50 at a
 * time; here a few, fixed:
 *
 * - a rolling restart: two rounds of SIGTERM mid-burst, one per node, with 30 s shard locks (so the sweep, which
 *   runs as often as a lock lives, cannot be what runs a message). Each stop exits 0 within its bound (the drain's
 *   10 s + 2 s), every message accepted through the other node while the node stops runs within 10 s — on the next
 *   owner, at once, not at the sweep — and the checker finds nothing: transcripts paired and numbered 1..n, every
 *   acknowledged message exactly once and in order, no session left `running`, every follower on the other node saw
 *   every turn once, in order, and the landing after its last message.
 * - SIGKILL mid-burst, each node in turn (so one of the kills takes the runner that runs the cluster's own health
 *   check), with the default 35 s locks: the survivor holds every shard within 10 s of the kill (the watchdog, or the
 *   cluster's check, finds the dead node, whose advisory locks went with its connection), and the same checks once
 *   its sessions have moved.
 *
 * - a stall (SIGSTOP) of a node mid-burst: 2 s moves no shard; 8 s (past the 6 s heartbeat window) moves its shards,
 *   and once it runs again its writes for the sessions it lost are refused (its fence) — the checker finds nothing.
 *
 * Postgres only; skipped without CORRAL_TEST_DATABASE_URL. Wall time only because real processes are the subject;
 * every wait is bounded.
 */
import { describe, expect, it } from "@effect/vitest"
import type { Duration } from "effect"
import { Effect } from "effect"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import * as Restarts from "./Restarts.js"
import { exclusive } from "./support.js"

const skipped = testDatabaseUrl === undefined ? ` (${skipReason})` : ""

/** Runs `rounds` on a fresh rig; prints the nodes' output when a round fails. */
const rounds = (
  settings: Restarts.Settings,
  plan: ReadonlyArray<readonly [0 | 1, "SIGTERM" | "SIGKILL"]>,
  settleWithin: Duration.DurationInput
) =>
  Effect.gen(function*() {
    yield* exclusive
    const r = yield* Restarts.rig(testDatabaseUrl!, settings)
    const results: Array<Restarts.RoundResult> = []
    for (const [i, [victim, signal]] of plan.entries()) {
      const result = yield* Restarts.round(r, i + 1, victim, signal, { stopWithin: "30 seconds", settleWithin })
      console.log(`ROUND ${JSON.stringify(result)}`)
      if (result.violations.length > 0) console.log(r.logs.join("\n\n"))
      results.push(result)
    }
    return results
  }).pipe(Effect.scoped)

describe("rounds of real faults on a two-node cluster", () => {
  it.live.skipIf(testDatabaseUrl === undefined)(
    `a rolling restart (SIGTERM mid-burst, each node in turn): bounded stops, messages accepted meanwhile run at once on the next owner, the checker finds nothing${skipped}`,
    () =>
      Effect.gen(function*() {
        const results = yield* rounds({ sessions: 8, lockExpirationMs: 30_000, demoDelayMs: 400 }, [
          [1, "SIGTERM"],
          [0, "SIGTERM"]
        ], "90 seconds")
        for (const result of results) {
          expect(result.violations).toEqual([])
          expect(result.exitCode).toBe(0)
          expect(result.stopMs).toBeLessThanOrEqual(12_000)
          expect(Math.max(...result.waitedMs)).toBeLessThanOrEqual(10_000)
        }
      }),
    { timeout: 420_000 }
  )

  it.live.skipIf(testDatabaseUrl === undefined)(
    `SIGKILL mid-burst, each node in turn: the dead node's shards move within 10 s with the default locks, nothing lost, run twice, unpaired or left running${skipped}`,
    () =>
      Effect.gen(function*() {
        const results = yield* rounds(
          { sessions: 8, lockExpirationMs: 35_000, demoDelayMs: 400 },
          [[1, "SIGKILL"], [0, "SIGKILL"]],
          "120 seconds"
        )
        for (const result of results) {
          expect(result.violations).toEqual([])
          expect(result.takeoverMs).toBeLessThanOrEqual(10_000)
        }
      }),
    { timeout: 420_000 }
  )

  it.live.skipIf(testDatabaseUrl === undefined)(
    `a node stopped (SIGSTOP) mid-burst for 2 s keeps its shards; for 8 s, the other node takes them, and once let go on the stalled node writes nothing for the sessions it lost: the checker finds nothing${skipped}`,
    () =>
      Effect.gen(function*() {
        yield* exclusive
        const r = yield* Restarts.rig(testDatabaseUrl!, { sessions: 8, lockExpirationMs: 35_000, demoDelayMs: 400 })
        const short = yield* Restarts.stall(r, 1, 1, 2_000, { settleWithin: "120 seconds" })
        console.log(`STALL ${JSON.stringify(short)}`)
        const long = yield* Restarts.stall(r, 2, 0, 8_000, { settleWithin: "120 seconds" })
        console.log(`STALL ${JSON.stringify(long)}`)
        if (short.violations.length + long.violations.length > 0) console.log(r.logs.join("\n\n"))
        // Under the heartbeat window (6 s): a pause is not a death.
        expect(short.shardsMoved).toBe(0)
        expect(short.declaredLost).toBe(false)
        expect(short.violations).toEqual([])
        // Over it: taken over while stopped; its bursts, resumed, are refused by its fence (or lose their connection).
        expect(long.declaredLost).toBe(true)
        expect(long.shardsMoved).toBeGreaterThan(0)
        expect(long.exited).toBe(false)
        expect(long.violations).toEqual([])
      }).pipe(Effect.scoped),
    { timeout: 420_000 }
  )
})
