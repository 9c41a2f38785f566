/**
 * `npm run bench:server`: the server path, measured from the outside. N sessions are started at once over the HTTP
 * API of a real `corral serve` process, each followed by its own Server-Sent Events stream until it lands. The model
 * is the fake provider over real HTTP (test/support/FakeProvider.ts, OpenAI wire format, in this process) playing a
 * conversation of 3–5 model turns (the count derived from the session, so every run plays the same work): each turn
 * but the last calls one tool, alternately the in-process `demo_status` and `echo` of an MCP stdio server
 * (test/support/mcp-fixture.ts, a child of the server); the last answers; the landing's finalize call returns the
 * report. Everything the server does is measured on the server process alone:
 *
 * - sessions/s and model turns/s: N ÷ the wall time from the first POST to the last landing (turns: requests the
 *   fake model received, finalize calls included);
 * - server CPU ms per turn: the server process's user + system CPU over that window (/proc/PID/stat) ÷ turns —
 *   the database is excluded when it is Postgres (another process), included when it is the embedded PGlite;
 * - time to land p50 / p99: from sending the POST to the `exit` event on the session's stream;
 * - time to accept p50 / p99: from sending the POST to its 202 (the start stored), retries after a 503 included;
 * - peak RSS of the server (sampled every 100 ms, and its VmHWM);
 * - with `--profile`: the server runs as an esbuild bundle under `--cpu-prof`, and the self time of the measured
 *   window is summarised by area and function (scripts/bench/internal/cpuProfile.ts).
 *
 * A warm-up of min(50, N) sessions (`--warmup`) runs first and is not counted. Sessions must all land `completed`; a failed or
 * stuck session makes the run exit 1 (bound: `--timeout-s`, default 600; a run that times out says how far the
 * sessions got and the server's warnings and errors).
 *
 * Diagnostics through `--server-node-args`: `"--import tsx --import ./scripts/bench/internal/countOpsPreload.ts"`
 * counts Effect run-loop instructions in the server (`CORRAL_COUNT_OPS_FILE`, `CORRAL_COUNT_OPS_TURNS`), and
 * `…/allocProfilePreload.ts` samples its allocations with the stacks that made them (`CORRAL_ALLOC_PROFILE_FILE`),
 * and `…/countSqlPreload.ts` counts the statements it sends to Postgres by their first words (`CORRAL_COUNT_SQL_FILE`,
 * `CORRAL_COUNT_SQL_UNITS`: e.g. the sessions run, warm-up included).
 * `BENCH_SERVER_LOG=FILE` keeps every line the server writes (the report tallies only warning and error messages).
 *
 * With `--nodes N` (N ≥ 2, Postgres only) the same run measures three set-ups one after the other, each on its own
 * fresh database: one plain `corral serve`, one `corral serve --cluster` node (sessions hosted as cluster entities:
 * every message is also stored in the cluster's tables), and N `serve --cluster` nodes on one database, the POSTs
 * spread over the nodes in turn and each session followed on the node it was posted to (any-node routing: about
 * (N−1)/N of the messages are posted to a node that does not own the session and cross to its owner). CPU and RSS are
 * summed over the nodes; the routing hop's cost is the N-node run's CPU per turn against the one-node cluster's.
 *
 * Usage: `npm run bench:server -- [--sessions 1000] [--warmup 50] [--store postgres|embedded|both] [--profile] [--top 30]
 * [--min-turns 3] [--max-turns 5] [--timeout-s 600] [--keep-db] [--tools both|inproc|mcp] [--follow sse|wait]
 * [--corral DIR] [--nodes N] [--server-node-args "FLAGS"]` (`--corral`: serve another checkout, e.g. a worktree of an older commit, to compare in one run). `--store postgres` makes a fresh database on the machine's
 * server (.ci/postgres.sh) and drops it after (unless `--keep-db`, which prints its URL); `embedded` uses a fresh PGlite directory. Prints a report and one
 * `RESULT <json>` line per store (per set-up with `--nodes`).
 */
