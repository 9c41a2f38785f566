/**
 * The bounded loop: one burst, from the opening message to exactly one exit reason.
 *
 * This file only orchestrates; every bound lives in a rail (`rails/`), every effect behind a port, and what ends a
 * burst is the exit policy's to say (`rails/ExitPolicy`): the loop holds no precedence of its own. Each iteration
 * asks `ModelCall.next` (whose gate asks the policy's `before_model` checks), reads the reply through `ReplyPolicy`,
 * persists the assistant turn BEFORE any tool runs, and hands tool calls to `ToolCall.runTurn` (which asks the
 * `after_tools` checks). Iterations return a small step union; the loop ends only on an `Exit` step carrying the
 * decision, and an invariant guard turns a step without a valid reason into a defect that the tests catch.
 */
import { Clock, Duration, Effect, Option, Schema } from "effect"
import type { PersistenceFailed } from "../domain/Errors.js"
import { ExitReason } from "../domain/ExitReason.js"
import type { ModelReply, ToolCall as ToolCallEntry, Turn, TurnEntry } from "../domain/Message.js"
import * as ActiveTime from "../rails/ActiveTime.js"
import type * as ExitPolicy from "../rails/ExitPolicy.js"
import * as ReplyPolicy from "../rails/ReplyPolicy.js"
import * as Spans from "../telemetry/Spans.js"
import * as Burst from "./Burst.js"
import * as ModelCall from "./ModelCall.js"
import * as ToolCall from "./ToolCall.js"
import * as Transcript from "./Transcript.js"

/** What one iteration decided. */
export type Step =
  | { readonly _tag: "Continue" }
  | { readonly _tag: "Exit"; readonly decision: ExitPolicy.Decision }

const next: Step = { _tag: "Continue" }
const exit = (decision: ExitPolicy.Decision): Step => ({ _tag: "Exit", decision })
const replied = (reason: ExitReason, notice: string): Step => exit({ check: "ReplyPolicy", reason, notice })

/** Persists one entry of this burst and adds it to the conversation. */
export const record = (
  ctx: Burst.Context,
  burst: Burst.Burst,
  entry: TurnEntry
): Effect.Effect<void, PersistenceFailed> =>
  // The turn's time read in place from the fiber's clock (the `Clock` service, so a TestClock moves it).
  Effect.clockWith((clock) =>
    Effect.flatMap(
      Transcript.append(ctx.ports, ctx.session.id, entry, clock.unsafeCurrentTimeMillis(), ctx.limits.persistTimeoutMs),
      (turn) => {
        if (turn.closed === undefined) {
          Burst.persisted(burst, turn.seq, entry)
          burst.touch()
          return Effect.void
        }
        return resync(ctx, burst, turn.closed, turn.seq, entry)
      }
    )
  )

/**
 * The store closed calls left without results before `entry` (store/Pairing.ts). Another writer stored them (a
 * burst cut on another node, or by a stop), so the conversation this burst started from may lack them: it is read
 * again from the store, as a loaded actor reads it, and the burst goes on from there.
 */
const resync = (ctx: Burst.Context, burst: Burst.Burst, closed: Turn, seq: number, entry: TurnEntry) =>
  Effect.map(ctx.ports.store.turns(ctx.session.principal.orgId, ctx.session.id), (turns) => {
    const before = turns.filter((t) => t.seq < closed.seq)
    const replaced = burst.recorded.length === 0
    // Only the opening of a burst can follow open calls; should an entry in its middle ever do, keep what it recorded.
    if (replaced) {
      burst.history = Transcript.history(before)
      burst.messages = burst.history.slice()
    }
    Burst.persisted(burst, closed.seq, closed.entry)
    Burst.persisted(burst, seq, entry)
    burst.touch()
  })

const notice = (rail: string, text: string): TurnEntry => ({ kind: "notice", rail, text })

const nudged = (burst: Burst.Burst, cause: "empty" | "length") =>
  Effect.map(Clock.currentTimeMillis, (at) => Burst.decided(burst, { _tag: "nudge", at, cause }))

// Most assistant turns call no tool, and a host keeps every turn (the memory store, the live actor): they share one
// empty list instead of one each.
const noCalls: ReadonlyArray<never> = Object.freeze([])

/**
 * The assistant turn for `reply`: its text, the calls that will run, and the reasoning the provider returned
 * (stored with the turn before any tool runs, so the provider can be sent it back with the results).
 */
