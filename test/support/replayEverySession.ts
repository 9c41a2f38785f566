/**
 * Setup file: every session a test file stores in memory is replayed after the file's tests (`corral/testing`
 * replayStored); a divergence fails the file with the path of the first difference.
 */
import { Effect } from "effect"
import { afterAll } from "vitest"
import * as ReplayStored from "../../src/testing/replayStored.js"

const tracked = ReplayStored.trackMemoryStores()

afterAll(async () => {
  tracked.stop()
  const summary = await Effect.runPromise(ReplayStored.verifyStores(tracked.stores))
  if (summary.diverged.length > 0) {
    throw new Error(
      `${summary.diverged.length} stored burst(s) diverged on replay:\n` +
        summary.diverged.slice(0, 5).map((d) => ReplayStored.describe(d.sessionId, d.divergence)).join("\n")
    )
  }
  if (process.env.CORRAL_REPLAY_SUMMARY !== undefined) {
    const why = new Map<string, number>()
    for (const skipped of summary.skipped) why.set(skipped.why, (why.get(skipped.why) ?? 0) + 1)
    console.log(
      `replay: ${summary.sessions} sessions, ${summary.verified} bursts verified, ${summary.skipped.length} skipped` +
        [...why].map(([reason, n]) => `\n  skipped ${n}: ${reason}`).join("")
    )
  }
}, 120_000)
