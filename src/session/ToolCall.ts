/**
 * The tool phase of one assistant turn: plan, dispatch, bound, persist.
 *
 * Order matters and is fixed: the assistant turn is already persisted (the loop did that); each call claims a
 * tool-call budget unit before dispatch; `tool_start` is published before dispatch; reads run concurrently while
 * writes become pending confirmations (collected across the whole turn); results are truncated, checked by the
 * repeat guard, and persisted together as ONE `tool_results` turn — also when the burst is interrupted midway, so
 * every call of the assistant turn always has exactly one result (the pairing invariant).
 */
import { Cause, Clock, Effect, Exit, Fiber, Option, Ref, Runtime } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { ToolCall, ToolResult } from "../domain/Message.js"
import type { ToolCallRecord } from "../domain/Trajectory.js"
import * as Budget from "../rails/Budget.js"
import * as ExitPolicy from "../rails/ExitPolicy.js"
import * as RepeatGuard from "../rails/RepeatGuard.js"
import * as Strikes from "../rails/Strikes.js"
import * as Truncate from "../rails/Truncate.js"
import * as TurnCap from "../rails/TurnCap.js"
import * as GenAi from "../telemetry/GenAi.js"
import type { ToolDef, ToolFailure, ToolOutcome } from "../tools/ToolExecutor.js"
import { capAttachments } from "../tools/ToolExecutor.js"
import * as Burst from "./Burst.js"
import * as ModelCall from "./ModelCall.js"
import * as Transcript from "./Transcript.js"

/** Strikes of bad tool use: the model named a tool that does not exist or sent arguments that cannot be used. */
const isStrike = (failure: ToolFailure | undefined): boolean =>
  failure === "unknown_tool" || failure === "invalid_json" || failure === "invalid_args"

type Slot = { readonly outcome: ToolOutcome; readonly status: ToolResult["status"] }

const unknownTool = (ctx: Burst.Context, name: string): Slot => ({
  status: "error",
  outcome: {
    isError: true,
    failure: "unknown_tool",
    content: `unknown tool "${name}". Available tools: ${
      ctx.toolSpecs.map((t) => t.name).join(", ") || "(none)"
    }. Call one of them by its exact name.`
  }
})

/** What a call still running when the burst ended is told (the burst was cancelled or ran out of active time). */
export const interruptedText =
  "the call was stopped before it finished (the burst was cancelled or ran out of active time)."

const interrupted: Slot = {
  status: "error",
  outcome: { isError: true, failure: "interrupted", content: interruptedText }
}

const validJsonObject = (text: string): boolean => {
  try {
    const value: unknown = JSON.parse(text)
    return typeof value === "object" && value !== null && !Array.isArray(value)
  } catch {
    return false
  }
}

/** What a call's trajectory record says beyond the call itself; optional fields absent when `undefined`. */
interface Recorded {
  readonly status: ToolCallRecord["status"]
  readonly durationMs: number
  readonly result: string
  readonly isError: boolean
  readonly failure?: ToolCallRecord["failure"] | undefined
  readonly startedAt?: number | undefined
  readonly output?: string | undefined
  readonly attachments?: ToolCallRecord["attachments"] | undefined
  readonly samples?: number | undefined
}

/**
 * The trajectory record of a call the model asked for. One literal, its optional fields last, so every record a host
 * keeps has the same shape whatever it ran into.
 */
const callRecord = (call: ToolCall, def: ToolDef | undefined, recorded: Recorded): ToolCallRecord => ({
  callId: call.id,
  name: call.name,
  origin: "model",
  effect: def?.effect ?? "unknown",
  source: def?.source ?? "none",
  status: recorded.status,
  durationMs: recorded.durationMs,
  arguments: call.arguments,
  result: recorded.result,
  isError: recorded.isError,
  ...(recorded.failure === undefined ? {} : { failure: recorded.failure }),
  ...(recorded.startedAt === undefined ? {} : { startedAt: recorded.startedAt }),
  ...(recorded.output === undefined ? {} : { output: recorded.output }),
  ...(recorded.attachments === undefined ? {} : { attachments: recorded.attachments }),
  ...(recorded.samples === undefined ? {} : { samples: recorded.samples })
})

/** What a turn's persisting reads: the plan, and what each call came to (`runTurn`). */
interface TurnState {
  readonly ctx: Burst.Context
  readonly burst: Burst.Burst
  readonly calls: ReadonlyArray<ToolCall>
  readonly run: ReadonlyArray<ToolCall>
  readonly surplus: ReadonlyArray<ToolCall>
  readonly slots: ReadonlyArray<Slot | undefined>
  readonly started: ReadonlyArray<number>
  readonly ended: ReadonlyArray<number>
  readonly samples: ReadonlyArray<ModelCall.SampleSlot | undefined>
  readonly budgetRefused: number
}

