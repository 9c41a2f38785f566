/**
 * recovery — what a process that died left behind, made whole: bursts left `running` (their trajectories closed as
 * `crashed` and billed, the session `interrupted`, an approved write dispatched but never resolved closed as
 * `unknown_outcome`), and accepted messages that never ran (delivered again).
 *
 * Local hosting runs both at start, over the whole store: this fresh process is the only host, so nothing `running`
 * has a live burst anywhere. In a cluster a session is recovered by its owner when it is loaded (actors.ts), and the
 * cluster redelivers unanswered messages itself.
 */
import { Clock, Effect, Option } from "effect"
import type { InboxMessage } from "../../domain/Inbox.js"
import type { TurnEntry } from "../../domain/Message.js"
import type { Session, SessionState } from "../../domain/Session.js"
import { Usage } from "../../domain/Usage.js"
import * as SessionActor from "../SessionActor.js"
import * as Transcript from "../Transcript.js"
import type { Host } from "./host.js"
import { takenIds } from "./host.js"

/**
 * Closes the trajectories a process left open (it died mid-burst) as `crashed`, and bills what they recorded:
 * usage and the counters are charged to the session whatever happened, so a crash never resets a ceiling.
 */
const closeOpen = (host: Host, session: Session, now: number) =>
  Effect.gen(function*() {
    const { store } = host
    let state: SessionState = { ...session.state, status: "interrupted" }
    const open = (yield* store.trajectories(session.principal.orgId, session.id)).filter((t) => t.open === true)
    for (const trajectory of open) {
      const { open: _, ...closed } = trajectory
      yield* store.saveTrajectory({
        ...closed,
        exitReason: "crashed",
        endedAt: Math.max(trajectory.endedAt, ...trajectory.modelCalls.map((a) => a.startedAt + a.durationMs)),
        errors: [...trajectory.errors, {
          code: "process.stopped",
          message: `the process stopped during the burst; closed by recovery at ${new Date(now).toISOString()}`
        }]
      })
      const last = trajectory.budgets.at(-1)
      state = {
        ...state,
        usage: Usage.add(state.usage, trajectory.usage),
        costMicros: state.costMicros + (trajectory.costMicros ?? 0),
        modelCalls: Math.max(state.modelCalls, last?.modelCallsSession ?? 0),
        toolCalls: Math.max(state.toolCalls, last?.toolCalls ?? 0),
        bursts: state.bursts + 1
      }
    }
    return state
  })

/**
 * Recovery of a session left `running` by a process that is gone: it is `interrupted` (resume with Continue), and
 * an approved write that was dispatched but never resolved is closed as unknown_outcome (never re-run), with a
 * notice in the transcript for the model and the person. Returns the recovered session and the notice, if any.
 */
export const recover = (host: Host, session: Session, now: number, persistTimeoutMs: number) =>
  Effect.gen(function*() {
    if (session.state.status !== "running") return { session, notice: Option.none<TurnEntry>() }
    let state: SessionState = yield* closeOpen(host, session, now)
    const repaired = SessionActor.repairPending(state)
    if (Option.isSome(repaired)) {
      yield* Transcript.append(host, session.id, repaired.value.notice, now, persistTimeoutMs)
      state = repaired.value.state
    }
    yield* host.store.saveState(session.id, state, now)
    return { session: { ...session, state, updatedAt: now }, notice: Option.map(repaired, (r) => r.notice) }
  })

/**
 * At start (local hosting): a session still `running` in the store has no live burst anywhere in this fresh
 * process, and is recovered.
 */
export const runningAtStart = (host: Host) =>
  Effect.gen(function*() {
    for (const session of yield* host.store.listRunning()) {
      const spec = yield* host.store.getAgent(session.principal.orgId, session.agentId, session.agentVersion)
      const { persistTimeoutMs } = host.limitsOf(Option.getOrUndefined(spec))
      yield* recover(host, session, yield* Clock.currentTimeMillis, persistTimeoutMs)
    }
  })

const groupBySession = (messages: ReadonlyArray<InboxMessage>): Map<string, Array<InboxMessage>> => {
  const groups = new Map<string, Array<InboxMessage>>()
  for (const message of messages) {
    const group = groups.get(message.sessionId)
    if (group === undefined) groups.set(message.sessionId, [message])
    else group.push(message)
  }
  return groups
}

/**
 * At start (local hosting), after the interrupted bursts are marked: accepted messages that never ran (their process
 * died between the acknowledgement and the burst) are delivered, in the background so the host can start serving
 * meanwhile. Messages whose user turn is stored already ran (the process died after taking them up): they are only
 * settled, and their sessions stay unloaded until someone sends to them.
 */
export const inboxAtStart = (host: Host) =>
  Effect.gen(function*() {
    const waiting = new Map<string, string>()
    for (const [sessionId, messages] of groupBySession(yield* host.store.inbox())) {
      const orgId = messages[0]!.orgId
      const taken = takenIds(yield* host.store.turns(orgId, sessionId))
      for (const message of messages) {
        if (taken.has(message.id)) yield* host.store.settle(sessionId, message.id)
        else waiting.set(sessionId, orgId)
      }
    }
    if (waiting.size === 0) return
    yield* Effect.logInfo(`recovery: accepted messages of ${waiting.size} session(s) never ran; running them`)
    host.runDrain(
      Effect.forEach(waiting, ([sessionId, orgId]) =>
        host.acquire(orgId, sessionId).pipe(
          Effect.catchAll((error) =>
            Effect.logError(`recovery: session ${sessionId}: accepted messages not delivered: ${error.message}`)
          )
        ), { discard: true, concurrency: 8 }),
      { immediate: false }
    )
  })
