/**
 * Landings — the `exit` and `report` events of bursts that already landed, rebuilt from the store.
 *
 * `exit` and `report` are published live only, so a client that subscribes after a landing never saw them: it read
 * the turns of earlier bursts but not how (or whether) each burst ended. Each closed trajectory holds its exit
 * reason and, since it is stored with it, its report; a trajectory written before that carries no report, and then
 * only the session's last landing is known (the session's report). An open trajectory is a burst still in flight
 * (or one a dead process left, closed by recovery later): it has not landed, so it replays nothing.
 */
import { Option } from "effect"
import type { InboxMessage } from "../domain/Inbox.js"
import type { Turn } from "../domain/Message.js"
import type { SessionState } from "../domain/Session.js"
import type { SessionEvent } from "../domain/SessionEvent.js"
import type { Trajectory } from "../domain/Trajectory.js"

/** One landed burst: its `exit` and, when stored, its `report`, placed after the turn `seq`. */
export interface Landing {
  readonly seq: number
  readonly runId: string
  readonly events: ReadonlyArray<SessionEvent>
}

/**
 * The landings of the closed trajectories, oldest first. A burst that stored no turn (its opening failed) sits right
 * after the landing before it, so the sequence never goes back.
 */
export const fromStore = (
  sessionId: string,
  trajectories: ReadonlyArray<Trajectory>,
  state: Option.Option<SessionState>
): ReadonlyArray<Landing> => {
  const closed = trajectories.filter((t) => t.open !== true)
  const landings: Array<Landing> = []
  let at = 0
  closed.forEach((t, i) => {
    at = Math.max(at, t.turns.to)
    const last = i === closed.length - 1
    // Records older than the stored report: the session's report is the last landing's, when its reason agrees.
    const report = t.report ??
      Option.getOrUndefined(
        Option.flatMap(state, (s) =>
          last && s.report !== undefined && s.report.exitReason === t.exitReason
            ? Option.some(s.report)
            : Option.none())
      )
    landings.push({
      seq: at,
      runId: t.runId,
      events: [
        { _tag: "exit", sessionId, seq: at, reason: t.exitReason },
        ...(report === undefined ? [] : [{ _tag: "report" as const, sessionId, seq: at, report }])
      ]
    })
  })
  return landings
}

/** Interleaves stored turns and landings: each landing right after its last turn. */
export const interleave = (
  turns: ReadonlyArray<Turn>,
  landings: ReadonlyArray<Landing>
): ReadonlyArray<SessionEvent> => {
  const out: Array<SessionEvent> = []
  let next = 0
  for (const turn of turns) {
    while (next < landings.length && landings[next]!.seq < turn.seq) out.push(...landings[next++]!.events)
    out.push({ _tag: "turn", sessionId: turn.sessionId, seq: turn.seq, turn })
  }
  while (next < landings.length) out.push(...landings[next++]!.events)
  return out
}

/**
 * Whether a burst runs or waits: the session is `running`, or an accepted message has no user turn yet (it is
 * stored and will run). A message whose user turn is stored was taken up; its row only waits to be settled.
 */
export const busy = (
  state: SessionState,
  inbox: ReadonlyArray<InboxMessage>,
  turns: ReadonlyArray<Turn>
): boolean => {
  if (state.status === "running") return true
  if (inbox.length === 0) return false
  const taken = new Set<string>()
  for (const { entry } of turns) if (entry.kind === "user" && entry.messageId !== undefined) taken.add(entry.messageId)
  return inbox.some((message) => !taken.has(message.id))
}
