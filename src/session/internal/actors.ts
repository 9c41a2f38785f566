/**
 * actors — the supervisor's map of live actors: one per session in use, built from the store on its first message
 * (`acquire` → `load`), passivated when idle (`passivation`), and the way a message reaches one (`offer`).
 *
 * An actor holds a fiber only while it has messages to process (SessionActor); its drain runs in the supervisor's
 * fiber set. Loading a session first saves a stopped burst's landing that is still waiting (it is older than
 * anything the new actor will do), closes calls a dead process left open, recovers a burst left `running`, and —
 * local hosting — delivers the accepted messages that still wait.
 */
import { Clock, Deferred, Duration, Effect, FiberId, Option } from "effect"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import { PersistenceFailed, SessionNotFound } from "../../domain/Errors.js"
import type { TurnEntry } from "../../domain/Message.js"
import type { Session } from "../../domain/Session.js"
import * as SessionActor from "../SessionActor.js"
import * as Transcript from "../Transcript.js"
import type { Host } from "./host.js"
import { takenIds } from "./host.js"
import { recover } from "./recovery.js"

/** Builds an actor for `session` and makes it the live one. */
export const spawn = (host: Host, session: Session, spec: AgentSpec, history: ReadonlyArray<TurnEntry>) =>
  Effect.map(Clock.currentTimeMillis, (now) => {
    const actor: SessionActor.Actor = SessionActor.make({
      session,
      spec,
      history,
      now,
      start: host.startDrain,
      onClose: host.forget,
      later: host.later,
      admission: host.admission
    })
    host.actors.set(session.id, actor)
    return actor
  })

/** An actor's drain, started in the supervisor's fiber set; false once the supervisor stops. */
export const startDrain = (host: Host, drain: Effect.Effect<void, never, SessionActor.Requirements>): boolean => {
  if (host.stopping()) return false
  host.runDrain(drain, { immediate: false })
  return true
}

/** A closed actor leaves the map (unless a successor took its place). */
export const forget = (host: Host, actor: SessionActor.Actor): void => {
  if (host.actors.get(actor.sessionId) === actor) host.actors.delete(actor.sessionId)
}

/**
 * Passivates every actor idle for the idle time, checked every quarter of it (so an actor goes within 1.25× of it);
 * it is rebuilt from the store on its next message. Runs forever: fork it in the supervisor's scope.
 */
export const passivation = (host: Host): Effect.Effect<never> => {
  const every = Duration.max(Duration.millis(1), Duration.unsafeDivide(host.idleTimeout, 4))
  const idleMillis = Duration.toMillis(host.idleTimeout)
  return Effect.forever(Effect.gen(function*() {
    yield* Effect.sleep(every)
    const now = yield* Clock.currentTimeMillis
    // Passivating deletes the actor from the map; deleting visited entries during iteration is safe for a Map.
    for (const actor of host.actors.values()) {
      const since = actor.idleSince()
      if (since !== undefined && now - since >= idleMillis) actor.passivate()
    }
  }))
}

/** Logs the calls left open mid-transcript, which the model is shown closed (`Transcript.history`). */
const logUnpaired = (sessionId: string, unpaired: ReadonlyArray<number>) =>
  Effect.logWarning(
    `session ${sessionId}: the calls of assistant turn(s) ${unpaired.join(", ")} have no results in the ` +
      "transcript (a later turn was stored right after them); they are closed as unknown_outcome in the " +
      "conversation the model is shown, and were not run again"
  ).pipe(Effect.annotateLogs({ sessionId, repair: "unpaired_calls", turns: unpaired.join(",") }))