import type { ChildProcess } from "node:child_process"
import { execFileSync, spawn } from "node:child_process"
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as http from "node:http"
import { createServer } from "node:net"
import { loadavg, tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import * as FakeProvider from "../../test/support/FakeProvider.js"
import * as CpuProfile from "./internal/cpuProfile.js"

const root = fileURLToPath(new URL("../..", import.meta.url))
const work = join(root, "node_modules", ".cache", "corral-bench", "server")
const bundleFile = join(work, "main.mjs")

const argv = process.argv.slice(2)
if (argv.includes("--help") || argv.includes("-h")) {
  console.log(`Usage: npm run bench:server -- [--sessions 1000] [--warmup 50] [--store postgres|embedded|both]
  [--profile] [--top 30] [--min-turns 3] [--max-turns 5] [--timeout-s 600] [--keep-db] [--tools both|inproc|mcp]
  [--follow sse|wait] [--corral DIR] [--nodes N] [--server-node-args "FLAGS"]

N sessions started at once through the HTTP API (fake OpenAI-compatible model, in-process and MCP stdio tools, SSE
followers); reports sessions/s, turns/s, server CPU ms per turn, time to land p50/p99 and peak RSS, and one
RESULT <json> line per store. See the header of scripts/bench/server.ts for every flag.`)
  process.exit(0)
}
const flag = (name: string, fallback: string): string => {
  const index = argv.indexOf(`--${name}`)
  const value = index === -1 ? undefined : argv[index + 1]
  return value === undefined || value.startsWith("--") ? (index === -1 ? fallback : "true") : value
}
const sessions = Number(flag("sessions", "1000"))
const warmup = Number(flag("warmup", String(Math.min(50, sessions))))
const storeFlag = flag("store", "postgres")
const profile = argv.includes("--profile")
const top = Number(flag("top", "30"))
const minTurns = Number(flag("min-turns", "3"))
const maxTurns = Number(flag("max-turns", "5"))
const timeoutMs = Number(flag("timeout-s", "600")) * 1000
const keepDatabase = argv.includes("--keep-db")
// Diagnostics, to see what each part costs: `--tools inproc|mcp|both` (default both), `--follow sse|wait` (wait:
// no event stream, the start request itself waits for the landing with `?wait=true`).
const toolsFlag = flag("tools", "both")
// `--corral DIR`: serve from another checkout (its sources through tsx), to compare two versions in one run.
const corralDir = flag("corral", root)
const followFlag = flag("follow", "sse")
// The server runs with the Node flags the installed `corral` command runs with (its shebang, bin/corral.js), unless
// `--server-node-args "FLAGS"` says otherwise ("" for none), to measure what a flag buys.
const binFlags = (readFileSync(join(root, "bin/corral.js"), "utf8").split("\n")[0] ?? "").split(" ").filter((a) =>
  a.startsWith("--")
)
const serverNodeArgsIndex = argv.indexOf("--server-node-args")
const serverNodeArgs = serverNodeArgsIndex === -1
  ? binFlags
  : (argv[serverNodeArgsIndex + 1] ?? "").split(" ").filter((a) => a !== "")
// `--nodes N`: also a one-node cluster and an N-node cluster, in the same run (see the header).
const nodes = Number(flag("nodes", "1"))

const agent = {
  id: "bench",
  version: 1,
  name: "Server-path benchmark",
  instructions: "Investigate the incident with the tools, then answer.",
  tier: "default",
  tools: toolsFlag === "inproc" ? ["demo_status"] : toolsFlag === "mcp" ? ["echo"] : ["demo_status", "echo"]
}

// ---------------------------------------------------------------------------------------------------------------
// The model: 3–5 turns per session, each but the last calling one tool, the arguments varied per turn so the
// repeat-call rail never fires.

const turnsOf = (request: FakeProvider.RecordedRequest): number => {
  const messages = Array.isArray(request.body.messages) ? request.body.messages : []
  const firstUser = JSON.stringify(messages.find((m: { role?: string }) => m?.role === "user") ?? "")
  let hash = 0
  for (let i = 0; i < firstUser.length; i++) hash = (hash * 31 + firstUser.charCodeAt(i)) | 0
  return minTurns + (Math.abs(hash) % (maxTurns - minTurns + 1))
}

const conversation = (request: FakeProvider.RecordedRequest): FakeProvider.Behaviour => {
  if (FakeProvider.isFinalize(request)) return FakeProvider.demo(request)
  const done = FakeProvider.toolResults(request)
  const tools = FakeProvider.offeredTools(request)
  if (tools.length === 0 || done >= turnsOf(request) - 1) {
    return FakeProvider.text(`Investigated with ${done} tool calls: nothing is wrong.`)
  }
  const tool = tools[done % tools.length]!
  const args = Object.fromEntries(
    Object.entries(FakeProvider.sampleArgs(tool.parameters)).map(([k, v]) => [k, v === "demo" ? `demo-${done}` : v])
  )
  return FakeProvider.reply({ text: "Looking.", toolCalls: [{ name: tool.name, arguments: args }] })
}

// ---------------------------------------------------------------------------------------------------------------
// The server process

const agentPool = new http.Agent({ keepAlive: true, maxSockets: Infinity })

interface Reply {
  readonly status: number
  readonly body: string
}

const request = (url: string, method: string, body?: unknown, extra: Record<string, string> = {}): Promise<Reply> =>
  new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body)
    const req = http.request(url, {
      method,
      agent: agentPool,
      headers: payload === undefined
        ? extra
        : { ...extra, "content-type": "application/json", "content-length": Buffer.byteLength(payload) }
    }, (res) => {
      let text = ""
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => (text += chunk))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text }))
      res.on("error", reject)
    })
    req.on("error", reject)
    req.end(payload)
  })

