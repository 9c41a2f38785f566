/**
 * The shared half of the workload programs (../shared/bench/WORKLOAD.md): the constants, the echo body, the fake
 * model's arithmetic, and the procedures of scenarios A, B and C with their checks and the `RESULT` line.
 *
 * `workload.ts` (Corral) and `floor.ts` (a hand-written loop) each supply a `Driver` — how to run one session, how
 * to run a burst of them, how to read a finished session back — and hand it to `main`. Because both programs run
 * the SAME procedure code (warm-up rule, GC, batch sizes, clock, checks), their figures differ only by what the
 * drivers do, which is the point of taking ratios. Checks always run after the timed region: the timed region
 * only stores what each session returned.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"

/** Tool-calling model turns per session. */
export const T = 10
/** Parallel tool calls per tool turn. */
export const K = 2
/** Model turns per session: T tool turns plus the final answer. */
export const TURNS = T + 1
/** Tool calls per session. */
export const TOOL_CALLS = T * K
/** Characters in every tool result. */
export const ECHO_LEN = 1024
/** The padding alphabet. */
export const FILL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
/** Tokens the fake model reports per reply, where an interface carries usage. */
export const USAGE = { input: 10, output: 5 } as const

/** The echo tool's body: `echo:<q>|` right-padded with FILL to exactly 1024 characters. */
export const echo = (q: string): string => `echo:${q}|`.padEnd(ECHO_LEN, FILL)

// The 20 valid results do not depend on the session, so the model compares against constants (not per-session
// state): index (t - 1) * K + (i - 1).
const validResults: ReadonlyArray<string> = Array.from(
  { length: T * K },
  (_, n) => echo(`${1 + Math.floor(n / K)}-${1 + (n % K)}`)
)

/** The tool call id of call `i` of turn `t` in session `sid`: unique across all sessions. */
export const callId = (sid: string, t: number, i: number): string => `call_${sid}_${t}_${i}`

/** The argument JSON of call `i` of turn `t`. */
export const callArguments = (t: number, i: number): string => `{"q":"${t}-${i}"}`

/** The final answer the model gives after counting `v` valid results. */
export const finalText = (sid: string | number, v: number): string => `final:${sid}:${v}`

/** The `sid` of a conversation whose first user text is `session:<sid>`, or `undefined`. */
export const sessionIdOf = (firstUserText: string | undefined): string | undefined =>
  firstUserText !== undefined && firstUserText.startsWith("session:") ? firstUserText.slice(8) : undefined

/**
 * Counts valid results (§3.4): feed every tool result of the conversation to `add`; `count` is the number of
 * distinct ids `call_<sid>_<t>_<i>` whose content is exactly `echo("<t>-<i>")`.
 */
export const validCounter = (sid: string) => {
  const prefix = `call_${sid}_`
  let seen = 0
  return {
    add: (id: string, content: string): void => {
      if (!id.startsWith(prefix)) return
      const rest = id.slice(prefix.length)
      const cut = rest.indexOf("_")
      if (cut <= 0) return
      const t = Number(rest.slice(0, cut))
      const i = Number(rest.slice(cut + 1))
      if (!Number.isInteger(t) || !Number.isInteger(i) || t < 1 || t > T || i < 1 || i > K) return
      const n = (t - 1) * K + (i - 1)
      if (content === validResults[n]) seen |= 1 << n
    },
    count: (): number => {
      let v = 0
      for (let bits = seen; bits !== 0; bits &= bits - 1) v++
      return v
    }
  }
}

/** A copy of `s` in its own flat heap storage (§8), so sessions share no string storage. */
export const fresh = (s: string): string => JSON.parse(JSON.stringify(s)) as string

/** Scenario C: the text of message `j` (0..19) of session `sid`; user for even `j`, assistant for odd. */
export const historyText = (sid: number | string, j: number): string =>
  j % 2 === 0 ? `u:${sid}:${j}|`.padEnd(128, FILL) : `a:${sid}:${j}|`.padEnd(1024, FILL)

/** Scenario C: messages per held session. */
export const HISTORY = 20

/** One held message as read back (scenario C check). */
export interface HeldMessage {
  readonly role: "user" | "assistant"
  readonly text: string
}

/**
 * What a program under test provides. `S` is what one finished session returns (stored during timing), `H` a
 * handle on a held session of scenario C.
 */