/** Builds the session's actor from the store (see the module header). */
const load = (host: Host, orgId: string, sessionId: string) =>
  Effect.gen(function*() {
    const { store } = host
    // A stopped burst's landing first: the state it saves is older than anything the new actor will do.
    const waiting = host.unsettled.get(sessionId)
    if (waiting !== undefined) yield* waiting
    const found = yield* store.getSession(orgId, sessionId)
    if (Option.isNone(found)) return yield* new SessionNotFound({ sessionId })
    const { agentId, agentVersion } = found.value
    const spec = yield* store.getAgent(orgId, agentId, agentVersion)
    if (Option.isNone(spec)) {
      return yield* new PersistenceFailed({
        operation: "loadSession",
        message: `agent ${agentId} v${agentVersion} of session ${sessionId} is missing`
      })
    }
    const { persistTimeoutMs } = host.limitsOf(spec.value)
    const turns = yield* store.turns(orgId, sessionId)
    const entries = Transcript.history(turns)
    // Calls left open mid-transcript (stored before the store closed them itself): the model is shown them closed
    // (`history`), and the repair is logged with the session each time the session is loaded.
    const unpaired = Transcript.unpaired(turns)
    if (unpaired.length > 0) yield* logUnpaired(sessionId, unpaired)
    const now = yield* Clock.currentTimeMillis
    // A turn whose calls never got results (the process died mid-dispatch) is closed as unknown_outcome.
    const repair = SessionActor.repairTail(entries)
    if (Option.isSome(repair)) {
      yield* Transcript.append(host, sessionId, repair.value, now, persistTimeoutMs)
      entries.push(repair.value)
    }
    // Still `running` with no live actor: the actor that ran it stopped (an infrastructure failure).
    const { notice, session } = yield* recover(host, found.value, now, persistTimeoutMs)
    if (Option.isSome(notice)) entries.push(notice.value)
    const actor = yield* spawn(host, session, spec.value, entries)
    if (!host.clustered) {
      const inbox = yield* store.inbox(sessionId)
      if (inbox.length > 0) yield* host.deliverInbox(actor, takenIds(entries.map((entry) => ({ entry }))), inbox)
    }
    return actor
  })

/**
 * The session's live actor, or the one being loaded, or a new load (one at a time per session). The load runs in the
 * supervisor's fiber set, not on the caller's fiber: a caller interrupted part-way (a cluster entity stopped when its
 * shard moved, a client gone) must not leave the load unfinished, or every later caller would await it for ever.
 */
export const acquire = (host: Host, orgId: string, sessionId: string) =>
  Effect.suspend((): Effect.Effect<SessionActor.Actor, SessionNotFound | PersistenceFailed> => {
    const live = host.actors.get(sessionId)
    if (live !== undefined && !live.closed()) {
      return live.orgId === orgId ? Effect.succeed(live) : Effect.fail(new SessionNotFound({ sessionId }))
    }
    const pending = host.starting.get(sessionId)
    if (pending !== undefined) return Deferred.await(pending)
    const started = Deferred.unsafeMake<SessionActor.Actor, SessionNotFound | PersistenceFailed>(FiberId.none)
    host.starting.set(sessionId, started)
    // Whichever way the load ends (interrupted too: the supervisor is closing), it is no longer pending.
    const loading = load(host, orgId, sessionId).pipe(
      Effect.onExit((exit) =>
        Effect.zipRight(Effect.sync(() => host.starting.delete(sessionId)), Deferred.done(started, exit))
      ),
      Effect.ignore
    )
    if (host.stopping()) return Effect.zipRight(loading, Deferred.await(started))
    host.runDrain(loading, { immediate: false })
    return Deferred.await(started)
  })

/** Puts `message` in the session's mailbox (starting the actor if needed); its reply comes through the Deferred. */
export const offer = (host: Host, orgId: string, sessionId: string, message: SessionActor.Message) =>
  Effect.gen(function*() {
    // An actor may passivate between lookup and offer; then the next attempt starts its successor.
    for (let attempt = 0; attempt < 3; attempt++) {
      const actor = yield* host.acquire(orgId, sessionId)
      if (actor.orgId !== orgId) return yield* new SessionNotFound({ sessionId })
      const reply = actor.offer(message)
      if (Option.isSome(reply)) return reply.value
    }
    return yield* Effect.dieMessage(`could not deliver a message to session ${sessionId}`)
  })
