/**
 * A session as an actor: its state, its conversation, and a mailbox that serialises `Run`, `Continue`, `Approve` and
 * `Renew` (fresh approval tokens).
 *
 * One message is processed at a time, so one burst runs at a time per session and a follow-up sent during a burst
 * waits its turn. `Cancel` does not queue: it signals the running burst, which exits `cancelled` with its transcript
 * kept.
 *
 * An idle actor has no fiber. A message arriving at an empty mailbox starts a drain fiber (through `start`, which the
 * supervisor runs in its fiber set); the drain processes messages until the mailbox is empty and ends. A resident
 * fiber parked on its mailbox with an idle timer held memory for every idle session and raced a timeout per message
 * (docs/benchmarks.md, "Notes moved from the code"). When the actor has been idle for the idle time, the supervisor
 * passivates it (`passivate`: it closes and is forgotten) and the next message rebuilds it from the store — the store,
 * not the actor, is the source of truth.
 *
 * This file is the actor's contract: its messages, its replies and `make`. The actor itself (its fields, mailbox and
 * drain) is internal/liveActor.ts; what each message does, internal/actorMessages.ts; the repair of work a dead
 * process left unfinished, internal/actorRepair.ts.
 */
import type { Deferred, Effect, Option } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { IssuedToken } from "../domain/Approval.js"
import type { ActorFailure, PersistenceFailed } from "../domain/Errors.js"
import type { TurnEntry } from "../domain/Message.js"
import type { Principal } from "../domain/Principal.js"
import type { Session } from "../domain/Session.js"
import type { SessionEvents } from "../events/SessionEvents.js"
import type { Providers } from "../model/ModelProvider.js"
import type { SessionStore } from "../store/SessionStore.js"
import type { ToolExecutor } from "../tools/ToolExecutor.js"
import type * as Admission from "./Admission.js"
import { LiveActor } from "./internal/liveActor.js"

/** The messages an actor's mailbox takes. */
export type Message =
  | {
    readonly _tag: "Run"
    readonly text: string
    readonly context?: string
    readonly notes?: ReadonlyArray<{ readonly code: string; readonly message: string }>
    /** The accepted message (`InboxMessage.id`) this is, when it came through the durable mailbox. */
    readonly inboxId?: string
  }
  | { readonly _tag: "Continue"; readonly text: string; readonly inboxId?: string }
  | {
    readonly _tag: "Approve"
    readonly by: Principal
    /**
     * The SHA-256 of the approval token (`Approvals.hashToken`): the raw token is a bearer secret and never travels
     * further than the request that presented it (a message may be stored on its way, as the cluster stores it).
     */
    readonly tokenHash: string
    readonly decision: "approve" | "reject"
  }
  /** Issues fresh approval tokens for the writes still waiting (revoking their old ones); the session's user only. */
  | { readonly _tag: "Renew"; readonly by: Principal }

/** What processing a message answers: the session as it stands, and the approval tokens it issued (shown once). */
export interface Reply {
  readonly session: Session
  readonly tokens: ReadonlyArray<IssuedToken>
}

/** Why a message could not be processed: the domain's `ActorFailure`, a part of `CorralError`. */
export type Failure = ActorFailure

/** The ports an actor works with. */
export type Requirements = SessionStore | SessionEvents | ToolExecutor | Providers

/** A live actor. */
export interface Actor {
  readonly sessionId: string
  readonly orgId: string
  /** The session as of the last processed message. */
  readonly session: () => Session
  /** Whether the actor has passivated or stopped; a closed actor takes no messages. */
  readonly closed: () => boolean
  /** Enqueues a message (starting a drain when none runs); `None` when the actor has closed (start a new one). */
  readonly offer: (message: Message) => Option.Option<Deferred.Deferred<Reply, Failure>>
  /** Signals the running burst to stop. `true` when a burst was running. */
  readonly cancel: Effect.Effect<boolean>
  /**
   * Completes when the burst running now has landed and the actor holds its landed state (at once when none runs).
   * Never fails: a burst the store stopped has landed too, as far as the actor is concerned.
   */
  readonly landed: Effect.Effect<void>
  /** Since when (Clock millis) the actor has had nothing to do; `undefined` while a message waits or is processed. */
  readonly idleSince: () => number | undefined
  /** Closes the actor if it is idle (synchronously: no message can slip in between). `true` when it closed. */
  readonly passivate: () => boolean
  /**
   * Closes the actor whatever it is doing: queued messages are answered `PersistenceFailed` (they are not run here),
   * the message in flight runs to its end. Used when another host takes the session over (a cluster shard moved).
   */
  readonly stop: () => void
}

/** Why a follow-up is refused while writes wait for a person's decision. */
export { waitingForDecision } from "./internal/actorMessages.js"

/**
 * The repair of work a dead process left unfinished: `repairTail` pairs an assistant turn whose tool results were never
 * stored, `repairPending` resolves an approved write whose outcome was never saved; both `unknown_outcome`, never re-run.
 */
export { repairPending, repairTail } from "./internal/actorRepair.js"

/** What `make` builds an actor from. */
export interface Options {
  readonly session: Session
  readonly spec: AgentSpec
  readonly history: ReadonlyArray<TurnEntry>
  /** When the actor is made (Clock millis): the start of its first idle time. */
  readonly now: number
  /**
   * Forks a drain in the supervisor's fiber set, with the actor's requirements provided, to run after the caller
   * yields. Called synchronously by `offer`; `false` when the supervisor has stopped (nothing was forked).
   */
  readonly start: (drain: Effect.Effect<void, never, Requirements>) => boolean
  /** Called once, synchronously, with the actor when it closes (the supervisor forgets it). */
  readonly onClose: (actor: Actor) => void
  /**
   * Takes the landing of a burst of session `sessionId` the store stopped, to save once the store answers (see
   * `Run.Request.later`). One function for every actor, told which session: a function per actor is kept as long as
   * the actor.
   */
  readonly later?: (sessionId: string, orgId: string, settle: Effect.Effect<void, PersistenceFailed>) => void
  /** The process's cap on bursts running at once (`Admission`); absent = every burst runs at once. */
  readonly admission?: Admission.Gate
}

/** Builds an actor over a session already in the store, its agent spec and its conversation. */
export const make = (options: Options): Actor => new LiveActor(options)

/** The accepted message a mailbox message carries, if it came through the durable mailbox. */
export { inboxOf } from "./internal/liveActor.js"