export interface Driver<S, H> {
  readonly framework: string
  readonly versions: Readonly<Record<string, string>>
  readonly notes: string
  /** The fake model's call counter (§3.6). */
  readonly modelCalls: () => number
  /** The echo tool's call counter (§4). */
  readonly toolCalls: () => number
  /** Runs one session of §2 to its end. */
  readonly session: (sid: number) => Promise<S>
  /** Starts every session at once and resolves when all have ended (scenario B). */
  readonly burst: (sids: ReadonlyArray<number>) => Promise<ReadonlyArray<S>>
  /** The final assistant text of a finished session, read after the timed region; plus any runtime-own check. */
  readonly inspect: (session: S) => Promise<{ readonly finalText: string; readonly problem?: string }>
  /** Scenario C; `undefined` when the runtime holds no live session (reported as skipped). */
  readonly held?: {
    /** What is held per session and by whom, for the `what` field. */
    readonly what: string
    /** Creates session `sid` holding the 20 messages of §8. */
    readonly create: (sid: number) => Promise<H>
    /** Reads a held session back through the runtime's API. */
    readonly read: (handle: H) => Promise<ReadonlyArray<HeldMessage>>
    /** Called after the last session is created and before the final GC (e.g. to wait for passivation). */
    readonly settle?: () => Promise<Record<string, unknown>>
  }
  /**
   * Scenario A: work the runtime still owes for the sessions it ran (Corral with telemetry on: exporting the spans
   * they made). Called before each timed batch, untimed, and at its end inside the timed region, so a batch pays
   * for everything it caused, also what a runtime would otherwise do after the measurement.
   */
  readonly drain?: () => Promise<void>
  /** Releases the runtime. */
  readonly close: () => Promise<void>
}

/** Command-line options common to both programs. */
export interface Options {
  readonly scenario: "A" | "B" | "C"
  readonly quick: boolean
  /** Batch size (A), burst size (B) or held sessions (C). */
  readonly sessions: number
  /** Warm-up sessions (A: minimum, B: exact). */
  readonly warmup: number
  readonly flags: ReadonlyMap<string, string>
}

/** Parses `--scenario A|B|C [--quick --sessions N --warmup N] [--name value ...]`; exits 2 on a bad argument. */
export const parseArgs = (argv: ReadonlyArray<string>): Options => {
  const flags = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    if (!arg.startsWith("--")) usage(`unexpected argument "${arg}"`)
    const next = argv[i + 1]
    if (next === undefined || next.startsWith("--")) flags.set(arg.slice(2), "true")
    else {
      flags.set(arg.slice(2), next)
      i++
    }
  }
  const raw = flags.get("scenario") ?? "A"
  const scenario = raw === "A" || raw === "B" || raw === "C" ? raw : usage(`--scenario must be A, B or C, not "${raw}"`)
  const quick = flags.get("quick") === "true"
  const count = (name: string, fallback: number): number => {
    const raw = flags.get(name)
    if (raw === undefined) return fallback
    const n = Number(raw)
    if (!Number.isInteger(n) || n < 1) usage(`--${name} must be a positive integer, not "${raw}"`)
    return n
  }
  const full = scenario === "A" ? 200 : scenario === "B" ? 1000 : 10_000
  const quickSize = scenario === "A" ? 20 : scenario === "B" ? 50 : 100
  return {
    scenario,
    quick,
    sessions: count("sessions", quick ? quickSize : full),
    warmup: count("warmup", quick ? 5 : scenario === "A" ? 50 : scenario === "B" ? 20 : 10),
    flags
  }
}

const usage = (problem: string): never => {
  process.stderr.write(`${problem}\nusage: --scenario A|B|C [--quick --sessions N --warmup N]\n`)
  process.exit(2)
}

/** A full collection, four times over (§6.2); works with or without `--expose-gc`. */
export const fullGc: () => void = (() => {
  let gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) {
    setFlagsFromString("--expose-gc")
    gc = runInNewContext("gc") as () => void
  }
  const collect = gc
  return () => {
    for (let i = 0; i < 4; i++) collect()
  }
})()

const nowNs = (): bigint => process.hrtime.bigint()
const microsSince = (start: bigint): number => Number(nowNs() - start) / 1_000

const median = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** A failed check: the program reports it on stderr and exits 1 (§5: the run is FAILED). */
class CheckFailed extends Error {}

