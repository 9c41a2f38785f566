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
import { Clock, Context, Deferred, Duration, Effect, FiberId, FiberSet, Layer, Option, Schedule } from "effect"
import type { Scope } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { SendError } from "../domain/Errors.js"
import { PersistenceFailed, SessionNotFound } from "../domain/Errors.js"
import type { InboxMessage } from "../domain/Inbox.js"
import type { TurnEntry } from "../domain/Message.js"
import type { Session, SessionState } from "../domain/Session.js"
import { Usage } from "../domain/Usage.js"
import { SessionEvents } from "../events/SessionEvents.js"
import * as Limits from "../rails/Limits.js"
import { SessionStore } from "../store/SessionStore.js"
import * as Admission from "./Admission.js"
import * as SessionActor from "./SessionActor.js"
import * as Transcript from "./Transcript.js"

/** What hosting a session can fail with: the domain's `SendError`, a part of `CorralError`. */
export type { SendError }

/** The supervisor's service. */
export interface Service {
  /** Starts the actor of a session just stored (with its first message: `SessionStore.accept`), empty conversation. */
  readonly adopt: (session: Session, spec: AgentSpec) => Effect.Effect<void>
  /** Delivers a message to the session's actor (starting it if needed) and awaits the processed result. */
  readonly send: (
    orgId: string,
    sessionId: string,
    message: SessionActor.Message
  ) => Effect.Effect<SessionActor.Reply, SendError>
  /** Cancels the session's running burst; `false` when none was running (or no actor is live). */
  readonly cancel: (orgId: string, sessionId: string) => Effect.Effect<boolean>
  /**
   * Completes when the session's running burst has landed and its live actor holds the landed state; at once when no
   * burst runs here (or no actor is live). Unbounded: callers bound it.
   */
  readonly landed: (orgId: string, sessionId: string) => Effect.Effect<void>
  /** The session as its live actor holds it, if one is live. */
  readonly peek: (orgId: string, sessionId: string) => Option.Option<Session>
  /** How many actors are live. */
  readonly live: () => number
  /** Bursts holding a place under the process's cap, and bursts waiting for one (`Admission`). */
  readonly admission: () => { readonly running: number; readonly waiting: number }
  /** The sessions whose live actor is running a burst, as the actors hold them (no store read). */
  readonly running: () => ReadonlyArray<Session>
  /**
   * Gives a session up to another host: its actor takes no more messages (queued ones are answered
   * `PersistenceFailed`, to be delivered again where the session now lives), its running burst is cancelled and
   * awaited, and the next message here rebuilds it from the store. At once when no actor is live. Unbounded: callers
   * bound it.
   */
  readonly release: (sessionId: string) => Effect.Effect<void>
}

/** The supervisor in force. */
export class Supervisor extends Context.Tag("corral/session/Supervisor")<Supervisor, Service>() {}

/** The mailbox message an accepted message becomes. */
export const fromInbox = (message: InboxMessage): SessionActor.Message =>
  message.kind === "run"
    ? {
      _tag: "Run",
      text: message.text,
      inboxId: message.id,
      ...(message.context === undefined ? {} : { context: message.context }),
      ...(message.notes === undefined ? {} : { notes: message.notes })
    }
    : { _tag: "Continue", text: message.text, inboxId: message.id }

/** The accepted messages a transcript's user turns took up. */
const takenIds = (turns: ReadonlyArray<{ readonly entry: TurnEntry }>): Set<string> => {
  const taken = new Set<string>()
  for (const { entry } of turns) if (entry.kind === "user" && entry.messageId !== undefined) taken.add(entry.messageId)
  return taken
}

const groupBySession = (messages: ReadonlyArray<InboxMessage>): Map<string, Array<InboxMessage>> => {
  const groups = new Map<string, Array<InboxMessage>>()
  for (const message of messages) {
    const group = groups.get(message.sessionId)
    if (group === undefined) groups.set(message.sessionId, [message])
    else group.push(message)
  }
  return groups
}