/**
 * Persists the turn's results at `now` as ONE `tool_results` turn (truncated, checked by the repeat guard, an
 * "interrupted" result for each call that had not finished) and asks the `after_tools` checks. Made once
 * (`fnUntraced`): see session/Loop's `iteration`.
 */
const persistTurn = Effect.fnUntraced(function*(state: TurnState, now: number) {
  const { burst, budgetRefused, calls, ctx, ended, run, samples, slots, started, surplus } = state
  const results: Array<ToolResult> = []
  const turnStrikes: Array<boolean> = []
  let repeats = 0
  for (let i = 0; i < run.length; i++) {
    const call = run[i]!
    const slot = slots[i] ?? interrupted
    const def = ctx.tools.get(call.name)
    const output = slot.outcome.content
    const cut = Truncate.truncate(output, ctx.limits.toolResultMaxBytes)
    let content = cut.text
    if (cut.truncated) {
      const bytes = Truncate.utf8Length(output)
      Burst.decided(burst, {
        _tag: "truncate",
        at: now,
        callId: call.id,
        tool: call.name,
        bytes,
        keptBytes: Truncate.utf8Length(content)
      })
    }
    // Strikes own bad tool use; the repeat guard watches calls that actually ran.
    const strike = isStrike(slot.outcome.failure)
    if ((slot.status === "ok" || slot.status === "error") && !strike) {
      const seen = RepeatGuard.observe(burst.repeat, call.name, call.arguments, output, ctx.limits)
      burst.repeat = seen.guard
      repeats = Math.max(repeats, seen.count)
      if (seen.verdict !== "ok") {
        content += `\n\n${RepeatGuard.warning(call.name, seen.count, ctx.limits.repeatHaltAt)}`
        Burst.decided(burst, {
          _tag: "repeat",
          at: now,
          callId: call.id,
          tool: call.name,
          count: seen.count,
          verdict: seen.verdict
        })
      }
    }
    turnStrikes.push(strike)
    // Images and audio: whole or not at all, within the same cap as the text (the notice says what was left out).
    const attached = capAttachments(slot.outcome.attachments, ctx.limits.toolResultMaxBytes)
    if (attached.notice !== undefined) content += `\n\n${attached.notice}`
    results.push({
      callId: call.id,
      name: call.name,
      content,
      isError: slot.outcome.isError,
      status: slot.status,
      ...(attached.kept.length === 0 ? {} : { attachments: attached.kept })
    })
    burst.toolCalls.push(callRecord(call, def, {
      status: slot.status,
      durationMs: started[i]! < 0 ? 0 : Math.max(0, (ended[i]! >= 0 ? ended[i]! : now) - started[i]!),
      result: content,
      isError: slot.outcome.isError,
      failure: slot.outcome.failure,
      startedAt: started[i]! < 0 ? undefined : started[i]!,
      output: content === output ? undefined : output,
      attachments: slot.outcome.attachments,
      samples: (samples[i]?.passed ?? 0) === 0 ? undefined : samples[i]!.passed
    }))
  }
  for (const call of surplus) {
    const result = TurnCap.surplusResult(call, ctx.limits.toolCallsPerTurn)
    results.push(result)
    burst.toolCalls.push(
      callRecord(call, ctx.tools.get(call.name), {
        status: result.status,
        durationMs: 0,
        result: result.content,
        isError: true
      })
    )
  }
  const entry = { kind: "tool_results" as const, results }
  const turn = yield* Transcript.append(ctx.ports, ctx.session.id, entry, now, ctx.limits.persistTimeoutMs)
  Burst.persisted(burst, turn.seq, entry)
  burst.touch()
  burst.strikes = Strikes.observeTurn(burst.strikes, turnStrikes)
  if (burst.strikes > 0 && turnStrikes.includes(true)) {
    Burst.decided(burst, { _tag: "strike", at: now, strikes: burst.strikes })
  }
  const chain = yield* Ref.get(burst.chain)
  return ExitPolicy.decide(
    ctx.policy,
    "after_tools",
    Burst.facts(ctx, burst, chain.exhausted, now, {
      calls: calls.length,
      repeats,
      pending: burst.pending.length,
      budgetRefused
    })
  )
})

