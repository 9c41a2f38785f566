/**
 * Corral's implementation of the peers workload (../shared/bench/WORKLOAD.md §10): the runtime overhead of the
 * agent loop per model turn and per tool call, with a zero-latency scripted model and an in-process echo tool.
 *
 * Everything goes through the public embedding API, built ONCE per process as a `ManagedRuntime` over
 * `Corral.layerMemory`: the memory store, live events, the in-process `ToolRegistry` (so ajv argument validation
 * is measured), no tracer/exporter layer. The model is `Scripted.fromFunction`, stateless: it derives the session
 * id, the turn and the final count from the request's messages. The agent uses `finalize: "transcript"`, so the
 * landing writes its report from the transcript without an extra model call — which is what keeps the workload's
 * model counter at exactly 11 per session — and `limits.modelCallsPerBurst: 11` (the workload's T + 1).
 * Each session is one `Corral.run` awaited through `runtime.runPromise`; scenario B starts all sessions with
 * `Effect.forEach(..., { concurrency: "unbounded" })`; scenario C builds each 20-message history with one `run`
 * and nine `continue`s. Checks (final text read back with `Corral.turns`, counters) run after the timed region.
 *
 * Run through its entry, which picks the build Corral is imported from (scripts/bench/workload.ts):
 * `node --expose-gc --import tsx scripts/bench/workload.ts --scenario A|B|C [--quick --sessions N --warmup N]`
 * Options: `--store memory|embedded|postgres` (A and B; embedded = PGlite in a fresh temporary directory, postgres =
 * the server at `DATABASE_URL`, e.g. `DATABASE_URL=$(bash .ci/postgres.sh)`), `--tracer off`
 * (disables Effect's built-in in-memory span objects, a diagnostic), `--count-fibers` (a diagnostic: prints the
 * fibers started per model turn to stderr at exit), `--count-ops [--count-ops-top N]` (a diagnostic: Effect's
 * run-loop instructions per model turn, by opcode and by site, to stderr at exit; internal/opCount.ts), `--passivate` (C: let every actor passivate
 * before measuring, so only the store's share remains), `--otlp URL [--sampler NAME] [--protocol http/json|http/protobuf]`
 * (telemetry on, exporting to an OTLP/HTTP receiver such as scripts/bench/otlp-sink.ts; each timed batch of scenario
 * A ends with `Telemetry.flush`, so it pays for exporting what it made — the `OTEL_*` variables apply, `OTEL_BSP_*` among them).
 * Prints one `RESULT <json>` line (framework `corral`).
 */
import type { Duration } from "effect"
import { Config, Effect, Layer, ManagedRuntime, Option, Supervisor as EffectSupervisor } from "effect"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
// Corral through its package entries, as an embedder imports it (`workload.ts` says which build they resolve to).
import type { PersistenceFailed, SessionStore } from "corral"
import { Corral, LiveEvents, Principal, Providers, Supervisor, ToolRegistry, Usage } from "corral"
import type { ModelReply, ModelRequest, SessionView, TurnEntry } from "corral"
import { Telemetry } from "corral/telemetry"
import { ScriptedModel as Scripted } from "corral/testing"
import * as Harness from "../harness.js"
import * as OpCount from "./opCount.js"

const principal = new Principal({ orgId: "bench", userId: "bench" })
const scope = "bench"
const usage = new Usage({
  inputTokens: Harness.USAGE.input,
  outputTokens: Harness.USAGE.output,
  cacheReadTokens: 0,
  cacheWriteTokens: 0
})

let modelCalls = 0
let toolCalls = 0

/** The model of §3 over Corral's request: transcript entries, tool results grouped per `tool_results` entry. */
const agentModel = Scripted.fromFunction({
  name: "bench",
  model: "scripted-zero-latency",
  reply: (request: ModelRequest): ModelReply => {
    modelCalls++
    const messages = request.messages
    const first = messages[0]
    const sid = Harness.sessionIdOf(first?.kind === "user" ? first.text : undefined) ?? "?"
    let r = 0
    for (const m of messages) if (m.kind === "tool_results") r += m.results.length
    const t = 1 + r / Harness.K
    if (t <= Harness.T) {
      const toolCalls = []
      for (let i = 1; i <= Harness.K; i++) {
        toolCalls.push({ id: Harness.callId(sid, t, i), name: "echo", arguments: Harness.callArguments(t, i) })
      }
      return { text: "", toolCalls, finishReason: "tool_calls", usage, model: "scripted-zero-latency" }
    }
    const valid = Harness.validCounter(sid)
    for (const m of messages) {
      if (m.kind === "tool_results") { for (const result of m.results) valid.add(result.callId, result.content) }
    }
    const text = Harness.finalText(sid, valid.count())
    return { text, toolCalls: [], finishReason: "stop", usage, model: "scripted-zero-latency" }
  }
})

