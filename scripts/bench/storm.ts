/**
 * `npm run bench:storm` — a rate-limit storm over real HTTP (issue 13 §3): `--sessions` sessions (default 200) start
 * at once against the fake OpenAI-compatible provider (test/support/FakeProvider.ts, a real server on 127.0.0.1),
 * whose first `--throttled` requests (default 400) are answered 429 with `Retry-After: --retry-after` seconds
 * (default 2); every later request gets the demo conversation. Each session is one burst of the loop
 * (`Harness.runBurst`: a model call, then the finalize call) through the OpenAI-compatible adapter wrapped in a
 * `StormGuard`, exactly as `ProviderConfig.layer` wires a configured provider.
 *
 * Reports, per run: whether every session completed (and the exit reasons otherwise); the wall time from the first
 * session's start to the last landing (target ≤ 15 s); the most requests the provider received in any 10 ms window,
 * over the whole run and after the first wave — the requests of the first half of the first Retry-After, sent
 * before anyone could know of the storm (target ≤ 5); the provider requests against the fewest possible —
 * every throttled request plus the 2xx replies the sessions need, 2 per session (target ≤ 1.3×); how long after its
 * own Retry-After ended each throttled session's next request arrived (p50, p99, max); and the longest event-loop
 * stall of this process (a stalled loop fires every due timer at once, whatever the plan).
 *
 * The fake runs in a child process (this script with `--fake`), so its arrival times are its own: in this process
 * a stalled event loop would hold requests already on the wire and record them together. `--in-process` keeps it
 * here (the test suite's small case does).
 *
 * Before the measured runs, a small storm of `--warmup` sessions (default 20; 0 = none) loads the modules used on
 * first use and warms the JIT, which otherwise stall the first storm's event loop for hundreds of ms.
 *
 * `--storm-ms T` throttles by time instead of by count: every request arriving within T ms of the first gets the
 * 429, so a provider that recovers when it said it would (T = the Retry-After) shows how close to its own
 * Retry-After each session comes back.
 *
 *   npm run bench:storm -- [--sessions 200] [--throttled 400] [--retry-after 2] [--runs 1] [--unguarded]
 *     [--in-process] [--warmup 20] [--storm-ms T]
 *
 * Prints a summary per run and one `RESULT {json}` line per run. `storm` is exported for the test suite's small case.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { Effect } from "effect"
import { type ChildProcess, spawn } from "node:child_process"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { createInterface } from "node:readline"
import { fileURLToPath, pathToFileURL } from "node:url"
import { parseArgs } from "node:util"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as StormGuard from "../../src/model/StormGuard.js"
import * as Harness from "../../src/testing/Harness.js"
import * as Fake from "../../test/support/FakeProvider.js"

/** What one storm is made of. */
export interface StormOptions {
  readonly sessions: number
  /** The first this many requests are answered 429. */
  readonly throttled: number
  /**
   * Throttle by time instead: every request arriving within this many ms of the first is answered 429 (the
   * provider recovers when its first Retry-After says); `throttled` is then ignored.
   */
  readonly stormMs?: number
  readonly retryAfterSeconds: number
  /** Without the guard: the adapter alone (for comparison). */
  readonly unguarded?: boolean
  readonly guard?: StormGuard.Options
  /**
   * Run the fake provider in a child process, so its arrival times are not bunched by this process's event loop
   * (a stall here would hold requests already on the wire and record them together). Default: in this process.
   */
  readonly fakeProcess?: boolean
}

/** One request as the fake provider received it: its number, arrival time (ms, the fake's clock), session. */
interface Arrival {
  readonly n: number
  readonly at: number
  readonly session: string
  readonly throttled: boolean
}

interface RunningFake {
  readonly openAiBaseUrl: string
  readonly requests: () => ReadonlyArray<Arrival>
}