const expectFinal = async <S, H>(driver: Driver<S, H>, sid: number, session: S): Promise<void> => {
  const seen = await driver.inspect(session)
  if (seen.finalText !== finalText(sid, TOOL_CALLS)) {
    throw new CheckFailed(`session ${sid}: final text "${seen.finalText}", expected "${finalText(sid, TOOL_CALLS)}"`)
  }
  if (seen.problem !== undefined) throw new CheckFailed(`session ${sid}: ${seen.problem}`)
}

const expectGrowth = (what: string, counter: string, grew: number, expected: number): void => {
  if (grew !== expected) throw new CheckFailed(`${what}: the ${counter} counter grew by ${grew}, expected ${expected}`)
}

/** One checked session outside the timed region (warm-ups). */
const checkedSession = async <S, H>(driver: Driver<S, H>, sid: number): Promise<void> => {
  const m = driver.modelCalls()
  const t = driver.toolCalls()
  const session = await driver.session(sid)
  expectGrowth(`session ${sid}`, "model", driver.modelCalls() - m, TURNS)
  expectGrowth(`session ${sid}`, "tool", driver.toolCalls() - t, TOOL_CALLS)
  await expectFinal(driver, sid, session)
}

/** Scenario A (§6): sequential sessions, timed in batches. */
const scenarioA = async <S, H>(driver: Driver<S, H>, options: Options): Promise<Record<string, unknown>> => {
  let sid = 0
  // Warm-up: at least `warmup` sessions AND 300 ms (quick mode: exactly `warmup` sessions), at most 20,000.
  const minWarmMs = options.quick ? 0 : 300
  const warmStart = nowNs()
  while (sid < 20_000 && (sid < options.warmup || microsSince(warmStart) < minWarmMs * 1_000)) {
    await checkedSession(driver, sid++)
  }
  const warmupSessions = sid

  const size = options.sessions
  const minTimedUs = options.quick ? 0 : 1_000_000
  const maxBatches = options.quick ? 1 : 50
  const batchUs: Array<number> = []
  // Diagnostic: CPU time of the process per batch. On a machine shared with other work, wall time includes the
  // time this process waited for a core; CPU time does not.
  const batchCpuUs: Array<number> = []
  let timedUs = 0
  while (batchUs.length < maxBatches && (batchUs.length < 1 || timedUs < minTimedUs)) {
    const first = sid
    const results: Array<S> = new Array(size)
    const models = new Float64Array(size + 1)
    const tools = new Float64Array(size + 1)
    await driver.drain?.()
    fullGc()
    models[0] = driver.modelCalls()
    tools[0] = driver.toolCalls()
    const cpu = process.cpuUsage()
    const start = nowNs()
    for (let n = 0; n < size; n++) {
      results[n] = await driver.session(sid++)
      models[n + 1] = driver.modelCalls()
      tools[n + 1] = driver.toolCalls()
    }
    await driver.drain?.()
    const us = microsSince(start)
    const spent = process.cpuUsage(cpu)
    batchUs.push(us)
    batchCpuUs.push(spent.user + spent.system)
    timedUs += us
    for (let n = 0; n < size; n++) {
      expectGrowth(`session ${first + n}`, "model", models[n + 1]! - models[n]!, TURNS)
      expectGrowth(`session ${first + n}`, "tool", tools[n + 1]! - tools[n]!, TOOL_CALLS)
      await expectFinal(driver, first + n, results[n]!)
    }
  }
  const perTurn = batchUs.map((us) => us / (size * TURNS))
  return {
    batch_us_per_turn: perTurn,
    batch_us_per_tool_call: batchUs.map((us) => us / (size * TOOL_CALLS)),
    us_per_turn: median(perTurn),
    us_per_session: median(batchUs) / size,
    batch_cpu_us_per_turn: batchCpuUs.map((us) => us / (size * TURNS)),
    cpu_us_per_turn: median(batchCpuUs) / (size * TURNS),
    batches: batchUs.length,
    batch_sessions: size,
    warmup_sessions: warmupSessions
  }
}

