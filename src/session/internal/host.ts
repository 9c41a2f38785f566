/**
 * host — what the supervisor's parts share: the store and events, the fiber set its background work runs in, the
 * session-id → actor map, the accepted messages held by a delivery, and the parts' entry points, wired together
 * once by `Supervisor.make`.
 *
 * The supervisor is one service built from parts that call each other (a load delivers the inbox, a delivery may
 * load the session, a failed delivery is delivered again…): each part is a module of plain functions taking this
 * record, so none of them is a closure holding the others, and a reader finds each concern in its own file —
 * the actors (actors.ts), recovery (recovery.ts), the inbox's deliveries (inbox.ts), and a cluster's ordering of
 * accepted messages (clusterOrder.ts).
 */
import type { Context, Deferred, Duration, Effect, Fiber, Runtime } from "effect"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import type { PersistenceFailed, SendError, SessionNotFound } from "../../domain/Errors.js"
import type { InboxMessage } from "../../domain/Inbox.js"
import type { Limits as LimitsShape } from "../../domain/Limits.js"
import type { TurnEntry } from "../../domain/Message.js"
import type { SessionEvents } from "../../events/SessionEvents.js"
import type { SessionStore } from "../../store/SessionStore.js"
import type * as Admission from "../Admission.js"
import type * as SessionActor from "../SessionActor.js"

/** Forks `effect` into the supervisor's fiber set (closed with its scope). */
export type RunDrain = <XE extends never, XA extends void>(
  effect: Effect.Effect<XA, XE, SessionActor.Requirements>,
  options?: Runtime.RunForkOptions & { readonly propagateInterruption?: boolean | undefined } | undefined
) => Fiber.RuntimeFiber<XA, XE>

/** The shared state and the parts' entry points. */
export interface Host {
  readonly store: Context.Tag.Service<SessionStore>
  readonly events: Context.Tag.Service<SessionEvents>
  readonly runDrain: RunDrain
  /** True once the supervisor's scope closes: no drain starts, no delivery is retried. */
  readonly stopping: () => boolean
  readonly clustered: boolean
  readonly admission: Admission.Gate
  /** The limits a session's writes are bounded by: its agent's (host ∩ spec), the host's when the spec is gone. */
  readonly limitsOf: (spec: AgentSpec | undefined) => LimitsShape
  readonly idleTimeout: Duration.Duration
  /** The inbox sweep's period (`Supervisor.Options.inboxSweep`). */
  readonly inboxSweep: Duration.Duration
  /** The live actors by session id. */
  readonly actors: Map<string, SessionActor.Actor>
  /** Actors being loaded: a second caller awaits the first load. */
  readonly starting: Map<string, Deferred.Deferred<SessionActor.Actor, SessionNotFound | PersistenceFailed>>
  /**
   * Accepted messages a caller of `send` is delivering right now: a load of the session must not deliver them a
   * second time from the durable mailbox.
   */
  readonly claimed: Set<string>
  /** Landings of bursts the store stopped, not yet saved: run before the session's actor is rebuilt. */
  readonly unsettled: Map<string, Effect.Effect<void, PersistenceFailed>>
  /** Sessions whose accepted messages are being delivered again (`redeliver`). */
  readonly redelivering: Set<string>
  /** Deliveries again in a row per session that did not end in a processed message (a store that reads but never writes). */
  readonly redeliveries: Map<string, number>

  // The parts' entry points (see each part).
  readonly startDrain: (drain: Effect.Effect<void, never, SessionActor.Requirements>) => boolean
  readonly forget: (actor: SessionActor.Actor) => void
  readonly acquire: (
    orgId: string,
    sessionId: string
  ) => Effect.Effect<SessionActor.Actor, SessionNotFound | PersistenceFailed>
  readonly deliverInbox: (
    actor: SessionActor.Actor,
    taken: ReadonlySet<string>,
    waiting: ReadonlyArray<InboxMessage>
  ) => Effect.Effect<number, PersistenceFailed>
  readonly pendingInbox: (orgId: string, sessionId: string) => Effect.Effect<number, SendError>
  readonly redeliver: (orgId: string, sessionId: string, error: PersistenceFailed) => void
  readonly later: (sessionId: string, orgId: string, settle: Effect.Effect<void, PersistenceFailed>) => void
}

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
export const takenIds = (turns: ReadonlyArray<{ readonly entry: TurnEntry }>): Set<string> => {
  const taken = new Set<string>()
  for (const { entry } of turns) if (entry.kind === "user" && entry.messageId !== undefined) taken.add(entry.messageId)
  return taken
}
