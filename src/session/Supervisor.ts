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
 *
 * This file is the service: its interface, its tag, and `make`, which wires the parts in `internal/` (the shared
 * record: internal/host.ts) — the actors, recovery, the inbox's deliveries, and a cluster's ordering of accepted
 * messages.
 */
import { Context, Deferred, Duration, Effect, FiberSet, Layer, Option } from "effect"
import type { Scope } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { PersistenceFailed, SendError } from "../domain/Errors.js"
import type { Session } from "../domain/Session.js"
import { SessionEvents } from "../events/SessionEvents.js"
import * as Limits from "../rails/Limits.js"
import { SessionStore } from "../store/SessionStore.js"
import * as Admission from "./Admission.js"
import * as Actors from "./internal/actors.js"
import * as ClusterOrder from "./internal/clusterOrder.js"
import type { Host } from "./internal/host.js"
import * as Inbox from "./internal/inbox.js"
import * as Recovery from "./internal/recovery.js"
import * as SessionActor from "./SessionActor.js"

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
export { fromInbox } from "./internal/host.js"

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

/** Builds a supervisor in the current scope; marks interrupted bursts of a previous process first. */
export const make = (
  options: Options = {}
): Effect.Effect<Service, PersistenceFailed, Scope.Scope | SessionActor.Requirements> =>
  Effect.gen(function*() {
    const fibers = yield* FiberSet.make<void, never>()
    const runDrain = yield* FiberSet.runtime(fibers)<SessionActor.Requirements>()
    // Runs before the fiber set closes (finalizers run in reverse): from then on no drain is started.
    let stopping = false
    yield* Effect.addFinalizer(() => Effect.sync(() => (stopping = true)))
    const limits = yield* Limits.Limits
    const host: Host = {
      store: yield* SessionStore,
      events: yield* SessionEvents,
      runDrain,
      stopping: () => stopping,
      clustered: options.hosting === "cluster",
      admission: Admission.make(options.maxRunningBursts ?? Admission.defaultMaxRunning),
      limitsOf: (spec: AgentSpec | undefined) => Limits.effective(limits, spec?.limits),
      idleTimeout: Duration.decode(options.idleTimeout ?? Duration.minutes(5)),
      inboxSweep: Duration.decode(options.inboxSweep ?? Duration.seconds(30)),
      actors: new Map(),
      starting: new Map(),
      claimed: new Set(),
      unsettled: new Map(),
      redelivering: new Set(),
      redeliveries: new Map(),
      // One of each for every actor (a function made per actor is kept as long as the actor).
      startDrain: (drain) => Actors.startDrain(host, drain),
      forget: (actor) => Actors.forget(host, actor),
      acquire: (orgId, sessionId) => Actors.acquire(host, orgId, sessionId),
      deliverInbox: (actor, taken, waiting) => Inbox.deliverInbox(host, actor, taken, waiting),
      pendingInbox: (orgId, sessionId) => Inbox.pendingInbox(host, orgId, sessionId),
      redeliver: (orgId, sessionId, error) => Inbox.redeliver(host, orgId, sessionId, error),
      later: (sessionId, orgId, settle) => Inbox.later(host, sessionId, orgId, settle)
    }
    const { actors, claimed, clustered, redeliveries } = host
    const order = ClusterOrder.makeOrder()

    // At start (local hosting): the sessions a previous process left `running`, then its accepted messages that
    // never ran (recovery.ts). In a cluster the owner recovers a session when it loads it.
    if (!clustered) yield* Recovery.runningAtStart(host)
    yield* Effect.forkScoped(Actors.passivation(host))

    const deliver: Service["send"] = (orgId, sessionId, message) =>
      Effect.flatMap(Actors.offer(host, orgId, sessionId, message), Deferred.await)

    const send: Service["send"] = (orgId, sessionId, message) => {
      const inboxId = SessionActor.inboxOf(message)
      if (inboxId === undefined) return deliver(orgId, sessionId, message)
      // In a cluster the same message can arrive twice (delivered again after its runner died): it runs once.
      if (clustered && claimed.has(inboxId)) {
        return Effect.zipRight(
          Effect.logDebug(`session ${sessionId}: accepted message ${inboxId} is being delivered here already`),
          ClusterOrder.standing(host, orgId, sessionId)
        )
      }
      return Effect.acquireUseRelease(
        Effect.sync(() => claimed.add(inboxId)),
        () =>
          clustered
            ? ClusterOrder.inOrder(host, order, orgId, sessionId, inboxId, message)
            : deliver(orgId, sessionId, message),
        () => Effect.sync(() => claimed.delete(inboxId))
      ).pipe(
        Effect.tapBoth({
          onFailure: (error) =>
            Effect.sync(() => error._tag === "PersistenceFailed" && host.redeliver(orgId, sessionId, error)),
          onSuccess: () => Effect.sync(() => redeliveries.size > 0 && redeliveries.delete(sessionId))
        })
      )
    }

    if (!clustered) {
      yield* Recovery.inboxAtStart(host)
      yield* Effect.forkScoped(Inbox.sweep(host))
    }

    const liveOf = (orgId: string, sessionId: string) => {
      const live = actors.get(sessionId)
      return live === undefined || live.orgId !== orgId ? undefined : live
    }
    return {
      adopt: (session: Session, spec: AgentSpec) => Effect.asVoid(Actors.spawn(host, session, spec, [])),
      send,
      cancel: (orgId, sessionId) => liveOf(orgId, sessionId)?.cancel ?? Effect.succeed(false),
      landed: (orgId, sessionId) => liveOf(orgId, sessionId)?.landed ?? Effect.void,
      peek: (orgId, sessionId) => {
        const live = liveOf(orgId, sessionId)
        return live === undefined || live.closed() ? Option.none() : Option.some(live.session())
      },
      live: () => actors.size,
      admission: () => ({ running: host.admission.running(), waiting: host.admission.waiting() }),
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
