/**
 * False and true takeovers (issue 46): a node of a two-node cluster is stopped (SIGSTOP — alive, its sockets and
 * database connections open, as in a long GC pause, a starved CPU or a paused VM) mid-burst for each stall length
 * asked, then let go on; optionally with the CPU starved by busy processes throughout. For each stall: whether the
 * other node took the stalled node's shards, whether it logged the runner as silent past the heartbeat window, how
 * soon both held shards again, how long messages accepted meanwhile waited, and the checker over the whole store
 * (test/cluster/Restarts.ts `stall`).
 *
 *   CORRAL_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
 *     npx tsx --conditions=corral-source scripts/bench/stalls.ts --stalls 2000,4000,5000,8000 --repeat 3
 *
 * Options: `--stalls ms,ms,…` (default 2000,4000,5000,8000), `--repeat N` rounds per stall (default 3), `--hog K`
 * busy processes spinning for the whole run (default 0), `--sessions N` (default 8), `--delay-ms N` (the demo model's
 * think time, default 400). Prints one `STALL <json>` line per round and a `RESULT <json>` summary; exits 1 at the
 * first round the checker fails, after printing the nodes' output. The heartbeat window is three health-check
 * periods (6 s by default): a stall well under it should never move shards, one over it always.
 */
import { Config, Effect, Option } from "effect"
import { spawn } from "node:child_process"
import * as Restarts from "../../test/cluster/Restarts.js"

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1]! : fallback
}

/** `k` processes spinning on the CPU until the scope closes. */
const hogs = (k: number) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      Array.from({ length: k }, () => spawn(process.execPath, ["-e", "for(;;){}"], { stdio: "ignore" }))
    ),
    (children) => Effect.sync(() => children.forEach((child) => child.kill("SIGKILL")))
  )

const program = Effect.gen(function*() {
  const adminUrl = Option.getOrUndefined(yield* Config.option(Config.string("CORRAL_TEST_DATABASE_URL")))
  if (adminUrl === undefined) return yield* Effect.dieMessage("set CORRAL_TEST_DATABASE_URL (bash .ci/postgres.sh)")
  const stalls = arg("stalls", "2000,4000,5000,8000").split(",").map(Number)
  const repeat = Number(arg("repeat", "3"))
  const hog = Number(arg("hog", "0"))
  const settings: Restarts.Settings = {
    sessions: Number(arg("sessions", "8")),
    lockExpirationMs: 35_000,
    demoDelayMs: Number(arg("delay-ms", "400"))
  }
  const r = yield* Restarts.rig(adminUrl, settings)
  yield* hogs(hog)
  const results: Array<Restarts.StallResult> = []
  let n = 0
  for (const stallMs of stalls) {
    for (let i = 0; i < repeat; i++) {
      n++
      const result = yield* Restarts.stall(r, n, (n % 2) as 0 | 1, stallMs, { settleWithin: "180 seconds" })
      results.push(result)
      console.log(`STALL ${JSON.stringify(result)}`)
      if (result.violations.length > 0) {
        console.log(r.logs.join("\n\n"))
        console.log(`RESULT ${JSON.stringify(summary(results, hog))}`)
        return yield* Effect.sync(() => process.exit(1))
      }
    }
  }
  console.log(`RESULT ${JSON.stringify(summary(results, hog))}`)
})

const median = (values: ReadonlyArray<number>) => {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN
}

const summary = (results: ReadonlyArray<Restarts.StallResult>, hog: number) => ({
  hog,
  rounds: results.length,
  passed: results.filter((r) => r.violations.length === 0).length,
  byStall: Object.fromEntries([...new Set(results.map((r) => r.stallMs))].map((stallMs) => {
    const of = results.filter((r) => r.stallMs === stallMs)
    return [stallMs, {
      rounds: of.length,
      takenOver: of.filter((r) => r.takenOver).length,
      withShardsMoved: of.filter((r) => r.shardsMoved > 0).length,
      shardsMovedMax: Math.max(...of.map((r) => r.shardsMoved)),
      declaredLost: of.filter((r) => r.declaredLost).length,
      exited: of.filter((r) => r.exited).length,
      fenced: of.reduce((sum, r) => sum + r.fenced, 0),
      backMs: median(of.map((r) => r.backMs)),
      waitedMs: median(of.flatMap((r) => r.waitedMs)),
      maxWaitedMs: Math.max(...of.flatMap((r) => r.waitedMs).filter(Number.isFinite))
    }]
  }))
})

Effect.runPromise(Effect.scoped(program)).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