/** Scenario C's model: answers user message `j` with the padded assistant text `j + 1` of §8, a fresh string. */
const historyModel = Scripted.fromFunction({
  name: "bench-history",
  model: "scripted-zero-latency",
  reply: (request: ModelRequest): ModelReply => {
    modelCalls++
    const first = request.messages[0]
    const opening = first?.kind === "user" ? first.text : ""
    const sid = opening.slice(2, opening.indexOf(":", 2))
    const text = Harness.fresh(Harness.historyText(sid, request.messages.length))
    return { text, toolCalls: [], finishReason: "stop", usage, model: "scripted-zero-latency" }
  }
})

/** The echo tool of §4, validated by the registry against its JSON Schema before `run` is called. */
const echoTool = ToolRegistry.define<{ q: string }>({
  name: "echo",
  description: "Echoes its argument back, padded to 1 KiB.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  run: (args) =>
    Effect.sync(() => {
      toolCalls++
      return Harness.echo(args.q)
    })
})

/** The agent of scenarios A and B. */
const agent = {
  id: "bench",
  version: 1,
  name: "Bench",
  instructions: "Call the echo tool, then answer.",
  tools: ["echo"],
  finalize: "transcript" as const,
  limits: { modelCallsPerBurst: Harness.TURNS }
}

/** The agent of scenario C: no tools, one model call per burst. */
const holder = {
  id: "holder",
  version: 1,
  name: "Holder",
  instructions: "Answer.",
  tier: "history",
  finalize: "transcript" as const
}

const versions = (): Record<string, string> => {
  const require = createRequire(import.meta.url)
  // Walk up to Corral's own package.json (this file may also run from a bundle, see profile.ts).
  let own: { name?: string; version?: string } = {}
  for (
    let dir = new URL(".", import.meta.url);
    own.name !== "corral" && dir.pathname !== "/";
    dir = new URL("..", dir)
  ) {
    const file = new URL("package.json", dir)
    if (existsSync(file)) own = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string }
  }
  const effect = require("effect/package.json") as { version: string }
  return { corral: own.version ?? "?", effect: effect.version, node: process.version }
}

const refuse = (problem: string): never => {
  process.stderr.write(`${problem}\n`)
  return process.exit(2)
}

/**
 * The SQL store of `--store embedded|postgres`, and how to clean up after it. Imported on demand: the SQL drivers
 * add to every process's start-up, and the memory runs do not need them.
 */
const sqlStore = async (store: string): Promise<{
  readonly layer: Layer.Layer<SessionStore, PersistenceFailed>
  readonly note: string
  readonly cleanup: () => void
}> => {
  if (store !== "embedded" && store !== "postgres") {
    return refuse(`--store must be memory, embedded or postgres, not "${store}"`)
  }
  const { Database, Embedded, SqlStore } = await import("corral/sql")
  if (store === "embedded") {
    // A fresh on-disk data directory, as a real embedded deployment has (not `memory://`).
    const dataDir = mkdtempSync(join(tmpdir(), "corral-bench-"))
    return {
      layer: SqlStore.layer().pipe(Layer.provide(Embedded.layerEmbedded({ dataDir }))),
      note: "embedded PGlite in a fresh temporary data directory, SqlStore with its default group commit",
      cleanup: () => rmSync(dataDir, { recursive: true, force: true })
    }
  }
  const url = Effect.runSync(Config.option(Config.redacted("DATABASE_URL")))
  if (Option.isNone(url)) {
    return refuse("--store postgres needs DATABASE_URL (for example: DATABASE_URL=$(bash .ci/postgres.sh))")
  }
  return {
    layer: SqlStore.layer().pipe(Layer.provide(Database.layerPostgres(url.value))),
    note: "Postgres at DATABASE_URL (pool of 10), SqlStore with its default group commit",
    cleanup: () => {}
  }
}

/** Which build of Corral the package names resolved to (`workload.ts`); a profiling bundle has no package to find. */
const buildNote = (): string => {
  try {
    return import.meta.resolve("corral").endsWith(".ts")
      ? "Corral from its TypeScript sources (--conditions=corral-source)"
      : "Corral from its package build (dist/, tsc's JavaScript, imported by package name)"
  } catch {
    return "Corral bundled from its sources (scripts/bench/profile.ts)"
  }
}