/** The turn's plan, and the slots its dispatch fills in: one entry per call that is not surplus. */
interface Plan {
  readonly slots: Array<Slot | undefined>
  /** When each call was dispatched; -1: not dispatched (0 is a valid Clock time: the TestClock starts there). */
  readonly started: Array<number>
  /** Each call's own end: a turn's calls run concurrently, and each is recorded with its own duration. */
  readonly ended: Array<number>
  /** The indexes of the calls to run now (reads that claimed a budget unit), in order. */
  readonly dispatch: Array<number>
  /** Each dispatched call's sampler slot: how many samples its server had served (MCP sampling). */
  readonly samples: Array<ModelCall.SampleSlot | undefined>
  readonly budgetRefused: number
}

/**
 * Plans the turn's calls, sequentially so budget claims are deterministic and happen before any dispatch: an unknown
 * tool is answered at once, a write becomes a pending confirmation (or an error when its arguments are not a JSON
 * object), a read claims a tool-call budget unit and is dispatched, or is refused when none is left. A generator
 * `runTurn` delegates to (`yield*`), not an Effect of its own: it adds no step to the turn.
 */
function* plan(ctx: Burst.Context, burst: Burst.Burst, run: ReadonlyArray<ToolCall>) {
  const slots: Array<Slot | undefined> = new Array(run.length)
  const dispatch: Array<number> = []
  let budgetRefused = 0
  for (let i = 0; i < run.length; i++) {
    const call = run[i]!
    const def = ctx.tools.get(call.name)
    if (def === undefined) {
      slots[i] = unknownTool(ctx, call.name)
    } else if (def.effect === "write") {
      if (!validJsonObject(call.arguments)) {
        slots[i] = {
          status: "error",
          outcome: {
            isError: true,
            failure: "invalid_json",
            content: `arguments for tool "${call.name}" were not a valid JSON object: re-emit the call with ` +
              "corrected arguments: a single JSON object matching the tool's schema."
          }
        }
      } else {
        // Its approval token is issued at landing, with the other writes of the turn (session/Run).
        Burst.decided(burst, {
          _tag: "confirmation",
          at: yield* Clock.currentTimeMillis,
          callId: call.id,
          tool: call.name
        })
        burst.pending.push({
          callId: call.id,
          tool: call.name,
          arguments: call.arguments,
          turnSeq: burst.lastSeq,
          source: def.source
        })
        slots[i] = {
          status: "pending_confirmation",
          outcome: {
            isError: false,
            content: `"${call.name}" changes something, so it waits for a person's approval; it has not run yet.`
          }
        }
      }
    } else {
      const claimed = Budget.claimTool(burst.budget, ctx.limits)
      if (Option.isNone(claimed)) {
        budgetRefused += 1
        Burst.decided(burst, {
          _tag: "budget_refused",
          at: yield* Clock.currentTimeMillis,
          callId: call.id,
          tool: call.name
        })
        slots[i] = {
          status: "not_executed",
          outcome: { isError: true, content: Budget.budgetNotice(call.name, ctx.limits.toolCalls) }
        }
      } else {
        burst.budget = claimed.value
        dispatch.push(i)
      }
    }
  }
  const plan: Plan = {
    slots,
    started: new Array(run.length).fill(-1),
    ended: new Array(run.length).fill(-1),
    dispatch,
    samples: new Array(run.length),
    budgetRefused
  }
  return plan
}

/**
 * The turn's dispatched calls announced: their `tool_start` events go out first, on the turn's fiber, chained one
 * after the other (`forEach` would set up a loop of its own for a handful of events).
 */
const announce = (ctx: Burst.Context, burst: Burst.Burst, run: ReadonlyArray<ToolCall>, plan: Plan) =>
  Effect.suspend(() =>
    plan.dispatch.reduce<Effect.Effect<void>>((before, i) =>
      Effect.zipRight(
        before,
        ctx.ports.events.publish({
          _tag: "tool_start",
          sessionId: ctx.session.id,
          seq: burst.lastSeq,
          callId: run[i]!.id,
          name: run[i]!.name
        })
      ), Effect.void)
  )

/** A dispatched call still running after `startAll`, by its index in the turn. */
type InFlight = Array<readonly [number, Fiber.RuntimeFiber<ToolOutcome, never>]>

/**
 * Sync-first dispatch: every call starts in order, right away; a call that finishes without suspending costs no
 * fiber, and the ones that suspend keep running concurrently (in `inFlight`) and are joined by `joinAll`.
 */
