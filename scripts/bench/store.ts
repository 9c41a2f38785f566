/**
 * `npm run bench:store` — the append path under many concurrent sessions (issue 4 §4).
 *
 * Each of `--sessions` sessions (default 1,000) appends `--turns` turns (default 50) one after another, as a session's
 * loop does (each append awaited before the next), all sessions at once, in two phases:
 * - `closed`: back to back, no pause. This is the store's ceiling in turns/s. Its latencies are queueing, not
 *   service time: with 1,000 appends always outstanding, mean latency = 1,000 / throughput (Little's law).
 * - `paced`: each session appends at its share of an offered rate `--rate` (default 10,000 turns/s, i.e. one turn
 *   per session every 100 ms, staggered), as real sessions do between model calls. This is the latency figure:
 *   p99 of due → committed and broadcast at that load (measured from the due time, so falling behind shows).
 * A turn is appended the way a session's loop appends it, `session/Transcript.append` (persist with the 10 s
 * persistence timeout, then broadcast), unless `--via store` asks for `SessionStore.appendTurn` alone.
 * The turn mix is the workload's (a user turn, then assistant turns with two tool calls alternating with
 * tool_results of two 1 KiB results), ~1.2 KB of JSON on average. Sessions are created, and warmed up with one
 * turn each, before any clock starts; sampled sessions are checked for gap-free numbering afterwards. Postgres runs
 * in a fresh database (created, then dropped) on the server at `CORRAL_BENCH_DATABASE_URL` (default
 * postgres://postgres@127.0.0.1:5432/postgres) and is skipped when unreachable; the embedded store runs in memory.
 * `--db none` runs the same sessions against a store whose append does nothing (it only numbers the turn): the
 * harness's own cost and latency floor on this machine, to read the others against.
 * Prints a table and one `RESULT {json}` line per database and phase.
 *
 *   npm run bench:store -- --db both|postgres|embedded|none --sessions 1000 --turns 50 --rate 10000 --lanes 1
 *     [--phases closed,paced] [--via transcript|store] [--windows] [--window-ms 0] [--max-batch 1000]
 */