/** What the followers met on the way: resumed streams and the `error` events the server sent before ending one. */
const streamTrouble = { reconnects: 0, errorEvents: 0, firstError: "" }

/** A follower gives up after this many resumptions of one session's stream (a real EventSource never does). */
const maxReconnects = 50

/**
 * Resolves at the session's `exit` event (or a snapshot that shows it landed). Like an EventSource, a stream that
 * ends before that is resumed with `Last-Event-ID` after the server's `retry:` hint, and every resumption is
 * counted: a real client would never see the break, but the benchmark reports it.
 */
const follow = (url: string): Promise<string> =>
  new Promise((resolve, reject) => {
    let lastId: string | undefined
    let retryMs = 2_000
    let attempts = 0
    const open = (): void => {
      const headers: Record<string, string> = { accept: "text/event-stream" }
      if (lastId !== undefined) headers["last-event-id"] = lastId
      const resume = (why: string): void => {
        attempts += 1
        streamTrouble.reconnects += 1
        if (attempts > maxReconnects) {
          return reject(new Error(`events: ${why}; gave up after ${maxReconnects} resumptions`))
        }
        setTimeout(open, retryMs)
      }
      const req = http.get(url, { agent: agentPool, headers }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`events: HTTP ${res.statusCode}`))
        let buffer = ""
        let done = false
        res.setEncoding("utf8")
        res.on("data", (chunk: string) => {
          buffer += chunk
          let end: number
          while ((end = buffer.indexOf("\n\n")) !== -1) {
            const frame = buffer.slice(0, end)
            buffer = buffer.slice(end + 2)
            const id = /^id: (.*)$/m.exec(frame)?.[1]
            if (id !== undefined) lastId = id
            const retry = /^retry: (\d+)$/m.exec(frame)?.[1]
            if (retry !== undefined) retryMs = Number(retry)
            const event = /^event: (.*)$/m.exec(frame)?.[1]
            const data = /^data: (.*)$/m.exec(frame)?.[1]
            if (event === "error") {
              streamTrouble.errorEvents += 1
              if (streamTrouble.firstError === "") streamTrouble.firstError = data ?? ""
            }
            if (event === "exit" && data !== undefined) {
              done = true
              res.destroy()
              return resolve(String((JSON.parse(data) as { reason?: unknown }).reason ?? "?"))
            }
            if (event === "session" && data !== undefined) {
              const view = JSON.parse(data) as { status?: string; exitReason?: string }
              if (view.status !== "running" && view.exitReason !== undefined) {
                done = true
                res.destroy()
                return resolve(view.exitReason)
              }
            }
          }
        })
        res.on("end", () => {
          if (!done) resume("the stream ended before the session landed")
        })
        res.on("error", () => {
          if (!done) resume("the stream broke before the session landed")
        })
      })
      req.on("error", (error) => attempts < maxReconnects ? resume(String(error)) : reject(error))
    }
    open()
  })

