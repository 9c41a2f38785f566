/**
 * `corral replay SESSION_ID` — prints a stored session: its transcript turn by turn (the same rendering as
 * `corral run`), then its last exit reason and report. With `--verify` it re-runs every burst's loop against what
 * was recorded (`session/Replay`) and prints, per burst, what was verified or the first divergence; exit code 1 on a
 * divergence. Reads the configured store, or a running server with `--server`.
 */
import { Effect, Either, Option } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { Turn } from "../domain/Message.js"
import type { Session, SessionView } from "../domain/Session.js"
import { initialState, view } from "../domain/Session.js"
import type { Trajectory } from "../domain/Trajectory.js"
import * as Wiring from "../server/Wiring.js"
import * as Replay from "../session/Replay.js"
import { SessionStore } from "../store/SessionStore.js"
import type * as Args from "./Args.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"
import * as Printer from "./Printer.js"
import * as Remote from "./Remote.js"

const usage =
  "Usage: corral replay SESSION_ID [--verify [--time-slack MS]] [--server URL] [--org ORG] [--schema NAME] [--config FILE]"

const print = (session: SessionView, turns: ReadonlyArray<Turn>) =>
  Effect.gen(function*() {
    yield* Output.line(
      `session ${session.id} · agent ${session.agentId} v${session.agentVersion} · scope ${session.scope} · ` +
        `${session.status} · ${session.bursts} burst(s)`
    )
    for (const turn of turns) {
      yield* Output.lines(Printer.lines({ _tag: "turn", sessionId: turn.sessionId, seq: turn.seq, turn }))
    }
    if (session.exitReason !== undefined) yield* Output.line(`    exit       ${session.exitReason}`)
    if (session.report !== undefined) yield* Output.lines(Printer.report(session.report))
  })

/** What both sources give: the session as shown, its transcript, and — for `--verify` — what a replay reads. */
interface Loaded {
  readonly session: SessionView
  readonly turns: ReadonlyArray<Turn>
  readonly recorded: () => Effect.Effect<Replay.RecordedSession, unknown>
}

const local = (args: Args.Parsed, sessionId: string) =>
  Effect.gen(function*() {
    const settings = yield* Command.withSchema(args, yield* Command.settings(args))
    const by = yield* Command.principal(args, settings)
    return yield* Effect.provide(
      Effect.gen(function*() {
        const store = yield* SessionStore
        const found = yield* store.getSession(by.orgId, sessionId)
        if (Option.isNone(found)) return yield* Effect.fail(`no session ${sessionId} in org ${by.orgId}`)
        const recorded = args.booleans.has("verify") ? yield* Replay.load(by.orgId, sessionId) : undefined
        const loaded: Loaded = {
          session: view(found.value),
          turns: yield* store.turns(by.orgId, sessionId),
          recorded: () => recorded === undefined ? Effect.fail("not loaded") : Effect.succeed(recorded)
        }
        return loaded
      }),
      Wiring.store(settings)
    )
  })

const remote = (url: string, args: Args.Parsed, sessionId: string) =>
  Effect.gen(function*() {
    const { apiKey } = yield* Remote.target(args)
    const client = yield* Remote.client(url, apiKey)
    const session = yield* client.sessions.getSession({ path: { id: sessionId } })
    const { turns } = yield* client.sessions.turns({ path: { id: sessionId }, urlParams: {} })
    const recorded = () =>
      Effect.gen(function*() {
        const { trajectories } = yield* client.sessions.trajectory({ path: { id: sessionId } })
        const spec = yield* client.agents.getAgent({
          path: { id: session.agentId },
          urlParams: { version: session.agentVersion }
        })
        return fromView(session, turns, trajectories, spec)
      })
    const loaded: Loaded = { session, turns, recorded }
    return loaded
  })

/** A session read over HTTP, as replay reads it (the principal is the one its bursts recorded). */
const fromView = (
  shown: SessionView,
  turns: ReadonlyArray<Turn>,
  trajectories: ReadonlyArray<Trajectory>,
  spec: AgentSpec
): Replay.RecordedSession => {
  const first = trajectories[0]
  const session = {
    id: shown.id,
    principal: first?.principal,
    scope: shown.scope,
    agentId: shown.agentId,
    agentVersion: shown.agentVersion,
    createdAt: shown.createdAt,
    updatedAt: shown.updatedAt,
    state: {
      ...initialState,
      ...(shown.report === undefined ? {} : { report: shown.report }),
      ...(shown.exitReason === undefined ? {} : { lastExitReason: shown.exitReason })
    }
  } as Session
  return {
    session,
    turns,
    trajectories: [...trajectories].sort((a, b) => a.startedAt - b.startedAt),
    specs: new Map([[spec.version, spec]])
  }
}