import { SqlClient } from "@effect/sql"
import type { PgClient } from "@effect/sql-pg"
import { Config, Context, Duration, Effect, Fiber, Layer, Option, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { existsSync, readFileSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { parseArgs } from "node:util"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import type { TurnEntry } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope } from "../../src/domain/Scope.js"
import { initialState } from "../../src/domain/Session.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import * as Transcript from "../../src/session/Transcript.js"
import * as Database from "../../src/store/Database.js"
import * as Embedded from "../../src/store/Embedded.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"

const { values: args } = parseArgs({
  options: {
    db: { type: "string", default: "both" },
    sessions: { type: "string", default: "1000" },
    turns: { type: "string", default: "50" },
    lanes: { type: "string" },
    "window-ms": { type: "string", default: "0" },
    "max-batch": { type: "string", default: "1000" },
    rate: { type: "string", default: "10000" },
    phases: { type: "string", default: "closed,paced" },
    via: { type: "string", default: "transcript" },
    windows: { type: "boolean", default: false }
  }
})

const sessions = Number(args.sessions)
const turnsPerSession = Number(args.turns)
const windowMs = Number(args["window-ms"])
const maxBatch = Number(args["max-batch"])
const rate = Number(args.rate)
const phases = new Set(args.phases.split(","))

const FILL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
const echo = (q: string) => `echo:${q}|`.padEnd(1024, FILL)

/** Turn `n` (1-based) of session `sid`: the workload's shape. */
const entry = (sid: number, n: number): TurnEntry => {
  if (n === 1) return { kind: "user", text: `session:${sid}` }
  const t = Math.floor(n / 2)
  if (n % 2 === 0) {
    return {
      kind: "assistant",
      text: "",
      toolCalls: [1, 2].map((i) => ({ id: `call_${sid}_${t}_${i}`, name: "echo", arguments: `{"q":"${t}-${i}"}` })),
      finishReason: "tool_calls"
    }
  }
  return {
    kind: "tool_results",
    results: [1, 2].map((i) => ({
      callId: `call_${sid}_${t}_${i}`,
      name: "echo",
      content: echo(`${t}-${i}`),
      isError: false,
      status: "ok" as const
    }))
  }
}

const percentile = (sorted: Float64Array, p: number): number =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!

interface Result {
  readonly db: string
  /** `closed`: back-to-back appends (throughput ceiling); `paced`: appends at the offered rate (latency). */
  readonly phase: string
  /** What was called per turn: `transcript` (the session's append: persist, then broadcast) or `store`. */
  readonly via: string
  readonly offeredPerSec: number | null
  readonly sessions: number
  readonly turnsPerSession: number
  readonly turns: number
  readonly lanes: number
  readonly windowMs: number
  readonly seconds: number
  readonly turnsPerSec: number
  readonly p50Ms: number
  readonly p90Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  /** The machine's 1-minute load average when the phase ended, and its CPU count: the figures need both. */
  readonly loadAvg1m: number
  readonly cpus: number
  /** CPU of this process per turn, in microseconds (includes PGlite itself for the embedded store). */
  readonly clientCpuUsPerTurn: number
  /** CPU of the Postgres backends per turn, in microseconds; null when not measurable. */
  readonly serverCpuUsPerTurn: number | null
}

/** Sessions of this run, created (and warmed up with their first turn) before any clock starts. */
const prepare = Effect.gen(function*() {
  const store = yield* SessionStore
  const run = randomUUID().slice(0, 8)
  const ids = Array.from({ length: sessions }, (_, i) => SessionId.make(`ses_bench_${run}_${i}`))
  yield* Effect.forEach(ids, (id, i) =>
    store.createSession({
      id,
      principal: new Principal({ orgId: "org_bench", userId: "u1" }),
      scope: Scope.make(`bench:${i}`),
      agentId: AgentId.make("bench"),
      agentVersion: 1,
      createdAt: 0,
      updatedAt: 0,
      state: initialState
    }), { concurrency: 50, discard: true })
  // Warm-up: one turn per session (connections, plans, JIT), not timed.
  yield* Effect.forEach(ids, (id, i) => store.appendTurn(id, entry(i, 1), 0), {
    concurrency: "unbounded",
    discard: true
  })
  return ids
})

/** How long after the paced phase is set up its schedule starts (a margin for the first timer to be armed). */
const scheduleLead = 100

/**
 * How a turn is appended. `transcript` (default): `session/Transcript.append`, what a session's loop runs — the store's
 * append with the 10 s persistence timeout, uninterruptible, then the broadcast to live subscribers (none here).
 * `store`: `SessionStore.appendTurn` alone.
 */
const appender = Effect.gen(function*() {
  const store = yield* SessionStore
  if (args.via === "store") return (id: SessionId, e: TurnEntry, at: number) => store.appendTurn(id, e, at)
  if (args.via !== "transcript") return yield* Effect.dieMessage(`--via: expected transcript or store, got ${args.via}`)
  const ports = { store, events: yield* LiveEvents.make }
  return (id: SessionId, e: TurnEntry, at: number) => Transcript.append(ports, id, e, at, 10_000)
})

/** The closed phase: every session appends its `turnsPerSession` turns back to back (the store's ceiling). */
const driveClosed = (ids: ReadonlyArray<SessionId>, serverCpu: ServerCpu) =>
  Effect.gen(function*() {
    const append = yield* appender
    const latencies = new Float64Array(ids.length * turnsPerSession)
    let k = 0
    const serverBefore = yield* serverCpu
    const clientBefore = process.cpuUsage()
    const start = performance.now()
    yield* Effect.forEach(ids, (id, i) =>
      Effect.gen(function*() {
        for (let n = 2; n <= turnsPerSession + 1; n++) {
          const from = performance.now()
          yield* append(id, entry(i, n), n)
          latencies[k++] = performance.now() - from
        }
      }), { concurrency: "unbounded", discard: true })
    const seconds = (performance.now() - start) / 1e3
    const client = process.cpuUsage(clientBefore)
    const serverAfter = yield* serverCpu
    return {
      latencies: latencies.slice(0, k).sort(),
      seconds,
      clientCpuMs: (client.user + client.system) / 1e3,
      serverCpuMs: serverBefore === undefined || serverAfter === undefined
        ? null
        : serverAfter.total - serverBefore.total
    }
  })

/**
 * The paced phase: turn k of session i falls due at start + (i / sessions + k) * period, an offered rate of
 * sessions / period. Each session is one long-lived fiber, as a session actor is: it waits at its gate, appends the
 * turn that fell due, records the latency, and waits again. One timer walks the schedule and opens the gate of every
 * session with a turn due; a session still busy with its previous append finds the due turn waiting when it comes
 * back, as a session's mailbox would hold it. Latency is measured from the due time, so a store that falls behind
 * shows it in its percentiles.
 *
 * Why this shape: the load generator shares the process with the store, so what it costs is charged to the store.
 * A sleeping fiber per session (20,000 sleeps, wake-ups and clock reads) cost ~40 µs per turn of main-thread time at
 * 10,000 turns/s, and forking a fiber per append (the previous harness) made the garbage whose young-generation
 * collections were most of the p99 (docs/benchmarks.md, "Store"). The sessions' fibers and the turns' entries are
 * created, and a full collection run, before the clock starts, so what is measured is the append, not the setup.
 * `--windows` prints the worst latency in each 100 ms of the schedule.
 */
const drivePaced = (ids: ReadonlyArray<SessionId>, period: number, serverCpu: ServerCpu) =>
  Effect.gen(function*() {
    const append = yield* appender
    const count = ids.length
    const total = count * turnsPerSession
    const step = period / count
    const entries = ids.map((_, i) => Array.from({ length: turnsPerSession }, (_, k) => entry(i, k + 2)))
    const latencies = new Float64Array(total)
    const worst: Array<number> = []
    /** Due turns (schedule positions) of a session that was busy when they fell due, oldest first. */
    const held: Array<Array<number>> = ids.map(() => [])
    /** The gate of each session waiting for its next turn. */
    const gates: Array<((g: number) => void) | undefined> = ids.map(() => undefined)
    let start = 0
    let recorded = 0
    const due = (i: number) =>
      Effect.async<number>((resume) => {
        const g = held[i]!.shift()
        if (g !== undefined) return resume(Effect.succeed(g))
        gates[i] = (g) => {
          gates[i] = undefined
          resume(Effect.succeed(g))
        }
      })
    const session = (i: number) =>
      Effect.gen(function*() {
        for (let k = 0; k < turnsPerSession; k++) {
          const g = yield* due(i)
          yield* append(ids[i]!, entries[i]![k]!, k + 2)
          const latency = performance.now() - (start + g * step)
          latencies[recorded++] = latency
          const window = Math.floor((g * step) / 100)
          worst[window] = Math.max(worst[window] ?? 0, latency)
        }
      })
    const all = yield* Effect.fork(
      Effect.forEach(ids, (_, i) => session(i), { concurrency: "unbounded", discard: true })
    )
    while (gates.some((gate) => gate === undefined)) yield* Effect.sleep(Duration.millis(5))
    // The sessions and entries were just allocated: collect now, so they sit in the old generation before the clock.
    const gc = (globalThis as { gc?: () => void }).gc
    if (gc !== undefined) gc()
    const serverBefore = yield* serverCpu
    const clientBefore = process.cpuUsage()
    start = performance.now() + scheduleLead
    yield* Effect.sync(() => {
      let g = 0
      const tick = () => {
        for (const now = performance.now(); g < total && start + g * step <= now; g++) {
          const gate = gates[g % count]
          if (gate === undefined) held[g % count]!.push(g)
          else gate(g)
        }
        if (g < total) setTimeout(tick, Math.max(0, start + g * step - performance.now()))
      }
      setTimeout(tick, scheduleLead)
    })
    yield* Fiber.join(all)
    const seconds = (performance.now() - start) / 1e3
    const client = process.cpuUsage(clientBefore)
    const serverAfter = yield* serverCpu
    if (args.windows === true) console.log(`worst ms per 100 ms: ${worst.map((w) => w.toFixed(0)).join(" ")}`)
    return {
      latencies: latencies.sort(),
      seconds,
      clientCpuMs: (client.user + client.system) / 1e3,
      serverCpuMs: serverBefore === undefined || serverAfter === undefined
        ? null
        : serverAfter.total - serverBefore.total
    }
  })

/**
 * CPU time (ms) spent so far by the database's backends serving this run, read from /proc: a diagnostic that
 * separates client from server cost on a shared machine. `undefined` for the embedded store (it runs inside this
 * process, so its cost is in the client figure) or where /proc is not readable.
 */
type ServerCpu = Effect.Effect<{ readonly total: number } | undefined>

const postgresCpu = (sql: SqlClient.SqlClient): ServerCpu =>
  Effect.gen(function*() {
    const rows = yield* sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`.pipe(
      Effect.orElseSucceed(() => [])
    )
    if (rows.length === 0 || !existsSync("/proc/self/stat")) return undefined
    let ticks = 0
    for (const { pid } of rows) {
      try {
        const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? []
        ticks += Number(fields[11]) + Number(fields[12])
      } catch {
        return undefined
      }
    }
    return { total: ticks * 10 }
  })

/** Checks, after the clocks stopped, that sampled sessions hold their turns numbered 1..n without gaps. */
const check = (ids: ReadonlyArray<SessionId>, expected: number) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    for (const id of [ids[0]!, ids[Math.floor(ids.length / 2)]!, ids[ids.length - 1]!]) {
      const stored = yield* store.turns("org_bench", id)
      if (stored.length !== expected || !stored.every((t, i) => t.seq === i + 1)) {
        return yield* Effect.dieMessage(`session ${id} holds ${stored.length} turns, not 1..${expected}`)
      }
    }
  })

/** Both phases on one database: the closed-loop ceiling, then the offered rate. */
/**
 * The harness's floor: the memory store for sessions, but an append that only numbers the turn (nothing is kept, so
 * the store adds neither work nor garbage); the gap-free check is skipped for it.
 */
const noStore = Layer.effect(
  SessionStore,
  Effect.map(MemoryStore.makeMemory, (store) => {
    const last = new Map<string, number>()
    return {
      ...store,
      appendTurn: (sessionId, entry, at) =>
        Effect.sync(() => {
          const seq = (last.get(sessionId) ?? 0) + 1
          last.set(sessionId, seq)
          return { sessionId, seq, at, entry }
        })
    }
  })
)

const measure = (db: "postgres" | "embedded" | "none", lanes: number, serverCpu: ServerCpu) =>
  Effect.gen(function*() {
    const results: Array<Result> = []
    const report = (
      phase: string,
      offered: number | undefined,
      run: { latencies: Float64Array; seconds: number; clientCpuMs: number; serverCpuMs: number | null }
    ) =>
      results.push({
        db,
        phase,
        via: args.via,
        offeredPerSec: offered ?? null,
        sessions,
        turnsPerSession,
        turns: run.latencies.length,
        lanes,
        windowMs,
        seconds: round(run.seconds, 3),
        turnsPerSec: Math.round(run.latencies.length / run.seconds),
        p50Ms: round(percentile(run.latencies, 50), 2),
        p90Ms: round(percentile(run.latencies, 90), 2),
        p99Ms: round(percentile(run.latencies, 99), 2),
        maxMs: round(run.latencies[run.latencies.length - 1] ?? 0, 2),
        loadAvg1m: round(loadavg()[0] ?? 0, 2),
        cpus: cpus().length,
        clientCpuUsPerTurn: Math.round((run.clientCpuMs * 1e3) / run.latencies.length),
        serverCpuUsPerTurn: run.serverCpuMs === null ? null : Math.round((run.serverCpuMs * 1e3) / run.latencies.length)
      })
    if (phases.has("closed")) {
      const closed = yield* prepare
      report("closed", undefined, yield* driveClosed(closed, serverCpu))
      if (db !== "none") yield* check(closed, turnsPerSession + 1)
    }
    if (phases.has("paced") && rate > 0) {
      const paced = yield* prepare
      report("paced", rate, yield* drivePaced(paced, (sessions / rate) * 1000, serverCpu))
      if (db !== "none") yield* check(paced, turnsPerSession + 1)
    }
    return results
  })

const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits

const storeOn = (client: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, unknown>, lanes: number) =>
  SqlStore.layer({
    lanes,
    maxBatch,
    ...(windowMs > 0 ? { window: Duration.millis(windowMs) } : {})
  }).pipe(Layer.provideMerge(client))

/** A fresh database on the bench server, dropped afterwards; fails when the server is unreachable. */
const freshPostgres = (adminUrl: string) =>
  Layer.unwrapScoped(Effect.gen(function*() {
    const admin = Context.get(
      yield* Layer.build(Database.layerPostgres(Redacted.make(adminUrl), { maxConnections: 1 })),
      SqlClient.SqlClient
    )
    const name = `corral_bench_${randomUUID().replaceAll("-", "").slice(0, 12)}`
    yield* admin`CREATE DATABASE ${admin(name)}`
    yield* Effect.addFinalizer(() => admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`.pipe(Effect.ignore))
    const url = new URL(adminUrl)
    url.pathname = `/${name}`
    return Database.layerPostgres(Redacted.make(url.toString()), { maxConnections: 10 })
  }))