const cpuMs = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  // utime and stime are fields 14 and 15 of stat (11 and 12 after the command), in clock ticks (100 per second).
  return (Number(fields[11]) + Number(fields[12])) * 10
}

const statusKb = (pid: number, key: "VmRSS" | "VmHWM"): number => {
  let status: string
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8")
  } catch {
    // The server exited: its exit is reported where the run waits for it.
    return 0
  }
  const line = status.split("\n").find((l) => l.startsWith(`${key}:`))
  return Number(/(\d+)/.exec(line ?? "")?.[1] ?? 0)
}

const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n)

const quantile = (sorted: ReadonlyArray<number>, q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN

/** The server's warnings and errors by message (JSON log lines), so a run that went wrong says how. */
const logTally = new Map<string, number>()
let logRest = ""
const tallyLog = (chunk: Buffer): void => {
  const lines = (logRest + chunk.toString()).split("\n")
  logRest = lines.pop() ?? ""
  for (const line of lines) {
    if (!line.startsWith("{")) continue
    try {
      const record = JSON.parse(line) as { level?: string; message?: string }
      if (record.level !== "WARN" && record.level !== "ERROR" && record.level !== "FATAL") continue
      // Ids stripped, so one kind of trouble is one line however many sessions met it.
      const text = String(record.message).replace(/\b(ses|run|msg|call)_[0-9a-f]+/g, "$1_…")
      const key = `${record.level} ${text.slice(0, 240)}`
      logTally.set(key, (logTally.get(key) ?? 0) + 1)
    } catch {
      // not a log record
    }
  }
}

const startServer = async (
  env: Record<string, string>,
  profileDir: string | undefined
): Promise<{ readonly child: ChildProcess; readonly url: string; readonly startedMs: number }> => {
  const started = performance.now()
  const args = profileDir !== undefined
    ? [...serverNodeArgs, "--cpu-prof", `--cpu-prof-dir=${profileDir}`, bundleFile, "serve"]
    : [...serverNodeArgs, "--conditions=corral-source", "--import", "tsx", join(corralDir, "src/cli/main.ts"), "serve"]
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let log = ""
  // `BENCH_SERVER_LOG=FILE`: every line the server writes, kept whole (the report tallies only messages).
  const logFile = process.env.BENCH_SERVER_LOG
  child.stderr!.on("data", (chunk: Buffer) => {
    if (logFile !== undefined) appendFileSync(logFile, chunk)
    log = (log + chunk.toString()).slice(-20_000)
    tallyLog(chunk)
  })
  const url = await new Promise<string>((resolve, reject) => {
    let out = ""
    const timer = setTimeout(() => reject(new Error(`the server did not start in 60 s:\n${out}\n${log}`)), 60_000)
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString()
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(out)
      if (match !== null) {
        clearTimeout(timer)
        resolve(match[1]!)
      }
    })
    child.once("exit", (code) => reject(new Error(`the server exited (${code}) before listening:\n${out}\n${log}`)))
  })
  child.stdout!.on("data", tallyLog)
  if (logFile !== undefined) child.stdout!.on("data", (chunk: Buffer) => appendFileSync(logFile, chunk))
  // A server that dies mid-run ends the run with its last log lines (`stop`'s SIGTERM exits 0; its SIGKILL is its own).
  child.once("exit", (code, signal) => {
    if (code === 0 || signal === "SIGKILL") return
    console.error(
      `the server exited mid-run (code ${code}, signal ${signal}); its last log lines:\n${log.slice(-8_000)}`
    )
    process.exit(1)
  })
  // Ready = /readyz 200 with the MCP server up (its tool is one of the agent's).
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    const ready = await request(`${url}/readyz`, "GET").catch(() => undefined)
    if (ready?.status === 200 && ready.body.includes("\"mcp:fixture\":\"up\"")) break
    await new Promise((r) => setTimeout(r, 100))
  }
  return { child, url, startedMs: performance.now() - started }
}