const finalTextOf = (entries: ReadonlyArray<TurnEntry>): string => {
  for (let i = entries.length - 1; i >= 0; i--) {
    const entry = entries[i]!
    if (entry.kind === "assistant") return entry.text
  }
  return "(no assistant turn)"
}

void Harness.main<SessionView, string>(async (options) => {
  const store = options.flags.get("store") ?? "memory"
  if (store !== "memory" && options.scenario === "C") refuse("scenario C measures the memory store only")
  const sql = store === "memory" ? undefined : await sqlStore(store)
  const tracer = options.flags.get("tracer") ?? "on"
  const passivate = options.flags.get("passivate") === "true"
  // C keeps every actor live while it is measured (an hour is far longer than the run); `--passivate` instead
  // lets them all go idle so that only the store's share is left.
  const idleTimeout: Duration.DurationInput | undefined = options.scenario !== "C"
    ? undefined
    : passivate
    ? "200 millis"
    : "1 hour"
  const supervision: { readonly idleTimeout?: Duration.DurationInput } = idleTimeout === undefined
    ? {}
    : { idleTimeout }
  const corralLayer = sql === undefined
    ? Corral.layerMemory({
      providers: [agentModel],
      tiers: { history: [historyModel] },
      tools: [echoTool],
      ...supervision
    })
    // The same composition as `layerMemory`, over the SQL store instead of the memory one.
    : Corral.layer(supervision).pipe(
      Layer.provide(Layer.mergeAll(
        LiveEvents.layer,
        ToolRegistry.layer([echoTool]),
        Layer.succeed(Providers, Providers.fromRoutes({ default: [agentModel], history: [historyModel] }))
      )),
      Layer.provide(sql.layer)
    )
  // `--count-fibers`: a diagnostic: counts every fiber the runtime starts and says, at exit, how many per model turn.
  const countFibers = options.flags.get("count-fibers") === "true"
  let fibers = 0
  if (countFibers) {
    process.on("exit", () =>
      process.stderr.write(
        `fibers started: ${fibers} over ${modelCalls} model turns (${
          (fibers / Math.max(1, modelCalls)).toFixed(1)
        } per turn)\n`
      ))
  }
  // `--count-ops`: a diagnostic: counts Effect's run-loop instructions by opcode and by site (internal/opCount.ts),
  // and prints them per model turn at exit, with the top `--count-ops-top` sites (default 40). Timings are void.
  if (options.flags.get("count-ops") === "true") {
    const ops = await OpCount.start()
    const top = Number(options.flags.get("count-ops-top") ?? "40")
    process.on("exit", () => process.stderr.write(ops.report(modelCalls, top)))
  }
  const counting = new (class extends EffectSupervisor.AbstractSupervisor<void> {
    value = Effect.void
    override onStart() {
      fibers++
    }
  })()
  // `--otlp URL`: telemetry on, exporting spans and metrics to an OTLP/HTTP receiver at URL (scripts/bench/otlp-sink.ts).
  const otlp = options.flags.get("otlp")
  // `--sampler NAME` (with `--otlp`): the trace sampler, as OTEL_TRACES_SAMPLER names it (default parentbased_always_on).
  const sampler = options.flags.get("sampler") as Telemetry.Settings["sampler"] | undefined
  // `--protocol http/json|http/protobuf` (with `--otlp`): the OTLP encoding (default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf).
  const protocol = options.flags.get("protocol") as Telemetry.Settings["protocol"] | undefined
  // Provided UNDER Corral: the actors are forked while Corral's layers are built, and take its tracer (and the
  // fiber counter) from there.
  const layer = Layer.merge(
    otlp === undefined
      ? corralLayer
      : Layer.provideMerge(
        corralLayer,
        // The standard variables apply (`OTEL_BSP_*` among them); the flags win.
        Layer.unwrapEffect(Effect.map(Telemetry.settingsConfig, (settings) =>
          Telemetry.layer({
            ...settings,
            endpoint: otlp,
            ...(sampler === undefined ? {} : { sampler }),
            ...(protocol === undefined ? {} : { protocol })
          })))
      ),
    tracer === "off" ? Layer.setTracerEnabled(false) : Layer.empty
  ).pipe(Layer.provide(countFibers ? EffectSupervisor.addSupervisor(counting) : Layer.empty))
  const runtime = ManagedRuntime.make(layer)
  const corral = await runtime.runPromise(Corral)
  await runtime.runPromise(
    Effect.zipRight(corral.publishAgent(principal, agent), corral.publishAgent(principal, holder))
  )

  const run = (sid: number) => corral.run(principal, { agentId: "bench", scope, prompt: `session:${sid}` })

  const createHeld = (sid: number) =>
    Effect.gen(function*() {
      const opened = yield* corral.run(principal, {
        agentId: "holder",
        scope,
        prompt: Harness.fresh(Harness.historyText(sid, 0))
      })
      for (let j = 2; j < Harness.HISTORY; j += 2) {
        const landed = yield* corral.continue(principal, opened.id, Harness.fresh(Harness.historyText(sid, j)))
        if (landed.exitReason !== "completed") return yield* Effect.dieMessage(`burst ${j / 2}: ${landed.exitReason}`)
      }
      return opened.id
    })

  const build = buildNote()
  const notes = [
    build,
    sql === undefined
      ? "store memory: Corral.layerMemory (memory store, live events, in-process ToolRegistry with ajv validation)"
      : `store ${store}: Corral.layer over ${sql.note} (live events, in-process ToolRegistry with ajv validation)`,
    "agent finalize: \"transcript\" (the landing writes the report from the transcript: no extra model call, " +
    "so the model counter grows by exactly 11 per session); limits.modelCallsPerBurst = 11",
    "ManagedRuntime built once; one Corral.run per session through runtime.runPromise; B: Effect.forEach " +
    "with concurrency \"unbounded\"; tool calls of a turn run with concurrency \"unbounded\" (Corral's default)",
    otlp !== undefined
      ? `telemetry on: Telemetry.layer exporting spans (batched) and metrics over OTLP/HTTP ${
        protocol === "http/protobuf" ? "protobuf" : "JSON"
      } to ${otlp}; each timed batch ends when the processor has exported every span it made (Telemetry.flush)` +
        (sampler === undefined ? "" : `, sampler ${sampler}`)
      : tracer === "off"
      ? "tracer disabled (Layer.setTracerEnabled(false)): no span objects at all"
      : "no telemetry layer: Corral's spans are off (telemetry/Tracing: Effect's tracer is disabled around its " +
        "work), nothing is exported",
    "the memory store keeps every session's transcript and trajectory for the life of the process; actors of " +
    `finished sessions stay live until their idle timeout (${idleTimeout ?? "5 minutes, the default"})`
  ].join("; ")

  return {
    framework: "corral",
    versions: versions(),
    notes,
    modelCalls: () => modelCalls,
    toolCalls: () => toolCalls,
    session: (sid) => runtime.runPromise(run(sid)),
    burst: (sids) => runtime.runPromise(Effect.forEach(sids, run, { concurrency: "unbounded" })),
    inspect: (view) =>
      runtime.runPromise(Effect.map(corral.turns(principal, view.id), (turns) => {
        const problem = view.exitReason !== "completed"
          ? `exit reason ${view.exitReason}`
          : view.modelCalls !== Harness.TURNS || view.toolCalls !== Harness.TOOL_CALLS
          ? `Corral counted ${view.modelCalls} model and ${view.toolCalls} tool calls`
          : undefined
        const finalText = finalTextOf(turns.map((t) => t.entry))
        return problem === undefined ? { finalText } : { finalText, problem }
      })),
    held: {
      what: passivate
        ? "per session, what Corral's memory store keeps after a run + 9 continues (session record with state " +
          "and last report, 20 turns, 10 trajectories) with every actor passivated (idleTimeout 200 ms, measured " +
          "after Supervisor.live() reached 0); the host keeps the session ids"
        : "per session, everything Corral holds for a live session after a run + 9 continues: the memory " +
          "store's session record (state, last report), its 20 turns and 10 trajectories, plus the live actor " +
          "(its state, an empty mailbox and the conversation array; no fiber while idle); idleTimeout 1 hour so no actor passivates during " +
          "the measurement; the host keeps the session ids",
      create: (sid) => runtime.runPromise(createHeld(sid)),
      read: (id) =>
        runtime.runPromise(
          Effect.map(corral.turns(principal, id), (turns) =>
            turns.map(({ entry }) =>
              entry.kind === "user" || entry.kind === "assistant"
                ? { role: entry.kind, text: entry.text }
                : { role: "assistant" as const, text: `(a ${entry.kind} entry)` }
            ))
        ),
      ...(passivate
        ? {
          settle: async () => {
            const started = Date.now()
            const live = () => runtime.runPromise(Effect.map(Supervisor, (s) => s.live()))
            while ((await live()) > 0 && Date.now() - started < 60_000) {
              await new Promise((resolve) => setTimeout(resolve, 50))
            }
            return { live_actors: await live(), passivated: true }
          }
        }
        : {})
    },
    ...(otlp === undefined ? {} : { drain: () => runtime.runPromise(Telemetry.flush) }),
    close: async () => {
      await runtime.dispose()
      sql?.cleanup()
    }
  }
})
