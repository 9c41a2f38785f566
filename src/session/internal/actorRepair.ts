/**
 * actorRepair — what a session's actor makes of work a dead process left unfinished: an assistant turn whose tool
 * results were never stored, and an approved write that was dispatched but whose outcome was never saved. Neither is
 * run again: each is `unknown_outcome`, and the model and the person are told so. Also the text a decided round of
 * writes is reported to the model with.
 */
import { Option } from "effect"
import type { TurnEntry } from "../../domain/Message.js"
import type { PendingConfirmation, Resolution, SessionState } from "../../domain/Session.js"
import { currentRound, undecided } from "../../domain/Session.js"

/** What the model and the person are told of a call that was running when the process died. */
const unknownOutcomeText = (tool: string): string =>
  `the process stopped while "${tool}" was running; its outcome is unknown and it was NOT run again. Check its ` +
  "effect before calling it again."

/**
 * The tool_results entry for an assistant turn whose results were never persisted (the process died mid-turn):
 * every call is `unknown_outcome` and is never re-run automatically. `None` when the tail is paired.
 */
export const repairTail = (entries: ReadonlyArray<TurnEntry>): Option.Option<TurnEntry> => {
  const last = entries.at(-1)
  if (last?.kind !== "assistant" || last.toolCalls.length === 0) return Option.none()
  return Option.some({
    kind: "tool_results",
    results: last.toolCalls.map((call) => ({
      callId: call.id,
      name: call.name,
      content: unknownOutcomeText(call.name),
      isError: true,
      status: "unknown_outcome" as const
    }))
  })
}

/** How a decided round of writes is reported to the model: each write, the person's decision and its outcome. */
export const resolutionText = (round: ReadonlyArray<PendingConfirmation>): string =>
  round.map((p) => {
    const r = p.resolution
    if (r?.decision !== "approve") {
      return `The person DECLINED "${p.tool}" with arguments ${p.arguments}. It did not run.`
    }
    if (r.status === "not_executed") {
      return `The person APPROVED "${p.tool}" with arguments ${p.arguments}, but it did NOT run: ${r.content}`
    }
    if (r.status === "unknown_outcome") {
      return `The person APPROVED "${p.tool}" with arguments ${p.arguments}. ${r.content}`
    }
    return `The person APPROVED "${p.tool}" with arguments ${p.arguments}. It ran${
      r.isError ? " and FAILED" : ""
    }. Its result:\n${r.content}`
  }).join("\n\n")

const unknownOutcome = (p: PendingConfirmation): Resolution => ({
  decision: "approve",
  content: unknownOutcomeText(p.tool),
  isError: true,
  status: "unknown_outcome"
})

/**
 * The repair of an approved write that was dispatched but whose outcome was never saved (the process died while it
 * ran): it is resolved `unknown_outcome`, never re-run, and a notice tells the model and the person. When other
 * writes still wait, the session waits for them; otherwise it is `interrupted` (resume with Continue) and the notice
 * carries the whole round's outcome, since the burst that would have reported it never ran.
 * `None` when nothing needs repair.
 */
export const repairPending = (
  state: SessionState
): Option.Option<{ readonly state: SessionState; readonly notice: TurnEntry }> => {
  if (!state.pending.some((p) => p.dispatchedAt !== undefined && p.resolution === undefined)) return Option.none()
  const pending = state.pending.map((p) =>
    p.dispatchedAt !== undefined && p.resolution === undefined
      ? { ...p, resolution: unknownOutcome(p), unreported: true as const }
      : p
  )
  const waiting = undecided({ pending }).length > 0
  const repaired = state.pending.filter((p) => p.dispatchedAt !== undefined && p.resolution === undefined)
  const text = waiting
    ? repaired.map((p) => `Approved "${p.tool}" with arguments ${p.arguments}: ${unknownOutcome(p).content}`)
      .join("\n")
    : `The approved write(s) were decided, but the process stopped before they were reported:\n\n${
      resolutionText(currentRound(pending))
    }`
  return Option.some({
    state: { ...state, pending, status: waiting ? "awaiting_confirmation" : "interrupted" },
    notice: { kind: "notice", rail: "Approvals", text }
  })
}