/** How far the sessions of the measured run got (printed when the run times out). */
const progress = { answered: 0, accepted: 0, landed: 0, failed: 0 }

/** Starts answered 503 and sent again (see `runMany`), and the first such answer. */
const startRetries = { count: 0, first: "" }
const maxStartRetries = 30
/** Tells this run's idempotency keys from an earlier run's on a kept database. */
const runTag = Date.now().toString(36)

/** Starts `count` sessions at once, the i-th through `urls[i % urls.length]`, and follows each on that node. */
const runMany = async (urls: ReadonlyArray<string>, count: number, offset: number) => {
  const landings: Array<number> = []
  const accepts: Array<number> = []
  const reasons = new Map<string, number>()
  const failures: Array<string> = []
  await Promise.all(Array.from({ length: count }, async (_, i) => {
    const n = offset + i
    const url = urls[i % urls.length]!
    const sent = performance.now()
    try {
      const wait = followFlag === "wait"
      // Like a careful client: a 503 (the server shed the start) is retried after a second with the same
      // Idempotency-Key, so it can never start twice; each retry is counted.
      const start = () =>
        request(`${url}/v1/sessions${wait ? "?wait=true" : ""}`, "POST", {
          agentId: agent.id,
          scope: `bench:${n}`,
          prompt: `Session ${n}: why is checkout failing?`
        }, { "idempotency-key": `bench-${runTag}-${n}` })
      let started = await start()
      progress.answered += 1
      for (let retries = 0; started.status === 503 && retries < maxStartRetries; retries++) {
        startRetries.count += 1
        if (startRetries.first === "") startRetries.first = started.body.slice(0, 200)
        await new Promise((r) => setTimeout(r, 1_000))
        started = await start()
      }
      if (started.status !== (wait ? 200 : 202)) {
        throw new Error(`start: HTTP ${started.status} ${started.body.slice(0, 200)}`)
      }
      progress.accepted += 1
      accepts.push(performance.now() - sent)
      const answer = JSON.parse(started.body) as { sessionId: string; exitReason?: string }
      const reason = wait
        ? String(answer.exitReason ?? "?")
        : await follow(`${url}/v1/sessions/${answer.sessionId}/events`)
      landings.push(performance.now() - sent)
      progress.landed += 1
      reasons.set(reason, (reasons.get(reason) ?? 0) + 1)
    } catch (error) {
      progress.failed += 1
      failures.push(String(error))
    }
  }))
  return { landings, accepts, reasons, failures }
}

/** A free TCP port on 127.0.0.1, for a cluster runner (its address must be fixed before it starts). */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })

