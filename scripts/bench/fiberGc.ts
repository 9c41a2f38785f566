/**
 * `node --expose-gc --max-semi-space-size=64 [--trace-gc-nvp] --import tsx scripts/bench/fiberGc.ts
 *   [raw|effect|groupcommit|session]` — a reproducer for the tail of `bench:store`'s paced phase, with no database.
 *
 * 1,000 sessions × 20 turns at 10,000 turns/s offered, driven by one timer; each turn is an operation that completes
 * 2 ms later (a stand-in for a batch round trip). `raw`: a plain Promise per turn. `effect`: the same wait as
 * `Effect.promise`, run as a fiber forked for the turn (what every append was when the paced harness forked one per
 * append, and what `Transcript.append` forked before the store took over its timeout). `groupcommit`: the turn's JSON
 * through `internal/groupCommit` with a 2 ms write, a fiber forked per turn. `session`: one long-lived fiber per
 * session (as a session actor is) that waits at a gate the timer opens and then submits through the group commit:
 * the shape `bench:store` has now. Prints p50/p99 of due → done; read it with the GC trace's `pause` and
 * `new_space_survived` (docs/benchmarks.md, "Store").
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
  const total = sessions * turns
  const latencies = new Float64Array(total)
  const inFlight = new Uint8Array(sessions)
  const held: Array<Array<number>> = Array.from({ length: sessions }, () => [])
  const gates: Array<((g: number) => void) | undefined> = Array.from({ length: sessions }, () => undefined)
  const step = period / sessions
  let start = 0
  let recorded = 0
  let finish = () => {}
  const worst: Array<number> = []
  const record = (g: number, i: number) => {
    const latency = performance.now() - (start + g * step)
    latencies[recorded++] = latency
    const window = Math.floor((g * step) / 100)
    worst[window] = Math.max(worst[window] ?? 0, latency)
    inFlight[i] = 0
    if (recorded === total) finish()
  }
  if (mode === "session") {
    const session = (i: number) =>
      Effect.gen(function*() {
        for (let k = 0; k < turns; k++) {
          const g = yield* Effect.async<number>((resume) => {
            const due = held[i]!.shift()
            if (due !== undefined) return resume(Effect.succeed(due))
            gates[i] = (g) => {
              gates[i] = undefined
              resume(Effect.succeed(g))
            }
          })
          yield* submit(JSON.stringify(entries[i]![k]))
          record(g, i)
        }
      })
    for (let i = 0; i < sessions; i++) yield* Effect.forkDaemon(session(i))
    yield* Effect.yieldNow()
  }
  if (gc !== undefined) gc()
  start = performance.now() + 100
  yield* Effect.async<void>((resume) => {
    finish = () => resume(Effect.void)
    const begin = (g: number) => {
      const i = g % sessions
      inFlight[i] = 1
      const done = () => {
        record(g, i)
        const next = held[i]!.shift()
        if (next !== undefined) begin(next)
      }
      if (mode === "session") {
        const gate = gates[i]
        return gate === undefined ? held[i]!.push(g) : gate(g)
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
  console.log(
    `${mode}: p50 ${at(0.5)} ms, p99 ${at(0.99)} ms; worst per 100 ms: ${worst.map((w) => w.toFixed(0)).join(" ")}`
  )
}))

Effect.runPromise(program)
