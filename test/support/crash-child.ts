/**
 * crash-child — the process the crash test (test/store/CrashRecovery.test.ts) kills with SIGKILL and restarts.
 *
 *   node --import tsx test/support/crash-child.ts run    <target>
 *   node --import tsx test/support/crash-child.ts resume <target>
 *
 * `<target>` is a data directory (the embedded PGlite, on disk under it) or a `postgres://` URL. Both modes open
 * Corral over the SQL store with a stateless model (`Scripted.fromFunction`: it derives its reply from the
 * conversation — two `slow` calls per turn until the transcript holds `TOOL_TURNS` tool_results entries, then an
 * answer) and a `slow` tool that takes 20–50 ms of real time, so a kill lands while calls are in flight. One call
 * (session 00's first call of its second tool turn, the assistant turn at `hangSeq`) hangs for a minute instead: the
 * test waits for that turn's ACK, so at least one dispatched call is certainly unfinished when it kills.
 *
 * Lines on stdout (one each; stdout on a pipe is written synchronously on Linux, so a printed line is out before
 * any later kill):
 * - `READY` once the store is open and the agent published; `STARTED` once all `SESSIONS` sessions are started.
 * - `ACK <sessionId> <seq> <kind>` for every `turn` event of every session. Turn events are published only after
 *   the turn is persisted (and the stream replays stored turns first), so every ACK is an acknowledged turn.
 * - run mode: `DONE` when all `SESSIONS` first bursts have landed (the test kills the child long before).
 * - resume mode: `SUMMARY <json>` (a `Summary`, see `resume`): each session's status and transcript as found on
 *   restart, then — after `continue` — its landed view and full transcript. The test runs `resume` in-process.
 */
import { Effect, Layer, Option, Redacted, Schedule, Stream } from "effect"
import { pathToFileURL } from "node:url"
import { Corral } from "../../src/Corral.js"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import type { ModelReply, Turn } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import type { SessionStatus } from "../../src/domain/Session.js"
import { Usage } from "../../src/domain/Usage.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Database from "../../src/store/Database.js"
import * as Embedded from "../../src/store/Embedded.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

/** How many sessions the child runs. */
export const SESSIONS = 20
/** Tool turns (each with two `slow` calls) before the model answers. */
export const TOOL_TURNS = 4
/**
 * The seq of session 00's second assistant turn (user, assistant, tool_results, assistant) in the first burst: its
 * first call hangs (a minute), so the test can wait for its ACK and kill while that call is surely in flight.
 */
export const hangSeq = 4
/** The principal every session belongs to. */
export const principal = new Principal({ orgId: "org_crash", userId: "crash" })
/** The id of the i-th session. */
export const sessionId = (i: number): string => `ses_crash_${String(i).padStart(2, "0")}`

/** One session as the resume mode found it and left it. */
export interface SessionSummary {
  readonly id: string
  /** The status the restarted runtime reports before anything is sent (running bursts become `interrupted`). */
  readonly statusOnRestart: SessionStatus
  /** The stored transcript on restart, before the session was touched. */
  readonly before: ReadonlyArray<Turn>
  /** The landed view after `continue`. */
  readonly exitReason: ExitReason | undefined
  readonly hasReport: boolean
  readonly statusAfter: SessionStatus
  /** The full stored transcript after `continue`. */
  readonly after: ReadonlyArray<Turn>
}

/** What `resume` prints after `SUMMARY `. */
export interface Summary {
  readonly sessions: ReadonlyArray<SessionSummary>
}

const agent = {
  id: "crash",
  version: 1,
  name: "Crash",
  instructions: "Call slow until you know enough, then answer.",
  tools: ["slow"]
}

const slow = ToolRegistry.define<{ q: string }>({
  name: "slow",
  description: "Takes 20–50 ms of real time.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"], additionalProperties: false },
  run: (args, ctx) =>
    Effect.as(
      Effect.sleep(
        ctx.sessionId === sessionId(0) && args.q === "1_1a" ? 60_000 : 20 + Math.floor(Math.random() * 31)
      ),
      `slow:${args.q}`
    )
})

const usage = new Usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 })
const reply = (fields: Partial<ModelReply>): ModelReply => ({
  text: "",
  toolCalls: [],
  finishReason: "stop",
  usage,
  model: "crash-model",
  ...fields
})

