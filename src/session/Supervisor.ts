/**
 * The local host of session actors: one actor per live session, started on demand from the store.
 *
 * An actor holds a fiber only while it has messages to process (SessionActor). One sweeper passivates actors idle for
 * the idle time (checked every quarter of it, so an actor goes within 1.25× of it) and they are rebuilt from the store
 * on their next message, so memory holds only sessions in use. At start the supervisor marks sessions whose burst was
 * in flight when a previous process died as `interrupted` (they resume with `Continue`). A defect inside a burst is
 * already landed as `crashed` by `Run.burst`; a defect in an actor itself reaches only that message's caller — every
 * other session keeps running.
 *
 * Actors' drain fibers live in a `FiberSet` tied to the supervisor's scope (closing the scope stops them all, and
 * their messages are answered with `PersistenceFailed`); the session-id → actor map is kept beside it.
 */
import { Clock, Context, Deferred, Duration, Effect, FiberId, FiberSet, Layer, Option } from "effect"
import type { Scope } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { InvalidSessionState } from "../domain/Errors.js"
import { PersistenceFailed, SessionNotFound } from "../domain/Errors.js"
import type { TurnEntry } from "../domain/Message.js"
import type { Session, SessionState } from "../domain/Session.js"
import { SessionEvents } from "../events/SessionEvents.js"
import { SessionStore } from "../store/SessionStore.js"
import * as SessionActor from "./SessionActor.js"
import * as Transcript from "./Transcript.js"

/** What hosting a session can fail with. */
export type SendError = SessionNotFound | PersistenceFailed | InvalidSessionState

/** The supervisor's service. */
export interface Service {
  /** Stores a new session and starts its actor (empty conversation). */
  readonly create: (session: Session, spec: AgentSpec) => Effect.Effect<void, PersistenceFailed>
  /** Delivers a message to the session's actor (starting it if needed) and awaits the processed result. */
  readonly send: (
    orgId: string,
    sessionId: string,
    message: SessionActor.Message
  ) => Effect.Effect<SessionActor.Reply, SendError>
  /** Cancels the session's running burst; `false` when none was running (or no actor is live). */
  readonly cancel: (orgId: string, sessionId: string) => Effect.Effect<boolean>
  /** The session as its live actor holds it, if one is live. */
  readonly peek: (orgId: string, sessionId: string) => Option.Option<Session>
  /** How many actors are live. */
  readonly live: () => number
  /** The sessions whose live actor is running a burst, as the actors hold them (no store read). */
  readonly running: () => ReadonlyArray<Session>
}

/** The supervisor in force. */
export class Supervisor extends Context.Tag("corral/session/Supervisor")<Supervisor, Service>() {}

/** Supervisor options. */
export interface Options {
  /** Passivate an actor after this long without messages. Default 5 minutes. */
  readonly idleTimeout?: Duration.DurationInput
}