/** Waits until `runners` cluster runners hold the 300 shards between them, about evenly (their advisory locks). */
const awaitShards = async (database: string, runners: number): Promise<void> => {
  const query = "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = " +
    "'advisory' AND l.granted AND d.datname = current_database() GROUP BY l.pid"
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    const held = execFileSync("psql", [database, "-Atc", query], { encoding: "utf8" }).trim().split("\n")
      .filter((l) => l !== "").map(Number)
    if (held.length === runners && held.reduce((a, b) => a + b, 0) === 300 && held.every((n) => n >= 100 / runners)) {
      return
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  throw new Error(`the ${runners} runners did not share the shards within 60 s`)
}

/** What is served: one plain node, or `nodes` cluster nodes on one database. */
interface Setup {
  readonly label: string
  readonly cluster: boolean
  readonly nodes: number
}

const plain: Setup = { label: "1 node", cluster: false, nodes: 1 }

const benchStore = async (store: "postgres" | "embedded", setup: Setup = plain) => {
  const dir = mkdtempSync(join(tmpdir(), "corral-bench-server-"))
  let database: string | undefined
  const model = await FakeProvider.start({ fallback: conversation, record: false })
  const config = {
    providers: { fake: { api: "openai", baseUrl: model.openAiBaseUrl, model: "fake-model", timeoutMs: 120_000 } },
    tiers: { default: ["fake"] },
    mcpServers: {
      fixture: {
        command: process.execPath,
        args: ["--import", "tsx", join(root, "test/support/mcp-fixture.ts"), "--only", "echo"],
        effects: { echo: "read" },
        timeoutMs: 120_000
      }
    },
    server: { port: 0 },
    demo: { enabled: true, delayMs: 0 },
    database: { dataDir: join(dir, "data") }
  }
  writeFileSync(join(dir, "corral.json"), JSON.stringify(config))
  const env: Record<string, string> = { CORRAL_CONFIG: join(dir, "corral.json") }
  if (store === "postgres") {
    database = execFileSync("bash", [join(root, ".ci/postgres.sh")], { encoding: "utf8" }).trim()
    env.DATABASE_URL = database
  }
  const profileDir = profile ? join(work, `profile-${store}`) : undefined
  if (profileDir !== undefined) rmSync(profileDir, { recursive: true, force: true })
  // One after the other: the first node migrates the fresh database.
  const servers: Array<Awaited<ReturnType<typeof startServer>>> = []
  const stopAll = () => Promise.all(servers.map((s) => stop(s.child)))
  try {
    for (let i = 0; i < setup.nodes; i++) {
      const runner: Record<string, string> = setup.cluster
        ? { CORRAL_CLUSTER: "true", CORRAL_CLUSTER_HOST: "127.0.0.1", CORRAL_CLUSTER_PORT: String(await freePort()) }
        : {}
      servers.push(await startServer({ ...env, ...runner }, profileDir))
    }
    if (setup.cluster && database !== undefined) await awaitShards(database, setup.nodes)
    const server = servers[0]!
    const urls = servers.map((s) => s.url)
    const pids = servers.map((s) => s.child.pid!)
    const rssKb = () => pids.reduce((sum, pid) => sum + statusKb(pid, "VmRSS"), 0)
    const published = await request(`${server.url}/v1/agents`, "POST", agent)
    if (published.status !== 201) throw new Error(`publish: HTTP ${published.status} ${published.body}`)
    const idleRssMb = rssKb() / 1024

    const warm = await runMany(urls, warmup, 0)
    if (warm.failures.length > 0) throw new Error(`warm-up failed: ${warm.failures[0]}`)
    // What the nodes spend doing nothing (timers, the cluster's polls and lock refreshes, heartbeats), over 2 s.
    const idle0 = pids.map(cpuMs)
    await new Promise((r) => setTimeout(r, 2_000))
    const idleCpuMsPerS = pids.reduce((sum, pid, i) => sum + cpuMs(pid) - idle0[i]!, 0) / 2

    let peakKb = 0
    const sampler = setInterval(() => (peakKb = Math.max(peakKb, rssKb())), 100)
    const turns0 = model.count()
    const trouble0 = { ...streamTrouble }
    const retries0 = startRetries.count
    const cpus0 = pids.map(cpuMs)
    const load0 = loadavg()[0]!
    const fromUs = monotonicUs()
    const t0 = performance.now()
    const timer = setTimeout(() => {
      console.error(`bench:server: not every session landed within ${timeoutMs / 1000} s (counted over the warm-up and \
the run: ${JSON.stringify(progress)}; 503 retries ${startRetries.count}, stream trouble ${
        JSON.stringify(streamTrouble)
      })`)
      for (const [line, n] of logTally) console.error(`server log ×${n}: ${line}`)
      for (const s of servers) s.child.kill("SIGKILL")
      process.exit(1)
    }, timeoutMs)
    const run = await runMany(urls, sessions, 1_000_000)
    clearTimeout(timer)
    const wallMs = performance.now() - t0
    const toUs = monotonicUs()
    const cpus = pids.map((pid, i) => cpuMs(pid) - cpus0[i]!)
    const cpu = cpus.reduce((a, b) => a + b, 0)
    clearInterval(sampler)
    const turns = model.count() - turns0
    const sorted = [...run.landings].sort((a, b) => a - b)
    const acceptSorted = [...run.accepts].sort((a, b) => a - b)
    const result = {
      store,
      ...(setup === plain ? {} : { setup: setup.label, nodes: setup.nodes, cluster: setup.cluster }),
      sessions,
      landed: run.landings.length,
      failed: run.failures.length,
      start_retries_after_503: startRetries.count - retries0,
      stream_resumptions: streamTrouble.reconnects - trouble0.reconnects,
      stream_error_events: streamTrouble.errorEvents - trouble0.errorEvents,
      exit_reasons: Object.fromEntries(run.reasons),
      model_turns: turns,
      wall_ms: Math.round(wallMs),
      sessions_per_s: Number((sessions / (wallMs / 1000)).toFixed(1)),
      turns_per_s: Number((turns / (wallMs / 1000)).toFixed(1)),
      server_cpu_ms_per_turn: Number((cpu / Math.max(1, turns)).toFixed(2)),
      ...(setup.nodes > 1
        ? { node_cpu_ms_per_turn: cpus.map((c) => Number((c / Math.max(1, turns)).toFixed(2))) }
        : {}),
      land_p50_ms: Math.round(quantile(sorted, 0.5)),
      land_p99_ms: Math.round(quantile(sorted, 0.99)),
      accept_p50_ms: Math.round(quantile(acceptSorted, 0.5)),
      accept_p99_ms: Math.round(quantile(acceptSorted, 0.99)),
      peak_rss_mb: Math.round(Math.max(peakKb, rssKb()) / 1024),
      vmhwm_mb: Math.round(pids.reduce((sum, pid) => sum + statusKb(pid, "VmHWM"), 0) / 1024),
      idle_rss_mb: Math.round(idleRssMb),
      idle_cpu_ms_per_s: idleCpuMsPerS,
      ready_ms: Math.round(server.startedMs),
      load_average: [Number(load0.toFixed(2)), Number(loadavg()[0]!.toFixed(2))],
      server_node_args: serverNodeArgs.join(" ")
    }
    console.log(`\n## ${store}${setup === plain ? "" : `, ${setup.label}`}: ${sessions} sessions at once\n`)
    for (const [key, value] of Object.entries(result)) console.log(`- ${key}: ${JSON.stringify(value)}`)
    if (run.failures.length > 0) console.log(`- first failure: ${run.failures[0]}`)
    for (const [line, n] of [...logTally].sort((a, b) => b[1] - a[1]).slice(0, 8)) {
      console.log(`- server log ×${n}: ${line}`)
    }
    logTally.clear()
    if (startRetries.first !== "") console.log(`- first 503 answer to a start: ${startRetries.first}`)
    if (streamTrouble.firstError !== "") console.log(`- first stream error event: ${streamTrouble.firstError}`)
    await stopAll()
    if (profileDir !== undefined) {
      const file = readdirSync(profileDir).find((f) => f.endsWith(".cpuprofile"))
      if (file === undefined) console.log("\n(no CPU profile was written)")
      else {
        const summary = CpuProfile.summarise({
          profileFile: join(profileDir, file),
          bundleFile,
          units: turns,
          top,
          fromUs,
          toUs
        })
        console.log(`\nCPU profile of the measured window (${(summary.totalUs / 1e6).toFixed(2)} s sampled):\n`)
        console.log(summary.lines.join("\n"))
        const account = CpuProfile.account({ profileFile: join(profileDir, file), bundleFile, fromUs, toUs })
        console.log(
          `\nAccount of a served turn by component (${(account.totalUs / 1e6).toFixed(2)} s of CPU sampled, idle ` +
            `excluded; ms per turn = the share × the measured ${result.server_cpu_ms_per_turn} ms per turn):\n`
        )
        console.log(
          "| component | share | ms per turn | where (the deciding frames, top 4) |\n| --- | --- | --- | --- |"
        )
        for (const row of account.rows) {
          const share = row.us / account.totalUs
          const where = row.frames.map((f) => `\`${f.label}\` ${((f.us / row.us) * 100).toFixed(0)}%`).join("; ")
          console.log(
            `| ${row.component} | ${(share * 100).toFixed(1)}% | ${
              (share * result.server_cpu_ms_per_turn).toFixed(3)
            } | ${where.replaceAll("|", "\\|")} |`
          )
        }
      }
    }
    console.log(`RESULT ${JSON.stringify(result)}`)
    return result
  } finally {
    await stopAll()
    await model.close()
    rmSync(dir, { recursive: true, force: true })
    if (database !== undefined && keepDatabase) console.log(`the database is kept: ${database}`)
    else if (database !== undefined) {
      execFileSync("psql", [
        "-h",
        "127.0.0.1",
        "-U",
        "postgres",
        "-d",
        "postgres",
        "-q",
        "-c",
        `DROP DATABASE IF EXISTS "${database.split("/").pop()}" WITH (FORCE)`
      ])
    }
  }
}

/** SIGTERM (the server drains and exits 0, writing its CPU profile), SIGKILL after 30 s. */
const stop = (child: ChildProcess): Promise<void> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => {
      const kill = setTimeout(() => child.kill("SIGKILL"), 30_000)
      child.once("exit", () => {
        clearTimeout(kill)
        resolve()
      })
      child.kill("SIGTERM")
    })

