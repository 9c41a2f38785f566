/**
 * `corral replay SESSION_ID` — prints a stored session: its transcript turn by turn (the same rendering as
 * `corral run`), then its last exit reason and report. Reads the configured store, or a running server with
 * `--server`.
 */
import { Effect, Either, Option } from "effect"
import type { Turn } from "../domain/Message.js"
import type { SessionView } from "../domain/Session.js"
import { view } from "../domain/Session.js"
import * as Wiring from "../server/Wiring.js"
import { SessionStore } from "../store/SessionStore.js"
import type * as Args from "./Args.js"
import * as Command from "./Command.js"
import * as Failure from "./Failure.js"
import * as Output from "./Output.js"
import * as Printer from "./Printer.js"
import * as Remote from "./Remote.js"

const usage = "Usage: corral replay SESSION_ID [--server URL] [--org ORG] [--config FILE]"

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

const local = (args: Args.Parsed, sessionId: string) =>
  Effect.gen(function*() {
    const settings = yield* Command.settings(args)
    const by = yield* Command.principal(args, settings)
    return yield* Effect.provide(
      Effect.gen(function*() {
        const store = yield* SessionStore
        const found = yield* store.getSession(by.orgId, sessionId)
        if (Option.isNone(found)) return yield* Effect.fail(`no session ${sessionId} in org ${by.orgId}`)
        return { session: view(found.value), turns: yield* store.turns(by.orgId, sessionId) }
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
    return { session, turns }
  })

/** The `replay` command: exit code 0 when the session was printed, 1 otherwise. */
export const replay: Command.Command = {
  name: "replay",
  options: { ...Command.common, server: "string", org: "string" },
  help: [
    usage,
    "",
    "Prints the persisted transcript of SESSION_ID (user turns, replies and tool calls, tool results, rail notices),",
    "its last exit reason and its report.",
    "",
    "Options:",
    "  --server URL    read from a running server (also CORRAL_SERVER; key in CORRAL_API_KEY)",
    "  --org ORG       the session's org, locally (default: the local org, or the only configured org)",
    Command.commonHelp
  ].join("\n"),
  run: (args) =>
    Effect.gen(function*() {
      const [sessionId, ...rest] = args.positionals
      if (sessionId === undefined || rest.length > 0) return yield* Effect.fail(usage)
      const { url } = yield* Remote.target(args)
      const { session, turns } = Option.isSome(url)
        ? yield* remote(url.value, args, sessionId)
        : yield* local(args, sessionId)
      yield* print(session, turns)
      return 0
    }).pipe(
      Effect.either,
      Effect.flatMap(Either.match({
        onLeft: (error) => Effect.as(Output.error(`corral replay: ${Failure.describe(error)}`), 1),
        onRight: Effect.succeed
      }))
    )
}
