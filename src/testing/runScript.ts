/**
 * `runScript`: an agent against scripted providers, in memory, under the TestClock — one burst, or a session of
 * several messages (run, continue, approve) so that rails which span bursts (per-session model calls, tool calls,
 * tokens, approvals) can be property-tested too. A one-burst runner cannot show a per-session ceiling giving way on
 * the third burst, nor an approved write escaping the tool-call count.
 */
import { Effect, Layer, Schema } from "effect"
import { Corral } from "../Corral.js"
import { AgentSpec } from "../domain/AgentSpec.js"
import type { CorralError, CorralErrorOf, PersistenceFailed } from "../domain/Errors.js"
import type { Turn } from "../domain/Message.js"
import type { SessionView } from "../domain/Session.js"
import type { Trajectory } from "../domain/Trajectory.js"
import type { ModelProvider } from "../model/ModelProvider.js"
import * as Scripted from "../model/Scripted.js"
import type { ToolHandler } from "../tools/ToolRegistry.js"
import * as Harness from "./Harness.js"

/** The options of a one-burst run. */
export interface Options {
  readonly script?: ReadonlyArray<Scripted.Step>
  readonly providers?: ReadonlyArray<ModelProvider>
  readonly tools?: ReadonlyArray<ToolHandler>
  readonly spec?: AgentSpec
  readonly prompt?: string
}

/** Opens the session with its first prompt (default: the harness's question). */
export interface Run {
  readonly _tag: "Run"
  readonly prompt?: string
}
/** A follow-up in the same session. */
export interface Continue {
  readonly _tag: "Continue"
  readonly text: string
}
/** Decides every write the session waits on, with the tokens it was given, through the real approval path. */
export interface Approve {
  readonly _tag: "Approve"
  readonly decision: "approve" | "reject"
}
/** One message of a session. */
export type Message = Run | Continue | Approve

/** The options of a session run: the first message opens the session, the others follow in order. */
export interface SessionOptions extends Omit<Options, "prompt"> {
  readonly messages: readonly [Run, ...ReadonlyArray<Continue | Approve>]
}

/** A message whose burst landed: the session after it, the burst's trajectory and the turns it added. */
export interface Landed {
  readonly _tag: "Landed"
  readonly message: Message
  readonly view: SessionView
  /** Absent when the message landed without a burst (an approval while other writes still wait). */
  readonly trajectory: Trajectory | undefined
  readonly turns: ReadonlyArray<Turn>
}
/** A message the service refused as the session stood (a follow-up while writes wait, a decided token). */
export interface Refused {
  readonly _tag: "Refused"
  readonly message: Message
  readonly error: CorralErrorOf<"InvalidSessionState" | "AlreadyDecided">
}
/** An `Approve` sent when no write waits: nothing to decide, nothing sent. */
export interface Skipped {
  readonly _tag: "Skipped"
  readonly message: Message
}
/** What became of one message. */
export type Outcome = Landed | Refused | Skipped

/** A session run: every message's outcome, the bursts that landed, and the session as it ends. */
export interface SessionRun {
  readonly spec: AgentSpec
  readonly outcomes: ReadonlyArray<Outcome>
  /** The outcomes that landed, in order. */
  readonly bursts: ReadonlyArray<Landed>
  /** The session after the last message (counters are per session). */
  readonly view: SessionView
  readonly turns: ReadonlyArray<Turn>
  readonly trajectories: ReadonlyArray<Trajectory>
}

const setup = (options: Omit<Options, "prompt">) => {
  const tools = options.tools ?? []
  return {
    tools,
    providers: options.providers ?? [Scripted.make({ script: options.script ?? [] })],
    spec: options.spec ?? Harness.agent({ tools: tools.map((t) => t.name) })
  }
}

const oneBurst = (options: Options): Effect.Effect<Harness.BurstRun, PersistenceFailed> => {
  const { providers, spec, tools } = setup(options)
  return Harness.drive(
    Harness.runBurst({ spec, ...(options.prompt === undefined ? {} : { prompt: options.prompt }) }).pipe(
      Effect.provide(Harness.layer({ providers, tools }))
    )
  )
}