/** Stateless: the reply depends only on the conversation, so a restarted process plays on where it stopped. */
const model = Scripted.fromFunction({
  name: "crash",
  model: "crash-model",
  reply: (request: ModelRequest) => {
    if (request.responseSchema !== undefined) {
      return reply({
        text: JSON.stringify({ summary: "crash test session", findings: [], confidence: "low", nextSteps: [] })
      })
    }
    const done = request.messages.filter((m) => m.kind === "tool_results").length
    const users = request.messages.filter((m) => m.kind === "user").length
    if (done >= TOOL_TURNS) return reply({ text: `answered after ${done} tool turns` })
    // Distinct ids and arguments per turn (and per user message), so the repeat guard never fires.
    const tag = `${users}_${done}`
    return reply({
      finishReason: "tool_calls",
      toolCalls: [
        { id: `c_${tag}_a`, name: "slow", arguments: JSON.stringify({ q: `${tag}a` }) },
        { id: `c_${tag}_b`, name: "slow", arguments: JSON.stringify({ q: `${tag}b` }) }
      ]
    })
  }
})

const storeLayer = (target: string) =>
  target.startsWith("postgres://") || target.startsWith("postgresql://")
    ? SqlStore.layer().pipe(Layer.provideMerge(Database.layerPostgres(Redacted.make(target))))
    : SqlStore.layer({ lanes: 1 }).pipe(Layer.provideMerge(Embedded.layerEmbedded({ dataDir: target })))

/** Corral over the SQL store at `target` (a data directory or a postgres:// URL), the model and the tool. */
export const layer = (target: string) =>
  Corral.layer({ idleTimeout: "10 minutes" }).pipe(
    Layer.provide(
      Layer.mergeAll(
        LiveEvents.layer,
        ToolRegistry.layer([slow]),
        Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
      )
    ),
    Layer.provideMerge(storeLayer(target))
  )

const say = (line: string) => Effect.sync(() => process.stdout.write(`${line}\n`))

/** Prints an ACK for every persisted turn of the session, from its first one on (runs until interrupted). */
const acknowledge = (id: string) =>
  Effect.flatMap(Corral, (c) =>
    c.events(principal, id, 0).pipe(
      Stream.runForEach((event) =>
        event._tag === "turn" ? say(`ACK ${event.sessionId} ${event.seq} ${event.turn.entry.kind}`) : Effect.void
      )
    ))

const run = Effect.gen(function*() {
  const c = yield* Corral
  yield* c.publishAgent(principal, agent)
  yield* say("READY")
  const ids = Array.from({ length: SESSIONS }, (_, i) => sessionId(i))
  for (const id of ids) {
    yield* c.start(principal, { agentId: agent.id, scope: "crash", prompt: `investigate ${id}`, sessionId: id })
    yield* Effect.forkDaemon(acknowledge(id))
  }
  yield* say("STARTED")
  // Wait for every first burst to land (normally the test has killed us long before).
  yield* Effect.forEach(ids, (id) =>
    Effect.repeat(c.get(principal, id), {
      until: (v) => v.exitReason !== undefined && v.status !== "running",
      schedule: Schedule.spaced("20 millis")
    }), { concurrency: "unbounded", discard: true })
  yield* say("DONE")
})

/**
 * The restart: reads every session as the (freshly started) runtime finds it, then continues each one to a landing.
 * Exported so the test can run it in its own process once the killed child is gone.
 */
export const resume: Effect.Effect<Summary, unknown, Corral> = Effect.gen(function*() {
  const c = yield* Corral
  const ids = Array.from({ length: SESSIONS }, (_, i) => sessionId(i))
  // Read everything as the restart found it before any session is loaded (loading repairs an unpaired tail).
  const found = yield* Effect.forEach(ids, (id) =>
    Effect.gen(function*() {
      const exists = yield* Effect.option(c.get(principal, id))
      if (Option.isNone(exists)) return Option.none()
      return Option.some({ id, status: exists.value.status, before: yield* c.turns(principal, id) })
    }))
  const sessions = yield* Effect.forEach(
    found.flatMap((f) => Option.isSome(f) ? [f.value] : []),
    (f) =>
      Effect.gen(function*() {
        const landed = yield* c.continue(principal, f.id, "the process restarted; carry on")
        const summary: SessionSummary = {
          id: f.id,
          statusOnRestart: f.status,
          before: f.before,
          exitReason: landed.exitReason,
          hasReport: landed.report !== undefined,
          statusAfter: landed.status,
          after: yield* c.turns(principal, f.id)
        }
        return summary
      }),
    { concurrency: "unbounded" }
  )
  return { sessions }
})

const main = (mode: string | undefined, target: string | undefined) => {
  if ((mode !== "run" && mode !== "resume") || target === undefined) {
    process.stderr.write("usage: crash-child.ts run|resume <data dir | postgres:// url>\n")
    process.exit(2)
  }
  const program = mode === "run"
    ? run
    : Effect.flatMap(resume, (summary) => say(`SUMMARY ${JSON.stringify(summary)}`))
  Effect.runPromise(Effect.provide(program, layer(target))).then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`crash-child failed: ${String(error)}\n`)
      process.exit(1)
    }
  )
}

// Only when run as a program: the test imports `resume` and `layer` from this file too.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv[2], process.argv[3])
}