/** Supervisor options. */
export interface Options {
  /** Passivate an actor after this long without messages. Default 5 minutes. */
  readonly idleTimeout?: Duration.DurationInput
  /**
   * Bursts running at once in this process (`Admission`); the surplus waits, in order, with its message stored.
   * Default 256; 0 = no cap.
   */
  readonly maxRunningBursts?: number
  /**
   * `"local"` (default): this process is the only host, so at start it recovers every session a previous process
   * left `running` and delivers every accepted message that never ran, and loading a session delivers its inbox.
   * `"cluster"`: other processes host other sessions at the same time and the cluster redelivers unanswered
   * messages itself (cluster/SessionEntity), so none of that happens at start or load (it would touch sessions that
   * live elsewhere, or run a redelivered message twice); a session is recovered when it is loaded, which happens
   * only on the runner that owns it, and an accepted message is run only if the store says it is still waiting and
   * no burst took it up.
   */
  readonly hosting?: "local" | "cluster"
  /**
   * Local hosting: how often the inbox sweep runs, and how old an accepted message must be before it delivers it
   * (`inboxSweep` below). Default 30 seconds.
   */
  readonly inboxSweep?: Duration.DurationInput
}

/**
 * How an accepted message that the store kept from its burst is delivered again: soon (after 0.5 s, doubling to 5 s, so it
 * runs within seconds of the store's return), for at most 10 minutes — then it is left to the inbox sweep, and the log
 * says so. A session whose deliveries keep failing after the store answered (it reads but does not write) is left to
 * the sweep after `maxRedeliveries` rounds in a row, also logged.
 *
 * The inbox sweep (local hosting) is the bound on everything else: every period (`Options.inboxSweep`, 30 s by
 * default) it lists the accepted messages older than one period that no caller and no actor holds, and delivers them
 * (through a live actor, or by loading the session). So an accepted message never waits on an event that may not come
 * — a next message, a restart — once the store answers again: it runs within two periods of that. Why the bound
 * sits at 30 s: it is the slow lane behind the redelivery above (which runs within seconds of the store's return), so
 * it only has to be short next to an outage; a round is one indexed read of the inbox, cheap at that period even
 * when thousands of messages wait. A message younger than one period may still be on its way to its actor.
 */
