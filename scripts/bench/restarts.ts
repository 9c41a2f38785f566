/**
 * The soak of issue 46: rounds of SIGTERM (a rolling restart) and SIGKILL mid-burst on a two-node cluster, with the
 * checker over the whole store after each round (test/cluster/Restarts.ts says what a round does and checks).
 *
 *   CORRAL_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
 *     npx tsx --conditions=corral-source scripts/bench/restarts.ts --rounds 50 --signal SIGTERM
 *
 * Options: `--rounds N` (default 50), `--signal SIGTERM|SIGKILL|both` (default SIGTERM; `both` alternates),
 * `--sessions N` (default 8), `--lock-ms N` (the shard lock's life, default 35000, Corral's default),
 * `--delay-ms N` (the demo model's think time, default 400). The victim alternates between the two nodes. Prints one
 * `ROUND <json>` line per round and a `RESULT <json>` summary; stops at the first round the checker fails (exit 1),
 * after printing what it found and the nodes' output. The summary counts node-postgres's warning for a client given a
 * query while it runs another in what the stopped nodes printed (run with NODE_OPTIONS=--trace-deprecation to see
 * where from).
 */
import { Config, Duration, Effect, Option } from "effect"
import * as Restarts from "../../test/cluster/Restarts.js"

const arg = (name: string, fallback: string) => {
  const at = process.argv.indexOf(`--${name}`)
  return at >= 0 && process.argv[at + 1] !== undefined ? process.argv[at + 1]! : fallback
}

const program = Effect.gen(function*() {
  const adminUrl = Option.getOrUndefined(yield* Config.option(Config.string("CORRAL_TEST_DATABASE_URL")))
  if (adminUrl === undefined) return yield* Effect.dieMessage("set CORRAL_TEST_DATABASE_URL (bash .ci/postgres.sh)")
  const rounds = Number(arg("rounds", "50"))
  const mode = arg("signal", "SIGTERM")
  const settings: Restarts.Settings = {
    sessions: Number(arg("sessions", "8")),
    lockExpirationMs: Number(arg("lock-ms", "35000")),
    demoDelayMs: Number(arg("delay-ms", "400"))
  }
  const r = yield* Restarts.rig(adminUrl, settings)
  const results: Array<Restarts.RoundResult> = []
  for (let n = 1; n <= rounds; n++) {
    const signal = mode === "both" ? (n % 2 === 0 ? "SIGKILL" : "SIGTERM") : mode as "SIGTERM" | "SIGKILL"
    const result = yield* Restarts.round(r, n, (n % 2) as 0 | 1, signal, {
      stopWithin: "30 seconds",
      settleWithin: Duration.millis(90_000 + 4 * settings.lockExpirationMs)
    })
    results.push(result)
    console.log(`ROUND ${JSON.stringify(result)}`)
    if (result.violations.length > 0 || (signal === "SIGTERM" && result.exitCode !== 0)) {
      console.log(r.logs.join("\n\n"))
      console.log(`RESULT ${JSON.stringify(summary(results, settings, r.logs))}`)
      return yield* Effect.sync(() => process.exit(1))
    }
  }
  const all = r.logs.join("\n")
  const warned = all.indexOf("already executing a query")
  if (warned >= 0) console.log(`FIRST pg client warning:\n${all.slice(Math.max(0, warned - 300), warned + 2_500)}`)
  console.log(`RESULT ${JSON.stringify(summary(results, settings, r.logs))}`)
})

const stats = (values: ReadonlyArray<number>) => {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b)
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN
  return { n: sorted.length, median: at(0.5), p95: at(0.95), max: sorted.at(-1) ?? Number.NaN }
}

const summary = (
  results: ReadonlyArray<Restarts.RoundResult>,
  settings: Restarts.Settings,
  logs: ReadonlyArray<string>
) => ({
  settings,
  rounds: results.length,
  // node-postgres's warning for a client given a query while it runs another, in what the stopped nodes printed.
  pgClientWarnings: logs.join("\n").split("already executing a query").length - 1,
  passed: results.filter((r) => r.violations.length === 0).length,
  bySignal: Object.fromEntries(["SIGTERM", "SIGKILL"].map((signal) => {
    const of = results.filter((r) => r.signal === signal)
    return [signal, {
      rounds: of.length,
      stopMs: stats(of.map((r) => r.stopMs)),
      takeoverMs: stats(of.map((r) => r.takeoverMs)),
      waitedMs: stats(of.flatMap((r) => r.waitedMs))
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