/** Builds a supervisor in the current scope; marks interrupted bursts of a previous process first. */
export const make = (
  options: Options = {}
): Effect.Effect<Service, PersistenceFailed, Scope.Scope | SessionActor.Requirements> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const events = yield* SessionEvents
    const fibers = yield* FiberSet.make<void, never>()
    const runDrain = yield* FiberSet.runtime(fibers)<SessionActor.Requirements>()
    // Runs before the fiber set closes (finalizers run in reverse): from then on no drain is started.
    let stopping = false
    yield* Effect.addFinalizer(() => Effect.sync(() => (stopping = true)))
    const idleTimeout = Duration.decode(options.idleTimeout ?? Duration.minutes(5))
    const actors = new Map<string, SessionActor.Actor>()
    const starting = new Map<string, Deferred.Deferred<SessionActor.Actor, SessionNotFound | PersistenceFailed>>()

    /**
     * Recovery of a session left `running` by a process that is gone: it is `interrupted` (resume with Continue), and
     * an approved write that was dispatched but never resolved is closed as unknown_outcome (never re-run), with a
     * notice in the transcript for the model and the person. Returns the recovered session and the notice, if any.
     */
    const recover = (session: Session, now: number) =>
      Effect.gen(function*() {
        if (session.state.status !== "running") return { session, notice: Option.none<TurnEntry>() }
        let state: SessionState = { ...session.state, status: "interrupted" }
        const repaired = SessionActor.repairPending(state)
        if (Option.isSome(repaired)) {
          yield* Transcript.append({ store, events }, session.id, repaired.value.notice, now, 10_000)
          state = repaired.value.state
        }
        yield* store.saveState(session.id, state, now)
        return { session: { ...session, state, updatedAt: now }, notice: Option.map(repaired, (r) => r.notice) }
      })

    // At start: a session still `running` in the store has no live burst anywhere in this fresh process.
    for (const session of yield* store.listRunning()) yield* recover(session, yield* Clock.currentTimeMillis)

    const spawn = (session: Session, spec: AgentSpec, history: ReadonlyArray<TurnEntry>) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const actor: SessionActor.Actor = SessionActor.make({
          session,
          spec,
          history,
          now,
          start: (drain) => {
            if (stopping) return false
            runDrain(drain, { immediate: false })
            return true
          },
          onClose: () => {
            if (actors.get(session.id) === actor) actors.delete(session.id)
          }
        })
        actors.set(session.id, actor)
        return actor
      })

    /** Passivates every actor idle for `idleTimeout`, every quarter of it. */
    const sweepEvery = Duration.max(Duration.millis(1), Duration.unsafeDivide(idleTimeout, 4))
    const idleMillis = Duration.toMillis(idleTimeout)
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      yield* Effect.sleep(sweepEvery)
      const now = yield* Clock.currentTimeMillis
      // Passivating deletes the actor from the map; deleting visited entries during iteration is safe for a Map.
      for (const actor of actors.values()) {
        const since = actor.idleSince()
        if (since !== undefined && now - since >= idleMillis) actor.passivate()
      }
    })))

    const load = (orgId: string, sessionId: string) =>
      Effect.gen(function*() {
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
        const entries = SessionActor.history(yield* store.turns(orgId, sessionId))
        const now = yield* Clock.currentTimeMillis
        // A turn whose calls never got results (the process died mid-dispatch) is closed as unknown_outcome.
        const repair = SessionActor.repairTail(entries)
        if (Option.isSome(repair)) {
          yield* Transcript.append({ store, events }, sessionId, repair.value, now, 10_000)
          entries.push(repair.value)
        }
        // Still `running` with no live actor: the actor that ran it stopped (an infrastructure failure).
        const { notice, session } = yield* recover(found.value, now)
        if (Option.isSome(notice)) entries.push(notice.value)
        return yield* spawn(session, spec.value, entries)
      })

    const acquire = (orgId: string, sessionId: string) =>
      Effect.suspend((): Effect.Effect<SessionActor.Actor, SessionNotFound | PersistenceFailed> => {
        const live = actors.get(sessionId)
        if (live !== undefined && !live.closed()) {
          return live.orgId === orgId ? Effect.succeed(live) : Effect.fail(new SessionNotFound({ sessionId }))
        }
        const pending = starting.get(sessionId)
        if (pending !== undefined) return Deferred.await(pending)
        const started = Deferred.unsafeMake<SessionActor.Actor, SessionNotFound | PersistenceFailed>(FiberId.none)
        starting.set(sessionId, started)
        return load(orgId, sessionId).pipe(
          Effect.exit,
          Effect.flatMap((exit) =>
            Effect.zipRight(
              Effect.sync(() => starting.delete(sessionId)),
              Effect.zipRight(Deferred.done(started, exit), exit)
            )
          )
        )
      })

    const send: Service["send"] = (orgId, sessionId, message) =>
      Effect.gen(function*() {
        // An actor may passivate between lookup and offer; then the next attempt starts its successor.
        for (let attempt = 0; attempt < 3; attempt++) {
          const actor = yield* acquire(orgId, sessionId)
          if (actor.orgId !== orgId) return yield* new SessionNotFound({ sessionId })
          const reply = actor.offer(message)
          if (Option.isSome(reply)) return yield* Deferred.await(reply.value)
        }
        return yield* Effect.dieMessage(`could not deliver a message to session ${sessionId}`)
      })

    return {
      create: (session, spec) => Effect.zipRight(store.createSession(session), Effect.asVoid(spawn(session, spec, []))),
      send,
      cancel: (orgId, sessionId) => {
        const live = actors.get(sessionId)
        return live === undefined || live.orgId !== orgId ? Effect.succeed(false) : live.cancel
      },
      peek: (orgId, sessionId) => {
        const live = actors.get(sessionId)
        return live === undefined || live.orgId !== orgId || live.closed() ? Option.none() : Option.some(live.session())
      },
      live: () => actors.size,
      running: () =>
        [...actors.values()].flatMap((actor) =>
          !actor.closed() && actor.session().state.status === "running" ? [actor.session()] : []
        )
    }
  })

/** The supervisor as a scoped layer. */
export const layer = (options: Options = {}): Layer.Layer<Supervisor, PersistenceFailed, SessionActor.Requirements> =>
  Layer.scoped(Supervisor, make(options))