const maxRedeliveries = 10
const firstRedelivery = "500 millis"
const redelivery = Schedule.union(Schedule.exponential(firstRedelivery), Schedule.spaced("5 seconds")).pipe(
  Schedule.upTo("10 minutes")
)

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
    const host = yield* Limits.Limits
    /** The limits a session's writes are bounded by: its agent's (host ∩ spec), the host's when the spec is gone. */
    const limitsOf = (spec: AgentSpec | undefined) => Limits.effective(host, spec?.limits)
    /**
     * Accepted messages a caller of `send` is delivering right now: a load of the session must not deliver them a
     * second time from the durable mailbox.
     */
    const claimed = new Set<string>()
    /** Landings of bursts the store stopped, not yet saved: run before the session's actor is rebuilt. */
    const unsettled = new Map<string, Effect.Effect<void, PersistenceFailed>>()
    const starting = new Map<string, Deferred.Deferred<SessionActor.Actor, SessionNotFound | PersistenceFailed>>()
    const admission = Admission.make(options.maxRunningBursts ?? Admission.defaultMaxRunning)
    const clustered = options.hosting === "cluster"
    /** Sessions whose accepted messages are being delivered again (`redeliver`). */
    const redelivering = new Set<string>()
    /** Deliveries again in a row per session that did not end in a processed message (a store that reads but never writes). */
    const redeliveries = new Map<string, number>()
    const inboxSweep = Duration.decode(options.inboxSweep ?? Duration.seconds(30))

    /**
     * Closes the trajectories a process left open (it died mid-burst) as `crashed`, and bills what they recorded:
     * usage and the counters are charged to the session whatever happened, so a crash never resets a ceiling.
     */
    const closeOpen = (session: Session, now: number) =>
      Effect.gen(function*() {
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
    const recover = (session: Session, now: number, persistTimeoutMs: number) =>
      Effect.gen(function*() {
        if (session.state.status !== "running") return { session, notice: Option.none<TurnEntry>() }
        let state: SessionState = yield* closeOpen(session, now)
        const repaired = SessionActor.repairPending(state)
        if (Option.isSome(repaired)) {
          yield* Transcript.append({ store, events }, session.id, repaired.value.notice, now, persistTimeoutMs)
          state = repaired.value.state
        }
        yield* store.saveState(session.id, state, now)
        return { session: { ...session, state, updatedAt: now }, notice: Option.map(repaired, (r) => r.notice) }
      })

    // At start: a session still `running` in the store has no live burst anywhere in this fresh process (in a
    // cluster it may have one on another runner: it is recovered by its owner, when loaded).
    for (const session of clustered ? [] : yield* store.listRunning()) {
      const spec = yield* store.getAgent(session.principal.orgId, session.agentId, session.agentVersion)
      const { persistTimeoutMs } = limitsOf(Option.getOrUndefined(spec))
      yield* recover(session, yield* Clock.currentTimeMillis, persistTimeoutMs)
    }

    /**
     * Keeps retrying the landing of a burst the store stopped until the store takes it (backoff 0.5 s doubling to
     * 5 s, so a session reads `interrupted` within seconds of the store's return), then runs what its mailbox still
     * holds. `load` runs a waiting landing first, so the two never overwrite a newer state.
     */
    const later = (sessionId: string, orgId: string, settle: Effect.Effect<void, PersistenceFailed>) => {
      const lock = Effect.unsafeMakeSemaphore(1)
      const attempt: Effect.Effect<void, PersistenceFailed> = lock.withPermits(1)(Effect.suspend(() =>
        unsettled.get(sessionId) === attempt
          ? Effect.zipRight(settle, Effect.sync(() => void unsettled.delete(sessionId)))
          : Effect.void
      ))
      unsettled.set(sessionId, attempt)
      runDrain(
        attempt.pipe(
          Effect.retry(Schedule.union(Schedule.exponential("500 millis"), Schedule.spaced("5 seconds"))),
          Effect.zipRight(Effect.logInfo(`session ${sessionId}: the stopped burst's landing is saved`)),
          Effect.zipRight(pendingInbox(orgId, sessionId)),
          Effect.catchAllCause((cause) =>
            Effect.logDebug(`session ${sessionId}: landing retry ended`, cause)
          )
        ),
        { immediate: false }
      )
    }

    /**
     * Delivers the accepted messages that still wait: by rebuilding the actor when none is live (it delivers them: see
     * `load`), or through the live actor (local hosting) when no caller or actor holds them already. Returns how many
     * were found waiting for nothing: the messages of a session rebuilt here, or those offered to its live actor
     * (0 when every waiting one was held, or had run and was only settled).
     */
    const pendingInbox = (orgId: string, sessionId: string): Effect.Effect<number, SendError> =>
      Effect.flatMap(store.inbox(sessionId), (waiting) => {
        if (waiting.length === 0) return Effect.succeed(0)
        const live = actors.get(sessionId)
        if (live === undefined || live.closed()) return Effect.as(acquire(orgId, sessionId), waiting.length)
        if (clustered || waiting.every((message) => claimed.has(message.id))) return Effect.succeed(0)
        return Effect.flatMap(store.turns(orgId, sessionId), (turns) => deliverInbox(live, takenIds(turns), waiting))
      })

    // One for every actor (a function made per actor is kept as long as the actor).
    const start = (drain: Effect.Effect<void, never, SessionActor.Requirements>) => {
      if (stopping) {
        return false
      }
      runDrain(drain, { immediate: false })
      return true
    }

    const forget = (actor: SessionActor.Actor) => {
      if (actors.get(actor.sessionId) === actor) {
        actors.delete(actor.sessionId)
      }
    }

    const spawn = (session: Session, spec: AgentSpec, history: ReadonlyArray<TurnEntry>) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const actor: SessionActor.Actor = SessionActor.make({
          session,
          spec,
          history,
          now,
          start,
          onClose: forget,
          later,
          admission
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
        if (since !== undefined && now - since >= idleMillis) {
          actor.passivate()
        }
      }
    })))

    const load = (orgId: string, sessionId: string) =>
      Effect.gen(function*() {
        // A stopped burst's landing first: the state it saves is older than anything the new actor will do.
        const waiting = unsettled.get(sessionId)
        if (waiting !== undefined) {
          yield* waiting
        }
        const found = yield* store.getSession(orgId, sessionId)
        if (Option.isNone(found)) {
          return yield* new SessionNotFound({ sessionId })
        }
        const { agentId, agentVersion } = found.value
        const spec = yield* store.getAgent(orgId, agentId, agentVersion)
        if (Option.isNone(spec)) {
          return yield* new PersistenceFailed({
            operation: "loadSession",
            message: `agent ${agentId} v${agentVersion} of session ${sessionId} is missing`
          })
        }
        const { persistTimeoutMs } = limitsOf(spec.value)
        const turns = yield* store.turns(orgId, sessionId)
        const entries = Transcript.history(turns)
        // Calls left open mid-transcript (stored before the store closed them itself): the model is shown them closed
        // (`history`), and the repair is logged with the session each time the session is loaded.
        const unpaired = Transcript.unpaired(turns)
        if (unpaired.length > 0) {
          yield* Effect.logWarning(
            `session ${sessionId}: the calls of assistant turn(s) ${unpaired.join(", ")} have no results in the ` +
              "transcript (a later turn was stored right after them); they are closed as unknown_outcome in the " +
              "conversation the model is shown, and were not run again"
          ).pipe(Effect.annotateLogs({ sessionId, repair: "unpaired_calls", turns: unpaired.join(",") }))
        }
        const now = yield* Clock.currentTimeMillis
        // A turn whose calls never got results (the process died mid-dispatch) is closed as unknown_outcome.
        const repair = SessionActor.repairTail(entries)
        if (Option.isSome(repair)) {
          yield* Transcript.append({ store, events }, sessionId, repair.value, now, persistTimeoutMs)
          entries.push(repair.value)
        }
        // Still `running` with no live actor: the actor that ran it stopped (an infrastructure failure).
        const { notice, session } = yield* recover(found.value, now, persistTimeoutMs)
        if (Option.isSome(notice)) {
          entries.push(notice.value)
        }
        const actor = yield* spawn(session, spec.value, entries)
        if (!clustered) {
          const waiting = yield* store.inbox(sessionId)
          if (waiting.length > 0) yield* deliverInbox(actor, takenIds(entries.map((entry) => ({ entry }))), waiting)
        }
        return actor
      })

    /**
     * Delivers the accepted messages of the session that no burst took up (`taken`: its user turn carries the message
     * id when one did), oldest first, ahead of anything sent after; the ones already taken up are settled. A message
     * offered here is held (`claimed`) until its actor answers it, so no other delivery offers it again meanwhile.
     * Returns how many it offered.
     */
    const deliverInbox = (
      actor: SessionActor.Actor,
      taken: ReadonlySet<string>,
      waiting: ReadonlyArray<InboxMessage>
    ) =>
      Effect.gen(function*() {
        let delivered = 0
        for (const message of waiting) {
          if (claimed.has(message.id)) {
            continue
          }
          if (taken.has(message.id)) {
            yield* store.settle(actor.sessionId, message.id)
            continue
          }
          yield* Effect.logInfo(`session ${actor.sessionId}: running accepted message ${message.id} (${message.kind})`)
          const reply = actor.offer(fromInbox(message))
          if (Option.isSome(reply)) {
            delivered++
            claimed.add(message.id)
            runDrain(
              Deferred.await(reply.value).pipe(
                Effect.ensuring(Effect.sync(() => void claimed.delete(message.id))),
                Effect.tap(() => Effect.sync(() => redeliveries.delete(actor.sessionId))),
                Effect.catchAll((error) =>
                  Effect.zipRight(
                    Effect.logWarning(
                      `session ${actor.sessionId}: accepted message ${message.id} failed: ${error.message}`
                    ),
                    Effect.sync(() =>
                      error._tag === "PersistenceFailed" && redeliver(actor.orgId, actor.sessionId, error)
                    )
                  )
                )
              ),
              { immediate: false }
            )
          }
        }
        return delivered
      })

    const acquire = (orgId: string, sessionId: string) =>
      Effect.suspend((): Effect.Effect<SessionActor.Actor, SessionNotFound | PersistenceFailed> => {
        const live = actors.get(sessionId)
        if (live !== undefined && !live.closed()) {
          return live.orgId === orgId ? Effect.succeed(live) : Effect.fail(new SessionNotFound({ sessionId }))
        }
        const pending = starting.get(sessionId)
        if (pending !== undefined) {
          return Deferred.await(pending)
        }
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

    /**
     * An accepted message is stored, so it must run even when the store kept it from its burst (the actor could not
     * be loaded, or the burst stopped before taking it up): the session's inbox is delivered again in the background
     * until the store answers (`redelivery`). A message its burst took up is only settled then (never run twice).
     */
    const redeliver = (orgId: string, sessionId: string, error: PersistenceFailed) => {
      if (stopping || redelivering.has(sessionId)) return
      const rounds = (redeliveries.get(sessionId) ?? 0) + 1
      if (rounds > maxRedeliveries) {
        redeliveries.delete(sessionId)
        runDrain(Effect.logError(
          `session ${sessionId}: accepted messages failed ${maxRedeliveries} deliveries in a row (the store failed in ` +
            `${error.operation}: ${error.message}); the inbox sweep delivers them again (every ${
              Duration.format(inboxSweep)
            })`
        ))
        return
      }
      redeliveries.set(sessionId, rounds)
      redelivering.add(sessionId)
      runDrain(
        Effect.logWarning(
          `session ${sessionId}: an accepted message waits in the inbox: the store failed in ${error.operation} ` +
            `(${error.message}); it is delivered again once the store answers`
        ).pipe(
          // The store has just failed: the first attempt waits the schedule's first step too.
          Effect.zipRight(Effect.sleep(firstRedelivery)),
          Effect.zipRight(
            Effect.retry(Effect.suspend(() => stopping ? Effect.void : pendingInbox(orgId, sessionId)), redelivery)
          ),
          Effect.zipRight(Effect.logInfo(`session ${sessionId}: the accepted messages are delivered`)),
          Effect.catchAll((last) =>
            Effect.logError(
              `session ${sessionId}: accepted messages not delivered within 10 minutes (${last.message}); the inbox ` +
                `sweep delivers them once the store answers (every ${Duration.format(inboxSweep)})`
            )
          ),
          Effect.ensuring(Effect.sync(() => void redelivering.delete(sessionId)))
        ),
        { immediate: false }
      )
    }

    /**
     * Cluster hosting: the accepted messages to run before `inboxId` — the session's earlier accepted messages that
     * still wait (in the inbox, no stored user turn took them up, not in a mailbox here already), oldest first —
     * or `undefined` when `inboxId` itself no longer waits. A message the cluster delivers again (its runner died
     * before answering) may have run already; one taken up but not settled is settled here. An earlier one waits when
     * its own delivery was lost in a hand-over (a runner refused it while stopping, or the cluster never stored it):
     * run first, it keeps the order the messages were accepted in instead of running after this one, or only when the
     * sweep finds it.
     */
    const waitingBefore = (orgId: string, sessionId: string, inboxId: string) =>
      Effect.gen(function*() {
        const inbox = yield* store.inbox(sessionId)
        const at = inbox.findIndex((m) => m.id === inboxId)
        if (at < 0) return undefined
        const taken = takenIds(yield* store.turns(orgId, sessionId))
        const earlier: Array<InboxMessage> = []
        for (const message of inbox.slice(0, at + 1)) {
          if (taken.has(message.id)) yield* store.settle(sessionId, message.id)
          else if (message.id !== inboxId && !offered.has(message.id)) earlier.push(message)
        }
        return taken.has(inboxId) ? undefined : earlier
      })

    /** The session as it stands here, for a message that is not run again. */
    const standing = (orgId: string, sessionId: string) =>
      Effect.map(acquire(orgId, sessionId), (actor): SessionActor.Reply => ({ session: actor.session(), tokens: [] }))

    /**
     * Cluster hosting: per session, one delivery of an accepted message at a time decides what runs and puts it in the
     * mailbox (not while it runs): the entity's handlers run concurrently, and two messages arriving together must
     * reach the mailbox in the order they were accepted, whichever of their store reads answers first.
     */
    const ordering = new Map<string, { readonly lock: Effect.Semaphore; holders: number }>()
    const serially = <A, E>(sessionId: string, self: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.suspend(() => {
        let entry = ordering.get(sessionId)
        if (entry === undefined) {
          entry = { lock: Effect.unsafeMakeSemaphore(1), holders: 0 }
          ordering.set(sessionId, entry)
        }
        const held = entry
        held.holders++
        return Effect.ensuring(
          held.lock.withPermits(1)(self),
          Effect.sync(() => {
            if (--held.holders === 0) ordering.delete(sessionId)
          })
        )
      })

    /** Puts `message` in the session's mailbox (starting the actor if needed); its reply comes through the Deferred. */
    const offer = (orgId: string, sessionId: string, message: SessionActor.Message) =>
      Effect.gen(function*() {
        // An actor may passivate between lookup and offer; then the next attempt starts its successor.
        for (let attempt = 0; attempt < 3; attempt++) {
          const actor = yield* acquire(orgId, sessionId)
          if (actor.orgId !== orgId) return yield* new SessionNotFound({ sessionId })
          const reply = actor.offer(message)
          if (Option.isSome(reply)) return reply.value
        }
        return yield* Effect.dieMessage(`could not deliver a message to session ${sessionId}`)
      })

    const deliver: Service["send"] = (orgId, sessionId, message) =>
      Effect.flatMap(offer(orgId, sessionId, message), Deferred.await)

    /** Cluster hosting: the accepted messages in a mailbox here (offered, not answered yet), with their replies. */
    const offered = new Map<string, Deferred.Deferred<SessionActor.Reply, SessionActor.Failure>>()

    /**
     * Puts an accepted message in the mailbox unless it is there already; its reply either way (see `inOrder`). The
     * outcome of one nobody awaits (`unawaited`: an earlier message run first) is logged.
     */
    const offerOnce = (
      orgId: string,
      sessionId: string,
      inboxId: string,
      message: SessionActor.Message,
      unawaited: boolean
    ) =>
      Effect.suspend(() => {
        const known = offered.get(inboxId)
        if (known !== undefined) return Effect.succeed(known)
        return Effect.map(offer(orgId, sessionId, message), (reply) => {
          offered.set(inboxId, reply)
          const outcome = Deferred.await(reply).pipe(
            Effect.catchAll((error) =>
              unawaited
                ? Effect.logWarning(`session ${sessionId}: accepted message ${inboxId} failed: ${error.message}`)
                : Effect.void
            )
          )
          runDrain(Effect.ensuring(outcome, Effect.sync(() => offered.delete(inboxId))), { immediate: false })
          return reply
        })
      })

    /**
     * Cluster hosting: an accepted message, once — unless it ran already (`standing`) — after the session's earlier
     * accepted messages that still wait (`waitingBefore`), all put in the mailbox in the order accepted under the
     * session's lock (`serially`): a message another delivery put there already is not offered again, its reply is
     * awaited instead. The reply is awaited after the lock is released.
     */
    const inOrder = (orgId: string, sessionId: string, inboxId: string, message: SessionActor.Message) =>
      Effect.flatMap(
        serially(
          sessionId,
          Effect.flatMap(waitingBefore(orgId, sessionId, inboxId), (earlier) =>
            earlier === undefined
              ? Effect.succeed(undefined)
              : Effect.gen(function*() {
                for (const waiting of earlier) {
                  yield* Effect.logInfo(
                    `session ${sessionId}: running accepted message ${waiting.id} (${waiting.kind}) first, in order`
                  )
                  yield* offerOnce(waiting.orgId, sessionId, waiting.id, fromInbox(waiting), true)
                }
                return yield* offerOnce(orgId, sessionId, inboxId, message, false)
              }))
        ),
        (reply): Effect.Effect<SessionActor.Reply, SendError> =>
          reply === undefined ? standing(orgId, sessionId) : Deferred.await(reply)
      )

    const send: Service["send"] = (orgId, sessionId, message) => {
      const inboxId = SessionActor.inboxOf(message)
      if (inboxId === undefined) return deliver(orgId, sessionId, message)
      // In a cluster the same message can arrive twice (delivered again after its runner died): it runs once.
      if (clustered && claimed.has(inboxId)) return standing(orgId, sessionId)
      return Effect.acquireUseRelease(
        Effect.sync(() => claimed.add(inboxId)),
        () => clustered ? inOrder(orgId, sessionId, inboxId, message) : deliver(orgId, sessionId, message),
        () => Effect.sync(() => claimed.delete(inboxId))
      ).pipe(
        Effect.tapBoth({
          onFailure: (error) =>
            Effect.sync(() => error._tag === "PersistenceFailed" && redeliver(orgId, sessionId, error)),
          onSuccess: () => Effect.sync(() => redeliveries.size > 0 && redeliveries.delete(sessionId))
        })
      )
    }

    // At start, after the interrupted bursts are marked: accepted messages that never ran (their process died between
    // the acknowledgement and the burst) are delivered, in the background so the host can start serving meanwhile.
    // Messages whose user turn is stored already ran (the process died after taking them up): they are only settled,
    // and their sessions stay unloaded until someone sends to them.
    const waiting = new Map<string, string>()
    for (const [sessionId, messages] of groupBySession(clustered ? [] : yield* store.inbox())) {
      const orgId = messages[0]!.orgId
      const taken = takenIds(yield* store.turns(orgId, sessionId))
      for (const message of messages) {
        if (taken.has(message.id)) yield* store.settle(sessionId, message.id)
        else waiting.set(sessionId, orgId)
      }
    }
    if (waiting.size > 0) {
      yield* Effect.logInfo(`recovery: accepted messages of ${waiting.size} session(s) never ran; running them`)
      runDrain(
        Effect.forEach(waiting, ([sessionId, orgId]) =>
          acquire(orgId, sessionId).pipe(
            Effect.catchAll((error) =>
              Effect.logError(`recovery: session ${sessionId}: accepted messages not delivered: ${error.message}`)
            )
          ), { discard: true, concurrency: 8 }),
        { immediate: false }
      )
    }

    // The inbox sweep (see `inboxSweep` above): accepted messages older than a period that nothing holds.
    const sweepRound = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const grace = Duration.toMillis(inboxSweep)
      const targets = new Map<string, string>()
      for (const message of yield* store.inbox()) {
        if (now - message.acceptedAt >= grace && !claimed.has(message.id) && !redelivering.has(message.sessionId)) {
          targets.set(message.sessionId, message.orgId)
        }
      }
      if (targets.size === 0) return
      // What the inbox read found may have run meanwhile (a burst answers before its message is settled, and under
      // load the settle waits its turn): only what was still waiting for nothing is worth a warning.
      const found = new Map<string, number>()
      yield* Effect.forEach(targets, ([sessionId, orgId]) =>
        pendingInbox(orgId, sessionId).pipe(
          Effect.tap((count) => Effect.sync(() => count > 0 && found.set(sessionId, count))),
          Effect.catchAll((error) =>
            Effect.logWarning(`inbox sweep: session ${sessionId}: accepted messages not delivered: ${error.message}`)
          )
        ), { discard: true, concurrency: 8 })
      if (found.size === 0) return
      yield* Effect.logWarning(
        `inbox sweep: ${[...found.values()].reduce((a, b) => a + b, 0)} accepted message(s) of ${found.size} ` +
          "session(s) waited with nothing to deliver them; delivered"
      ).pipe(Effect.annotateLogs({ sessions: [...found.keys()].slice(0, 20).join(",") }))
    })
    if (!clustered) {
      yield* Effect.forkScoped(Effect.forever(Effect.zipRight(
        Effect.sleep(inboxSweep),
        Effect.suspend(() => stopping ? Effect.void : sweepRound).pipe(
          Effect.catchAll((error) => Effect.logWarning(`inbox sweep: the store could not be read: ${error.message}`))
        )
      )))
    }

    return {
      adopt: (session, spec) => Effect.asVoid(spawn(session, spec, [])),
      send,
      cancel: (orgId, sessionId) => {
        const live = actors.get(sessionId)
        return live === undefined || live.orgId !== orgId ? Effect.succeed(false) : live.cancel
      },
      landed: (orgId, sessionId) => {
        const live = actors.get(sessionId)
        return live === undefined || live.orgId !== orgId ? Effect.void : live.landed
      },
      peek: (orgId, sessionId) => {
        const live = actors.get(sessionId)
        return live === undefined || live.orgId !== orgId || live.closed() ? Option.none() : Option.some(live.session())
      },
      live: () => actors.size,
      admission: () => ({ running: admission.running(), waiting: admission.waiting() }),
      running: () =>
        [...actors.values()].flatMap((actor) =>
          !actor.closed() && actor.session().state.status === "running" ? [actor.session()] : []
        ),
      release: (sessionId) =>
        Effect.suspend(() => {
          const live = actors.get(sessionId)
          if (live === undefined) return Effect.void
          live.stop()
          return Effect.zipRight(live.cancel, live.landed)
        })
    }
  })

/** The supervisor as a scoped layer. */
export const layer = (options: Options = {}): Layer.Layer<Supervisor, PersistenceFailed, SessionActor.Requirements> =>
  Layer.scoped(Supervisor, make(options))