// The storm's script: the first `throttled` requests (or every request of the first `stormMs`) get 429 +
// Retry-After, every later one the demo conversation.
const script = (options: Pick<StormOptions, "throttled" | "retryAfterSeconds" | "stormMs">) => {
  let first: number | undefined
  return (req: Fake.RecordedRequest): { readonly throttled: boolean; readonly behaviour: Fake.Behaviour } => {
    first ??= req.at
    const throttled = options.stormMs !== undefined ? req.at - first < options.stormMs : req.n <= options.throttled
    return {
      throttled,
      behaviour: throttled ? Fake.rateLimited({ seconds: options.retryAfterSeconds }) : Fake.demo(req)
    }
  }
}

const fakeInProcess = (options: StormOptions) => {
  const decide = script(options)
  const throttled = new Set<number>()
  return Effect.map(
    Fake.make({
      fallback: (req) => {
        const decision = decide(req)
        if (decision.throttled) throttled.add(req.n)
        return decision.behaviour
      }
    }),
    (fake): RunningFake => ({
      openAiBaseUrl: fake.openAiBaseUrl,
      requests: () =>
        fake.requests.map((req) => ({
          n: req.n,
          at: req.at,
          session: sessionOf(req.body),
          throttled: throttled.has(req.n)
        }))
    })
  )
}

// This script with `--fake`: serves the storm's script and prints `FAKE <url>`, then
// `REQ <n> <at> <session> <429|200>` per request as it arrives.
const fakeProcess = (options: StormOptions) =>
  Effect.acquireRelease(
    Effect.async<{ readonly child: ChildProcess; readonly fake: RunningFake }>((resume) => {
      const child = spawn(process.execPath, [
        ...process.execArgv,
        fileURLToPath(import.meta.url),
        "--fake",
        "--throttled",
        String(options.throttled),
        "--retry-after",
        String(options.retryAfterSeconds),
        ...(options.stormMs !== undefined ? ["--storm-ms", String(options.stormMs)] : [])
      ], { stdio: ["ignore", "pipe", "inherit"] })
      const arrivals: Array<Arrival> = []
      createInterface({ input: child.stdout! }).on("line", (line) => {
        const [tag, a, b, c, d] = line.split(" ")
        if (tag === "REQ") arrivals.push({ n: Number(a), at: Number(b), session: c ?? "?", throttled: d === "429" })
        if (tag === "FAKE" && a !== undefined) {
          resume(Effect.succeed({ child, fake: { openAiBaseUrl: a, requests: () => arrivals } }))
        }
      })
    }),
    ({ child }) => Effect.sync(() => child.kill("SIGKILL"))
  ).pipe(Effect.map(({ fake }) => fake))

const serveFake = (options: Pick<StormOptions, "throttled" | "retryAfterSeconds" | "stormMs">) =>
  Effect.gen(function*() {
    const decide = script(options)
    const fake = yield* Fake.make({
      fallback: (req) => {
        const decision = decide(req)
        process.stdout.write(`REQ ${req.n} ${req.at} ${sessionOf(req.body)} ${decision.throttled ? 429 : 200}\n`)
        return decision.behaviour
      }
    })
    process.stdout.write(`FAKE ${fake.openAiBaseUrl}\n`)
    return yield* Effect.never
  })

/** The figures of one storm. */
export interface StormResult {
  readonly sessions: number
  readonly completed: number
  /** Exit reason → sessions, for the sessions that did not complete. */
  readonly failures: Readonly<Record<string, number>>
  readonly wallMs: number
  readonly requests: number
  readonly throttledRequests: number
  /**
   * The 2xx replies the sessions need (2 per session) plus the throttled requests no client can avoid: all of them
   * in count mode, one per session in time mode.
   */
  readonly fewestRequests: number
  readonly requestRatio: number
  readonly busiest10ms: number
  /**
   * The most attempts the guard released in any 10 ms of its `Clock` (the provider's count can be higher: a busy
   * event loop delays sends and bunches them).
   */
  readonly busiest10msReleased: number
  /** Requests received in the first half of the first Retry-After: before anyone could know of the storm. */
  readonly firstWave: number
  readonly busiest10msAfterFirstWave: number
  /** How long after its own Retry-After ended each throttled session's next request arrived, in ms. */
  readonly extraWaitMs: { readonly p50: number; readonly p99: number; readonly max: number; readonly count: number }
  readonly retryGapMedianMs: number
  readonly eventLoopStallMs: number
}

