/**
 * RailEvents — every rail decision of a burst as a span event on its `invoke_agent` span, derived from the ONE
 * schema the trajectory records (`RailDecision` in domain/Trajectory): the trace and the transcript tell one story,
 * and a new decision kind is an event by construction.
 *
 * An event is named `corral.rail.<kind>` (`corral.rail.retry`, `corral.rail.failover`, `corral.rail.exit`, …), is
 * stamped with the decision's own time (`at`), and carries every number of the decision as a
 * `corral.rail.<field>` attribute (snake_case); the error kind of a retry or failover is `error.type`. Approval
 * decisions come from the trajectory's handler records (a person approved or rejected a write).
 */
import type { RailDecision, ToolCallRecord } from "../domain/Trajectory.js"
import type { Attributes } from "./Spans.js"

/** One span event: name, time (epoch ms) and attributes. */
export interface RailEvent {
  readonly name: string
  readonly at: number
  readonly attributes: Attributes
}

const snake = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)

/** The span event of one rail decision. */
export const fromDecision = (decision: RailDecision): RailEvent => {
  const attributes: Attributes = {}
  for (const [key, value] of Object.entries(decision)) {
    if (key === "_tag" || key === "at" || value === undefined) continue
    if (key === "kind") attributes["error.type"] = String(value)
    else attributes[`corral.rail.${snake(key)}`] = typeof value === "object" ? JSON.stringify(value) : value
  }
  return { name: `corral.rail.${decision._tag}`, at: decision.at, attributes }
}

/** The span event of a write a person decided (a handler record of the trajectory), at `at`. */
export const fromApproval = (record: ToolCallRecord, at: number): RailEvent => ({
  name: "corral.rail.approval",
  at: record.startedAt ?? at,
  attributes: {
    "corral.rail.call_id": record.callId,
    "corral.rail.tool": record.name,
    "corral.rail.decision": record.status === "not_executed" ? "reject" : "approve",
    "corral.rail.status": record.status
  }
})

/**
 * The span event of a decision the session refused (a forged, spent, expired or another user's token, or a second
 * decision of a decided write): the same refusal the transcript's `Approvals` notice states, at `at`.
 */
export const fromRefusal = (refusal: {
  readonly reason: string
  readonly decision: "approve" | "reject"
  readonly callId?: string | undefined
  readonly notice: string
}, at: number): RailEvent => ({
  name: "corral.rail.approval_refused",
  at,
  attributes: {
    "corral.rail.reason": refusal.reason,
    "corral.rail.decision": refusal.decision,
    "corral.rail.call_id": refusal.callId,
    "corral.rail.notice": refusal.notice
  }
})

/** Every event of a burst, in order: the approvals it opened with, then its decisions. */
export const ofBurst = (
  decisions: ReadonlyArray<RailDecision>,
  toolCalls: ReadonlyArray<ToolCallRecord>,
  startedAt: number
): ReadonlyArray<RailEvent> => [
  ...toolCalls.filter((c) => c.origin === "handler").map((c) => fromApproval(c, startedAt)),
  ...decisions.map(fromDecision)
]