/** Prints what the replay of each burst showed; `true` when nothing diverged. */
const printVerdict = (results: ReadonlyArray<Replay.BurstResult>) =>
  Effect.gen(function*() {
    let verified = 0
    for (const [i, result] of results.entries()) {
      const n = `  burst ${i + 1}`
      switch (result._tag) {
        case "Verified": {
          verified += 1
          const what = `${result.attempts} attempt(s), ${result.toolCalls} tool call(s), ${result.decisions} ` +
            `rail decision(s), ${result.turns} turn(s)`
          yield* Output.line(
            `${n} ${result.runId} ${result.exitReason}: ${result.prefix ? "verified up to the crash" : "verified"}: ` +
              what
          )
          break
        }
        case "Skipped":
          yield* Output.line(`${n} ${result.runId}: not replayed: ${result.why}`)
          break
        case "Diverged": {
          const d = result.divergence
          yield* Output.line(`${n} ${d.runId}: DIVERGED at ${d.path}`)
          yield* Output.line(`      recorded: ${JSON.stringify(d.recorded)}`)
          yield* Output.line(`      replayed: ${JSON.stringify(d.replayed)}`)
        }
      }
    }
    const diverged = results.some((r) => r._tag === "Diverged")
    yield* Output.line(
      diverged
        ? `replay: diverged (${verified} burst(s) verified before the divergence)`
        : `replay: ${verified} of ${results.length} burst(s) verified, no divergence`
    )
    return !diverged
  })

const slackOf = (args: Args.Parsed): Effect.Effect<number, string> => {
  const raw = args.strings.get("time-slack")
  if (raw === undefined) return Effect.succeed(1000)
  const n = Number(raw)
  return Number.isInteger(n) && n >= 0
    ? Effect.succeed(n)
    : Effect.fail(`--time-slack: expected a whole number of milliseconds, got "${raw}"`)
}

/** The `replay` command: exit code 0 when the session was printed, 1 otherwise. */
export const replay: Command.Command = {
  name: "replay",
  options: {
    ...Command.common,
    server: "string",
    org: "string",
    verify: "boolean",
    "time-slack": "string",
    schema: "string"
  },
  help: [
    usage,
    "",
    "Prints the persisted transcript of SESSION_ID (user turns, replies and tool calls, tool results, rail notices),",
    "its last exit reason and its report.",
    "",
    "With --verify, re-runs every burst's loop from the stored agent spec version against what was recorded (model",
    "replies and errors attempt by attempt, tool results call by call, on a test clock driven by the recorded times)",
    "and compares every turn, attempt, tool call, rail decision, counter snapshot, the usage, the exit reason and the",
    "report; prints each burst's verdict, or the first divergence with its path, and exits 1 on a divergence.",
    "",
    "Options:",
    "  --verify        replay and compare (see above)",
    "  --time-slack MS how much later than the recorded one a replayed time may be (earlier is fine; default 1000:",
    "                  store writes took real time in the recording)",
    "  --server URL    read from a running server (also CORRAL_SERVER; key in CORRAL_API_KEY)",
    "  --org ORG       the session's org, locally (default: the local org, or the only configured org)",
    Command.schemaHelp,
    Command.commonHelp
  ].join("\n"),
  run: (args) =>
    Effect.gen(function*() {
      const [sessionId, ...rest] = args.positionals
      if (sessionId === undefined || rest.length > 0) return yield* Effect.fail(usage)
      const { url } = yield* Remote.target(args)
      const slack = yield* slackOf(args)
      const loaded = Option.isSome(url) ? yield* remote(url.value, args, sessionId) : yield* local(args, sessionId)
      yield* print(loaded.session, loaded.turns)
      if (!args.booleans.has("verify")) return 0
      const recorded = yield* loaded.recorded()
      yield* Output.line("")
      const clean = yield* printVerdict(yield* Replay.verifySession(recorded, { timeSlackMs: slack }))
      return clean ? 0 : 1
    }).pipe(
      Effect.either,
      Effect.flatMap(Either.match({
        onLeft: (error) => Effect.as(Output.error(`corral replay: ${Failure.describe(error)}`), 1),
        onRight: Effect.succeed
      }))
    )
}