const busiest = (times: ReadonlyArray<number>, windowMs: number) => {
  const sorted = [...times].sort((a, b) => a - b)
  let most = 0
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while ((sorted[i] ?? 0) - (sorted[j] ?? 0) >= windowMs) j++
    most = Math.max(most, i - j + 1)
  }
  return most
}

const quantile = (values: ReadonlyArray<number>, q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
}

const round = (n: number) => Math.round(n * 10) / 10

const sessionOf = (body: Record<string, unknown>): string => {
  const messages = Array.isArray(body.messages) ? body.messages as ReadonlyArray<Record<string, unknown>> : []
  const user = messages.find((m) => m.role === "user")
  const text = typeof user?.content === "string" ? user.content : JSON.stringify(user?.content ?? "")
  return /Incident (\d+):/.exec(text)?.[1] ?? "?"
}

/** Runs one storm (module comment) and measures it. Needs nothing: it starts its own fake provider and HTTP client. */
export const storm = (options: StormOptions): Effect.Effect<StormResult> =>
  Effect.scoped(
    Effect.gen(function*() {
      const retryAfterMs = options.retryAfterSeconds * 1000
      const fake = options.fakeProcess === true ? yield* fakeProcess(options) : yield* fakeInProcess(options)
      const adapter = yield* OpenAiCompat.make({ name: "primary", model: "fake-model", baseUrl: fake.openAiBaseUrl })
      const released: Array<number> = []
      const provider = options.unguarded === true ? adapter : StormGuard.wrap(adapter, {
        ...options.guard,
        onRelease: ({ releasedAt }) => released.push(releasedAt)
      })
      const spec = Harness.agent()
      const lag = monitorEventLoopDelay({ resolution: 10 })
      lag.enable()
      const started = performance.now()
      const landed = yield* Effect.forEach(
        Array.from({ length: options.sessions }, (_, i) => i),
        (i) =>
          Harness.runBurst({
            spec,
            session: Harness.session(spec, { id: `ses_storm_${i}` }),
            prompt: `Incident ${i}: why is checkout failing?`
          }),
        { concurrency: "unbounded" }
      ).pipe(Effect.provide(Harness.layer({ providers: [provider] })), Effect.orDie)
      const wallMs = performance.now() - started
      lag.disable()

      const failures: Record<string, number> = {}
      for (const l of landed) if (l.reason !== "completed") failures[l.reason] = (failures[l.reason] ?? 0) + 1
      // Lines from a child arrive a little after the replies they announce: let the last ones in.
      if (options.fakeProcess === true) yield* Effect.sleep("300 millis")
      const requests = fake.requests()
      const throttledRequests = requests.filter((r) => r.throttled).length
      // The first wave: what reached the provider before any session could have heard of the storm (the first
      // half of the first Retry-After). Everything after it went through the guard's pacer.
      const afterWave = (requests[0]?.at ?? 0) + retryAfterMs / 2
      // Per session: the gap from each 429 to the same session's next request, and that gap past the Retry-After.
      const bySession = new Map<string, Array<Arrival>>()
      for (const req of requests) bySession.set(req.session, [...(bySession.get(req.session) ?? []), req])
      const gaps: Array<number> = []
      const extras: Array<number> = []
      for (const list of bySession.values()) {
        list.forEach((req, i) => {
          const next = list[i + 1]
          if (!req.throttled || next === undefined) return
          gaps.push(next.at - req.at)
          extras.push(next.at - req.at - retryAfterMs)
        })
      }
      // Count mode: the throttled requests cannot be avoided. Time mode: each session's first request, sent at once,
      // is throttled; a session that waits out its Retry-After needs no other.
      const fewestRequests = (options.stormMs !== undefined ? options.sessions : options.throttled) +
        2 * options.sessions
      return {
        sessions: options.sessions,
        completed: landed.filter((l) => l.reason === "completed").length,
        failures,
        wallMs: Math.round(wallMs),
        requests: requests.length,
        throttledRequests,
        fewestRequests,
        requestRatio: round(requests.length / fewestRequests * 100) / 100,
        busiest10ms: busiest(requests.map((r) => r.at), 10),
        busiest10msReleased: busiest(released, 10),
        firstWave: requests.filter((r) => r.at < afterWave).length,
        busiest10msAfterFirstWave: busiest(requests.filter((r) => r.at >= afterWave).map((r) => r.at), 10),
        extraWaitMs: {
          p50: round(quantile(extras, 0.5)),
          p99: round(quantile(extras, 0.99)),
          max: round(Math.max(0, ...extras)),
          count: extras.length
        },
        retryGapMedianMs: round(quantile(gaps, 0.5)),
        eventLoopStallMs: Math.round(lag.max / 1e6)
      }
    }).pipe(Effect.provide(NodeHttpClient.layerUndici))
  )