const program = Effect.gen(function*() {
  const adminUrl = Option.getOrElse(
    yield* Config.option(Config.string("CORRAL_BENCH_DATABASE_URL")),
    () => "postgres://postgres@127.0.0.1:5432/postgres"
  )
  const results: Array<Result> = []
  if (args.db === "postgres" || args.db === "both") {
    const lanes = args.lanes === undefined ? 1 : Number(args.lanes)
    const outcome = yield* Effect.flatMap(SqlClient.SqlClient, (sql) => measure("postgres", lanes, postgresCpu(sql)))
      .pipe(
        Effect.provide(storeOn(freshPostgres(adminUrl), lanes)),
        Effect.either
      )
    if (outcome._tag === "Right") results.push(...outcome.right)
    else console.log(`postgres: skipped (${String(outcome.left)})`)
  }
  if (args.db === "embedded" || args.db === "both") {
    const lanes = args.lanes === undefined ? 1 : Number(args.lanes)
    results.push(
      ...yield* measure("embedded", lanes, Effect.succeed(undefined)).pipe(
        Effect.provide(storeOn(Embedded.layerEmbedded(), lanes))
      )
    )
  }
  if (args.db === "none") {
    results.push(...yield* measure("none", 1, Effect.succeed(undefined)).pipe(Effect.provide(noStore)))
  }

  const header = [
    "db",
    "phase",
    "offered/s",
    "sessions",
    "turns",
    "lanes",
    "seconds",
    "turns/s",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "max ms",
    "client µs/turn",
    "server µs/turn"
  ]
  const rows = results.map((r) => [
    r.db,
    r.phase,
    r.offeredPerSec === null ? "-" : String(r.offeredPerSec),
    String(r.sessions),
    String(r.turns),
    String(r.lanes),
    r.seconds.toFixed(2),
    String(r.turnsPerSec),
    r.p50Ms.toFixed(2),
    r.p90Ms.toFixed(2),
    r.p99Ms.toFixed(2),
    r.maxMs.toFixed(2),
    String(r.clientCpuUsPerTurn),
    r.serverCpuUsPerTurn === null ? "-" : String(r.serverCpuUsPerTurn)
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)))
  const line = (cells: ReadonlyArray<string>) => cells.map((c, i) => c.padStart(widths[i]!)).join("  ")
  console.log(line(header))
  for (const row of rows) console.log(line(row))
  console.log(`machine: ${cpus().length} CPUs, load average ${loadavg().map((x) => x.toFixed(2)).join(" ")}`)
  for (const r of results) console.log(`RESULT ${JSON.stringify({ bench: "store", ...r })}`)
})

Effect.runPromise(program).catch((error: unknown) => {
  console.error(error)
  process.exitCode = 1
})