const main = async () => {
  if (profile) {
    mkdirSync(work, { recursive: true })
    await CpuProfile.bundle(join(root, "src/cli/main.ts"), bundleFile)
    // The viewer's static files are read next to the server module.
    execFileSync("cp", ["-r", join(root, "src/server/viewer"), join(work, "viewer")])
  }
  const stores = storeFlag === "both" ? (["postgres", "embedded"] as const) : [storeFlag as "postgres" | "embedded"]
  let failed = false
  if (nodes > 1) {
    if (storeFlag !== "postgres" || profile) throw new Error("--nodes needs --store postgres and no --profile")
    const setups: ReadonlyArray<Setup> = [
      plain,
      { label: "cluster, 1 node", cluster: true, nodes: 1 },
      { label: `cluster, ${nodes} nodes`, cluster: true, nodes }
    ]
    const results = []
    for (const setup of setups) {
      const result = await benchStore("postgres", setup)
      failed ||= result.failed > 0 || result.landed !== sessions
      results.push(result)
    }
    const [single, one, many] = results as [typeof results[0], typeof results[0], typeof results[0]]
    console.log(`\n## ${sessions} sessions: ${nodes} cluster nodes against one\n`)
    console.log(
      `- sessions/s: 1 node ${single.sessions_per_s}, cluster of 1 ${one.sessions_per_s}, cluster of ${nodes} ` +
        `${many.sessions_per_s} (${(many.sessions_per_s / one.sessions_per_s).toFixed(2)}× the cluster of 1)`
    )
    console.log(
      `- CPU ms per turn, all nodes: 1 node ${single.server_cpu_ms_per_turn}, cluster of 1 ` +
        `${one.server_cpu_ms_per_turn}, cluster of ${nodes} ${many.server_cpu_ms_per_turn}: hosting as entities ` +
        `${(one.server_cpu_ms_per_turn - single.server_cpu_ms_per_turn).toFixed(2)} ms per turn, the routing hop ` +
        `${(many.server_cpu_ms_per_turn - one.server_cpu_ms_per_turn).toFixed(2)} ms per turn`
    )
    console.log(
      `- land p50 / p99 ms: 1 node ${single.land_p50_ms} / ${single.land_p99_ms}, cluster of 1 ` +
        `${one.land_p50_ms} / ${one.land_p99_ms}, cluster of ${nodes} ${many.land_p50_ms} / ${many.land_p99_ms}`
    )
  } else {
    for (const store of stores) {
      const result = await benchStore(store)
      failed ||= result.failed > 0 || result.landed !== sessions
    }
  }
  agentPool.destroy()
  process.exit(failed ? 1 : 0)
}

void main().catch((error) => {
  console.error(error)
  process.exit(1)
})