const assistant = (
  reply: ModelReply,
  toolCalls: ReadonlyArray<ToolCallEntry>,
  finishReason: ModelReply["finishReason"]
): TurnEntry =>
  reply.reasoning === undefined || reply.reasoning.length === 0
    ? { kind: "assistant", text: reply.text, toolCalls, finishReason }
    : { kind: "assistant", text: reply.text, toolCalls, finishReason, reasoning: reply.reasoning }

/**
 * One iteration of DESIGN §3 steps 2-9. `fnUntraced`: the generator function is made once, here, not on every call
 * (this runs for every model turn; the cost of the alternative is in docs/benchmarks.md, "Notes moved from the code").
 */
const iteration: (ctx: Burst.Context, burst: Burst.Burst) => Effect.Effect<Step, PersistenceFailed> = Effect
  .fnUntraced(function*(ctx: Burst.Context, burst: Burst.Burst) {
    const outcome = yield* ModelCall.next(ctx, burst)
    if (outcome._tag === "Exit") return exit(outcome.decision)
    const reply = outcome.reply
    const verdict = ReplyPolicy.classify(reply)
    switch (verdict._tag) {
      case "Filtered":
      case "Refused": {
        yield* record(ctx, burst, assistant(reply, noCalls, reply.finishReason))
        return verdict._tag === "Filtered"
          ? replied("filtered", "the provider filtered the reply")
          : replied("refused", "the model refused")
      }
      case "Truncated": {
        // The calls of a cut reply may carry cut arguments: drop them rather than run something half-specified.
        yield* record(ctx, burst, assistant(reply, noCalls, "length"))
        yield* nudged(burst, "length")
        yield* record(ctx, burst, notice("ReplyPolicy", ReplyPolicy.lengthNudge))
        return next
      }
      case "Empty": {
        burst.empties += 1
        if (ReplyPolicy.emptyExhausted(burst.empties, ctx.limits)) {
          return replied("empty_exhausted", `${burst.empties} empty replies (emptyNudges ${ctx.limits.emptyNudges})`)
        }
        yield* nudged(burst, "empty")
        yield* record(ctx, burst, notice("ReplyPolicy", ReplyPolicy.emptyNudge))
        return next
      }
      case "Final": {
        yield* record(ctx, burst, assistant(reply, noCalls, reply.finishReason))
        return replied("completed", "the model answered without tool calls")
      }
      case "ToolCalls": {
        yield* record(ctx, burst, assistant(reply, verdict.calls, reply.finishReason))
        const forced = yield* ToolCall.runTurn(ctx, burst, verdict.calls)
        return Option.isSome(forced) ? exit(forced.value) : next
      }
    }
  })

const isExitReason = Schema.is(ExitReason)

const timedOut: ExitPolicy.Decision = {
  check: "ActiveTime",
  reason: "deadline",
  notice: "the active time ran out during a model or tool call"
}

/**
 * Runs one burst to what ends it (an exit-policy check, the reply, a provider failure, or the deadline timer).
 * `opening` (the user message that opened the burst) is persisted before the first model call. The whole burst is
 * bounded by the active time left: when it runs out mid-call, the burst exits `deadline` (tool calls in flight are
 * stopped and recorded as such). Fails only on infrastructure.
 */
export const runBurst = (
  ctx: Burst.Context,
  burst: Burst.Burst,
  opening: TurnEntry | undefined
): Effect.Effect<ExitPolicy.Decision, PersistenceFailed> =>
  Effect.gen(function*() {
    if (opening !== undefined) yield* record(ctx, burst, opening)
    const now = yield* Clock.currentTimeMillis
    const remaining = ActiveTime.remainingMs(ctx.limits, burst.activeBefore, burst.startedAt, now)
    const loop = Effect.gen(function*() {
      let step: Step = next
      while (step._tag === "Continue") step = yield* iteration(ctx, burst)
      return step.decision
    })
    // The loop is the whole run of the fiber the deadline races it on: that fiber's end guards the spans of its
    // model calls (`Spans.guardFiber`).
    const decision = yield* Spans.guardFiber(loop).pipe(
      Effect.timeoutTo({
        duration: Duration.millis(remaining),
        onTimeout: () => timedOut,
        onSuccess: (decision) => decision
      })
    )
    // The invariant guard: exactly one valid exit reason per burst, or a defect.
    if (!isExitReason(decision.reason)) {
      return yield* Effect.dieMessage(`burst ended without an exit reason: ${String(decision.reason)}`)
    }
    return decision
  })
