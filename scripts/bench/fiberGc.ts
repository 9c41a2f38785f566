/**
 * `node --expose-gc --trace-gc-nvp --import tsx scripts/bench/fiberGc.ts [raw|effect|groupcommit]` — a reproducer
 * for the tail of `bench:store`'s paced phase, with no database.
 *
 * 1,000 sessions × 20 turns at 10,000 turns/s offered, driven by one timer exactly as the paced phase is; each turn
 * is an operation that completes 2 ms later (a stand-in for a batch round trip). `raw`: a plain Promise per turn.
 * `effect`: the same wait as `Effect.promise`, run as its own fiber (what every append is). `groupcommit`: the turn's
 * JSON through `internal/groupCommit` with a 2 ms write. Prints p50/p99 of due → done; read it with the GC trace's
 * `pause` and `new_space_survived` (docs/benchmarks.md, "Store").
 */
import { Effect, Exit } from "effect"
import * as GroupCommit from "../../src/store/internal/groupCommit.js"

const mode = process.argv[2] ?? "effect"
const sessions = 1_000
const turns = 20
const period = 100
const FILL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
const later = <A>(value: A) => new Promise<A>((resolve) => setTimeout(() => resolve(value), 2))

const program = Effect.scoped(Effect.gen(function*() {
  const submit = yield* GroupCommit.make<string, number, string>({
    lanes: 1,
    maxItems: 1_000,
    maxWeight: 8_000_000,
    key: () => "",
    weight: (payload) => payload.length,
    write: (batch) => Effect.promise(() => later(batch.map((_, i) => Exit.succeed(i)))),
    closed: () => "closed",
    timedOut: () => "timed out"
  })
  const entries = Array.from({ length: sessions }, (_, i) =>
    Array.from({ length: turns }, (_, k) => ({
      results: [1, 2].map((j) => ({ callId: `c${i}_${k}_${j}`, content: `echo:${k}-${j}|`.padEnd(1024, FILL) }))
    })))
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc !== undefined) gc()
  const total = sessions * turns
  const latencies = new Float64Array(total)
  const inFlight = new Uint8Array(sessions)
  const held: Array<Array<number>> = Array.from({ length: sessions }, () => [])
  const start = performance.now() + 100
  const step = period / sessions
  let recorded = 0
  yield* Effect.async<void>((resume) => {
    const begin = (g: number) => {
      const i = g % sessions
      const due = start + g * step
      inFlight[i] = 1
      const done = () => {
        latencies[recorded++] = performance.now() - due
        inFlight[i] = 0
        const next = held[i]!.shift()
        if (next !== undefined) begin(next)
        if (recorded === total) resume(Effect.void)
      }
      if (mode === "raw") void later(1).then(done)
      else if (mode === "effect") Effect.runCallback(Effect.promise(() => later(1)), { onExit: done })
      else Effect.runCallback(submit(JSON.stringify(entries[i]![Math.floor(g / sessions)])), { onExit: done })
    }
    let g = 0
    const tick = () => {
      for (const now = performance.now(); g < total && start + g * step <= now; g++) {
        if (inFlight[g % sessions] === 1) held[g % sessions]!.push(g)
        else begin(g)
      }
      if (g < total) setTimeout(tick, Math.max(0, start + g * step - performance.now()))
    }
    setTimeout(tick, 100)
  })
  latencies.sort()
  const at = (p: number) => latencies[Math.min(total - 1, Math.ceil(p * total) - 1)]!.toFixed(2)
  console.log(`${mode}: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`)
}))

Effect.runPromise(program)