const summary = (r: StormResult) =>
  [
    `completed ${r.completed}/${r.sessions}${
      Object.keys(r.failures).length > 0 ? ` ${JSON.stringify(r.failures)}` : ""
    }`,
    `wall ${(r.wallMs / 1000).toFixed(2)} s`,
    `busiest 10 ms: ${r.busiest10ms} (first wave ${r.firstWave} requests; after it: ${r.busiest10msAfterFirstWave}; released by the guard: ${r.busiest10msReleased})`,
    `requests ${r.requests} / fewest ${r.fewestRequests} = ${r.requestRatio}×`,
    `past own Retry-After: p50 ${r.extraWaitMs.p50} ms, p99 ${r.extraWaitMs.p99} ms, max ${r.extraWaitMs.max} ms`,
    `median retry gap ${r.retryGapMedianMs} ms`,
    `event-loop stall ${r.eventLoopStallMs} ms`
  ].join(" · ")

const main = Effect.gen(function*() {
  const { values } = parseArgs({
    options: {
      sessions: { type: "string", default: "200" },
      throttled: { type: "string", default: "400" },
      "retry-after": { type: "string", default: "2" },
      runs: { type: "string", default: "1" },
      unguarded: { type: "boolean", default: false },
      "in-process": { type: "boolean", default: false },
      fake: { type: "boolean", default: false },
      warmup: { type: "string", default: "20" },
      "storm-ms": { type: "string" }
    }
  })
  if (values.fake) {
    return yield* Effect.scoped(
      serveFake({
        throttled: Number(values.throttled),
        retryAfterSeconds: Number(values["retry-after"]),
        ...(values["storm-ms"] !== undefined ? { stormMs: Number(values["storm-ms"]) } : {})
      })
    )
  }
  const options: StormOptions = {
    sessions: Number(values.sessions),
    throttled: Number(values.throttled),
    retryAfterSeconds: Number(values["retry-after"]),
    ...(values["storm-ms"] !== undefined ? { stormMs: Number(values["storm-ms"]) } : {}),
    unguarded: values.unguarded,
    fakeProcess: !values["in-process"]
  }
  // Warm-up: a small storm first, so modules loaded on first use and the JIT do not stall the measured one.
  if (Number(values.warmup) > 0) {
    const sessions = Number(values.warmup)
    const { stormMs: _, ...countMode } = options
    yield* storm({ ...countMode, sessions, throttled: 2 * sessions, retryAfterSeconds: 1 })
  }
  for (let run = 1; run <= Number(values.runs); run++) {
    const result = yield* storm(options)
    console.log(`storm run ${run}: ${summary(result)}`)
    console.log(`RESULT ${JSON.stringify({ bench: "storm", run, ...options, ...result })}`)
  }
})

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  Effect.runPromise(main).then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error)
      process.exit(1)
    }
  )
}