/** Scenario B (§7): a burst of concurrent sessions. */
const scenarioB = async <S, H>(driver: Driver<S, H>, options: Options): Promise<Record<string, unknown>> => {
  const size = options.sessions
  for (let n = 0; n < options.warmup; n++) await checkedSession(driver, size + n)
  fullGc()
  const rssBefore = process.memoryUsage.rss()
  let sampledPeak = rssBefore
  let ticks = 0
  const sampler = setInterval(() => {
    ticks++
    const rss = process.memoryUsage.rss()
    if (rss > sampledPeak) sampledPeak = rss
  }, 5)
  const sids = Array.from({ length: size }, (_, n) => n)
  const m0 = driver.modelCalls()
  const t0 = driver.toolCalls()
  const start = nowNs()
  const results = await driver.burst(sids)
  const wallMs = microsSince(start) / 1_000
  clearInterval(sampler)
  const maxRssKb = process.resourceUsage().maxRSS
  expectGrowth("the burst", "model", driver.modelCalls() - m0, size * TURNS)
  expectGrowth("the burst", "tool", driver.toolCalls() - t0, size * TOOL_CALLS)
  if (results.length !== size) throw new CheckFailed(`the burst returned ${results.length} sessions, not ${size}`)
  for (let n = 0; n < size; n++) await expectFinal(driver, n, results[n]!)
  const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10
  return {
    wall_ms: wallMs,
    turns_per_sec: (size * TURNS) / (wallMs / 1_000),
    peak_rss_mb: Math.round((maxRssKb / 1024) * 10) / 10,
    sessions: size,
    rss_before_mb: mb(rssBefore),
    sampled_peak_rss_mb: mb(sampledPeak),
    sampler_ticks: ticks
  }
}

/** Scenario C (§8): bytes per live session holding 20 messages. */
const scenarioC = async <S, H>(driver: Driver<S, H>, options: Options): Promise<Record<string, unknown>> => {
  const held = driver.held
  if (held === undefined) return { skipped: "the runtime holds no live session object" }
  const size = options.sessions
  // Warm-up sessions get sids after the measured ones, so sessions 0..size-1 are exactly the measured ones.
  for (let n = 0; n < options.warmup; n++) await held.create(1_000_000 + n)
  fullGc()
  const m0 = process.memoryUsage()
  const handles: Array<H> = new Array(size)
  const start = nowNs()
  for (let sid = 0; sid < size; sid++) handles[sid] = await held.create(sid)
  const createMs = microsSince(start) / 1_000
  const settled = held.settle === undefined ? {} : await held.settle()
  fullGc()
  const m1 = process.memoryUsage()
  for (const sid of [0, Math.floor(size / 2), size - 1]) {
    const messages = await held.read(handles[sid]!)
    if (messages.length !== HISTORY) {
      throw new CheckFailed(`held session ${sid} reads back ${messages.length} messages, expected ${HISTORY}`)
    }
    messages.forEach((message, j) => {
      const role = j % 2 === 0 ? "user" : "assistant"
      if (message.role !== role || message.text !== historyText(sid, j)) {
        throw new CheckFailed(`held session ${sid}: message ${j} is not the ${role} text of §8`)
      }
    })
  }
  const heap = m1.heapUsed - m0.heapUsed
  const external = m1.external - m0.external
  return {
    bytes_per_session: (heap + external) / size,
    heap_bytes_per_session: heap / size,
    external_bytes_per_session: external / size,
    sessions: size,
    create_ms: createMs,
    what: held.what,
    ...settled
  }
}

/**
 * Runs the scenario of `argv` with `driver`, prints one `RESULT <json>` line and exits 0; on a failed check or any
 * error, reports on stderr and exits 1.
 */
export const main = async <S, H>(makeDriver: (options: Options) => Promise<Driver<S, H>>): Promise<void> => {
  const options = parseArgs(process.argv.slice(2))
  try {
    const driver = await makeDriver(options)
    const measured = options.scenario === "A"
      ? await scenarioA(driver, options)
      : options.scenario === "B"
      ? await scenarioB(driver, options)
      : await scenarioC(driver, options)
    await driver.close()
    const result = {
      framework: driver.framework,
      scenario: options.scenario,
      versions: driver.versions,
      notes: driver.notes,
      quick: options.quick,
      node: process.version,
      checks: "passed",
      ...measured
    }
    process.stdout.write(`RESULT ${JSON.stringify(result)}\n`)
    process.exit(0)
  } catch (error) {
    const label = error instanceof CheckFailed ? "CHECK FAILED" : "ERROR"
    process.stderr.write(`${label}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  }
}