const startAll = (
  ctx: Burst.Context,
  burst: Burst.Burst,
  run: ReadonlyArray<ToolCall>,
  plan: Plan,
  runSync: ReturnType<typeof Runtime.runSyncExit<never>>,
  inFlight: InFlight
) => {
  const toolCtx = {
    sessionId: ctx.session.id,
    principal: ctx.session.principal,
    scope: ctx.session.scope,
    // Core tools acting for several MCP servers (read_resource) reach only those of the agent's own tools.
    allowlist: ctx.spec.tools
  }
  const { ended, samples, slots, started } = plan
  return Effect.clockWith((clock) => {
    const now = clock.unsafeCurrentTimeMillis()
    for (const i of plan.dispatch) {
      const call = run[i]!
      started[i] = now
      // A tool server's sample is a model call of this session, charged to this call (MCP sampling), and lives
      // no longer than the call: once it ends, however it ends, the call's samples stop.
      const slot = ModelCall.slotFor(call.id)
      samples[i] = slot
      const exit = runSync(
        ctx.executor.call(call.name, call.arguments, {
          ...toolCtx,
          runId: ctx.runId,
          callId: call.id,
          timeoutMs: ctx.limits.toolTimeoutMs,
          sample: ModelCall.sample(ctx, burst, slot)
        }).pipe(GenAi.executeTool(call, ctx.tools.get(call.name), ctx.limits.toolResultMaxBytes))
      )
      // The call's samples stop when the call ends, however it ends: now if it ran to its end here, else when its
      // fiber ends (an observer, where `Effect.ensuring` in the call would be a region of its own on every call).
      if (Exit.isSuccess(exit)) {
        ModelCall.endSlot(slot)
        slots[i] = { outcome: exit.value, status: exit.value.isError ? "error" : "ok" }
        ended[i] = now
        continue
      }
      const defect = Cause.dieOption(exit.cause)
      if (Option.isSome(defect) && Runtime.isAsyncFiberException(defect.value)) {
        // The suspended fiber runs `executor.call`, which never fails.
        const fiber = defect.value.fiber as Fiber.RuntimeFiber<ToolOutcome, never>
        fiber.addObserver(() => ModelCall.endSlot(slot))
        inFlight.push([i, fiber])
        continue
      }
      ModelCall.endSlot(slot)
      // The executor broke its never-fail contract: a defect of the burst (`crashed`), not a tool result.
      return exit
    }
    return Effect.void
  })
}

/** Joins the calls that suspended in `startAll`; most turns' calls all finish there, and then nothing is set up. */
const joinAll = (plan: Plan, inFlight: InFlight) =>
  Effect.suspend(() =>
    inFlight.length === 0 ? Effect.void : Effect.forEach(
      inFlight,
      ([i, fiber]) =>
        Effect.flatMap(Fiber.join(fiber), (outcome) =>
          Effect.map(Clock.currentTimeMillis, (at) => {
            plan.slots[i] = { outcome, status: outcome.isError ? "error" : "ok" }
            plan.ended[i] = at
          })),
      { concurrency: "unbounded", discard: true }
    )
  )

/**
 * Runs the calls of one assistant turn and persists their results. Returns what ends the burst after the turn, if
 * anything: the first `after_tools` check of the exit policy that fires (by default `repeat_call_halt`,
 * `bad_tool_use`, `confirmation_pending`, `tool_budget`, in that order).
 */
export const runTurn: (
  ctx: Burst.Context,
  burst: Burst.Burst,
  calls: ReadonlyArray<ToolCall>
) => Effect.Effect<Option.Option<ExitPolicy.Decision>, PersistenceFailed> = Effect.fnUntraced(function*(
  ctx: Burst.Context,
  burst: Burst.Burst,
  calls: ReadonlyArray<ToolCall>
) {
  const { run, surplus } = TurnCap.split(calls, ctx.limits)
  if (surplus.length > 0) {
    Burst.decided(burst, { _tag: "turn_cap", at: yield* Clock.currentTimeMillis, surplus: surplus.length })
  }
  const planned = yield* plan(ctx, burst, run)
  const state: TurnState = { ctx, burst, calls, run, surplus, ...planned }
  const persist = Effect.clockWith((clock) => persistTurn(state, clock.unsafeCurrentTimeMillis()))
  const runSync = Runtime.runSyncExit(yield* Effect.runtime<never>())
  const inFlight: InFlight = []

  // If the burst is interrupted mid-dispatch, the calls still running are stopped, and the finished results plus an
  // "interrupted" result for each unfinished call are still persisted: the transcript stays paired and resumable.
  yield* announce(ctx, burst, run, planned)
  yield* Effect.zipRight(startAll(ctx, burst, run, planned, runSync, inFlight), joinAll(planned, inFlight)).pipe(
    Effect.onInterrupt(() =>
      Effect.zipRight(
        Effect.forEach(inFlight, ([, fiber]) => Fiber.interrupt(fiber), { discard: true }),
        Effect.ignore(persist)
      )
    )
  )
  return yield* persist
})