const session = (options: SessionOptions): Effect.Effect<SessionRun, CorralError> => {
  const { providers, spec, tools } = setup(options)
  const by = Harness.principal
  const program = Effect.gen(function*() {
    const corral = yield* Corral
    yield* corral.publishAgent(by, Schema.encodeSync(AgentSpec)(spec))
    const [first, ...rest] = options.messages
    const outcomes: Array<Outcome> = []
    // The turns and trajectories a message added: everything after what was there before it.
    const landed = (message: Message, view: SessionView, seqBefore: number, runsBefore: number) =>
      Effect.gen(function*() {
        const turns = yield* corral.turns(by, view.id, seqBefore)
        const trajectories = yield* corral.trajectories(by, view.id)
        const outcome: Landed = { _tag: "Landed", message, view, trajectory: trajectories[runsBefore], turns }
        outcomes.push(outcome)
        return { seq: turns.at(-1)?.seq ?? seqBefore, runs: trajectories.length }
      })
    let view = yield* corral.run(by, {
      agentId: spec.id,
      scope: "incident:TEST-1",
      prompt: first.prompt ?? "Why is checkout failing?"
    })
    let at = yield* landed(first, view, 0, 0)
    for (const message of rest) {
      const sent: Effect.Effect<SessionView | undefined, CorralError> = message._tag === "Continue"
        ? corral.continue(by, view.id, message.text)
        : Effect.gen(function*() {
          if (view.pending.length === 0) return undefined
          // Tokens are shown once, in the response that issued them; a view without them gets fresh ones.
          const waiting = view.pending.every((p) => p.token !== undefined)
            ? view.pending
            : (yield* corral.renewApprovals(by, view.id)).pending
          // One decision per token: writes the model sent under one call id share a token, and one decision
          // settles them all (deciding the token again would be refused as already decided).
          const tokens = [...new Set(waiting.map((p) => p.token ?? ""))]
          let last = view
          for (const token of tokens) {
            if (last.status !== "awaiting_confirmation") break
            last = yield* corral.approve(by, view.id, token, message.decision)
          }
          return last
        })
      const result = yield* Effect.either(sent)
      if (result._tag === "Left") {
        const error = result.left
        if (error._tag !== "InvalidSessionState" && error._tag !== "AlreadyDecided") return yield* error
        outcomes.push({ _tag: "Refused", message, error })
        view = yield* corral.get(by, view.id)
      } else if (result.right === undefined) {
        outcomes.push({ _tag: "Skipped", message })
      } else {
        view = result.right
        at = yield* landed(message, view, at.seq, at.runs)
      }
    }
    const turns = yield* corral.turns(by, view.id)
    const trajectories = yield* corral.trajectories(by, view.id)
    return {
      spec,
      outcomes,
      bursts: outcomes.filter((o): o is Landed => o._tag === "Landed"),
      view: yield* corral.get(by, view.id),
      turns,
      trajectories
    }
  })
  return Harness.drive(
    program.pipe(Effect.provide(Corral.layer().pipe(Layer.provide(Harness.layer({ providers, tools })))))
  )
}

/**
 * Runs `spec` (default: a test agent allowed every given tool) against `script`, played by one scripted provider
 * (pass `providers` instead for a failover route). Time moves on by itself while a burst sleeps (backoffs,
 * Retry-After, timeouts), so run it inside `it.effect`.
 *
 * With `prompt` (or nothing): one burst, through the loop's lifecycle; fails only with `PersistenceFailed`.
 *
 * With `messages`: one session through the `Corral` service (in memory), the messages sent in order — `Run` opens
 * it, `Continue` follows up, `Approve` decides every write the session waits on with the tokens it issued. The
 * script plays on across bursts. A message the service refuses as the session stands (a follow-up while writes
 * wait) is a `Refused` outcome, an `Approve` with nothing waiting a `Skipped` one; any other failure fails the run.
 */
export function runScript(options: SessionOptions): Effect.Effect<SessionRun, CorralError>
export function runScript(options?: Options): Effect.Effect<Harness.BurstRun, PersistenceFailed>
export function runScript(
  options: Options | SessionOptions = {}
): Effect.Effect<SessionRun | Harness.BurstRun, CorralError> {
  return "messages" in options ? session(options) : oneBurst(options)
}
