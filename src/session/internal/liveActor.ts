/**
 * liveActor — a session's actor as an object: its state in fields, its mailbox, and the drain that processes the
 * mailbox's messages one at a time (what a message does is in actorMessages.ts).
 *
 * A host keeps an actor per live session, so what one costs is per session: its behaviour sits on the prototype and
 * in module-level functions, not in a closure per operation over a shared scope, so an idle actor is its fields
 * (docs/benchmarks.md, "Notes moved from the code").
 */
import { Cause, Clock, Deferred, Effect, Exit, FiberId, Option } from "effect"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import { PersistenceFailed } from "../../domain/Errors.js"
import type { TurnEntry } from "../../domain/Message.js"
import type { Session } from "../../domain/Session.js"
import type { Actor, Failure, Message, Options, Reply, Requirements } from "../SessionActor.js"
import { handle, settle } from "./actorMessages.js"

/** A message in the mailbox, with the deferred its sender awaits. */
export interface Envelope {
  readonly message: Message
  readonly reply: Deferred.Deferred<Reply, Failure>
}

/**
 * The actor. Its fields are read and written by the message handlers (actorMessages.ts) and by nothing else: the
 * class is internal to `SessionActor`.
 */
export class LiveActor implements Actor {
  readonly sessionId: string
  readonly orgId: string
  /** The session as of the last processed message (or as a burst in flight shows it). */
  current: Session
  conversation: ReadonlyArray<TurnEntry>
  private isClosed = false
  /** Completed to cancel the burst in flight; `undefined` when none runs. */
  running: Deferred.Deferred<void> | undefined = undefined
  /** Completed once the burst in flight has landed and `current` holds its state; `undefined` when none runs. */
  landing: Deferred.Deferred<void> | undefined = undefined
  private inFlight: Envelope | undefined = undefined
  /** Messages not yet taken by the drain, oldest first; only this actor touches it. */
  private mailbox: Array<Envelope> = []
  /** Whether a drain fiber runs (or is about to): set by the offer that starts it, cleared when it finds no message. */
  private draining = false
  /** When the last drain ended (or the actor was made). */
  private lastDrained: number

  readonly spec: AgentSpec
  private readonly start: Options["start"]
  private readonly onClose: Options["onClose"]
  readonly later: Options["later"]
  readonly admission: Options["admission"]

  constructor(options: Options) {
    this.sessionId = options.session.id
    this.orgId = options.session.principal.orgId
    this.current = options.session
    this.conversation = options.history
    this.lastDrained = options.now
    this.spec = options.spec
    this.start = options.start
    this.onClose = options.onClose
    this.later = options.later
    this.admission = options.admission
  }

  session(): Session {
    return this.current
  }

  closed(): boolean {
    return this.isClosed
  }

  offer(message: Message): Option.Option<Deferred.Deferred<Reply, Failure>> {
    if (this.isClosed) return Option.none()
    const reply = Deferred.unsafeMake<Reply, Failure>(FiberId.none)
    this.mailbox.push({ message, reply })
    if (!this.draining) {
      this.draining = true
      if (!this.start(drain(this))) {
        // The supervisor has stopped: nothing will ever process the mailbox.
        this.close()
        for (const envelope of this.mailbox) Deferred.unsafeDone(envelope.reply, Exit.fail(stopped(this.sessionId)))
        this.mailbox = []
      }
    }
    return Option.some(reply)
  }

  get cancel(): Effect.Effect<boolean> {
    return Effect.suspend(() => {
      const running = this.running
      if (running === undefined) return Effect.succeed(false)
      // A burst still waiting for a place learns of it from the gate (Admission.cancelled).
      return Effect.tap(Deferred.succeed(running, undefined), () => this.admission?.cancelled(running))
    })
  }

  get landed(): Effect.Effect<void> {
    return Effect.suspend(() => this.landing === undefined ? Effect.void : Deferred.await(this.landing))
  }

  idleSince(): number | undefined {
    return this.draining ? undefined : this.lastDrained
  }

  passivate(): boolean {
    // A queued message always has a drain running (the offer started it), so `draining` covers the mailbox too.
    if (this.isClosed || this.draining) return false
    this.close()
    return true
  }

  stop(): void {
    if (this.isClosed) return
    this.close()
    const left = this.mailbox
    this.mailbox = []
    for (const envelope of left) Deferred.unsafeDone(envelope.reply, Exit.fail(stopped(this.sessionId)))
  }

  private close(): void {
    if (this.isClosed) return
    this.isClosed = true
    this.onClose(this)
  }

  /**
   * The drain's next message (module-level `drain` is not a method: see it). When none is left the actor is no
   * longer draining, synchronously with this emptiness check: an offer from now on starts a new drain.
   */
  take(): Envelope | undefined {
    const envelope = this.mailbox.shift()
    this.inFlight = envelope
    if (envelope === undefined) this.draining = false
    return envelope
  }

  taken(): void {
    this.inFlight = undefined
  }

  /** Closes after an infrastructure failure: the in-memory state may be ahead of the store; rebuild from it. */
  fail(): void {
    this.close()
  }

  /** The drain found no message left (`take`): the actor is idle from `now`. */
  idle(now: number): void {
    this.lastDrained = now
  }

  /** The drain ended interrupted or after a failure: every message left is answered, and the actor takes no more. */
  abandon(): Effect.Effect<void> {
    this.close()
    this.draining = false
    const left = this.inFlight === undefined ? this.mailbox : [this.inFlight, ...this.mailbox]
    this.inFlight = undefined
    this.mailbox = []
    const sessionId = this.current.id
    return Effect.forEach(left, (envelope) => Deferred.fail(envelope.reply, stopped(sessionId)), { discard: true })
  }
}

/**
 * Processes the actor's messages until its mailbox is empty; then the actor is idle and the fiber ends. A generator
 * of the module, not of the actor: a generator function gets a prototype object and two hidden classes of its own
 * the first time it runs, and one made per actor kept them for the actor's life.
 */
const drain = (actor: LiveActor): Effect.Effect<void, never, Requirements> =>
  Effect.gen(function*() {
    for (let envelope = actor.take(); envelope !== undefined; envelope = actor.take()) {
      const exit = yield* Effect.exit(handle(actor, envelope.message))
      actor.taken()
      yield* Deferred.done(envelope.reply, exit)
      // The accepted message was taken up (its user turn is stored) or refused: the mailbox row can go (after the
      // answer: the caller need not wait for it). After an infrastructure failure it stays; the next load finds
      // whether its turn was stored (`messageId`) and runs it if not.
      const inboxId = inboxOf(envelope.message)
      if (inboxId !== undefined && !isPersistence(exit)) yield* settle(actor, inboxId)
      // After an infrastructure failure the in-memory state may be ahead of the store: rebuild from the store.
      if (isPersistence(exit)) return actor.fail()
    }
    actor.idle(yield* Clock.currentTimeMillis)
  }).pipe(
    Effect.onExit((exit) =>
      Effect.suspend(() => {
        if (Exit.isSuccess(exit) && !actor.closed()) return Effect.void
        // Interrupted (the supervisor is closing) or closed after a failure: the message in flight and whatever is
        // still queued get an answer, and the actor takes no more.
        return actor.abandon()
      })
    )
  )

/** The accepted message a mailbox message carries, if it came through the durable mailbox. */
export const inboxOf = (message: Message): string | undefined =>
  message._tag === "Run" || message._tag === "Continue" ? message.inboxId : undefined

const isPersistence = (exit: Exit.Exit<Reply, Failure>): boolean =>
  Exit.isFailure(exit) &&
  Option.exists(Cause.failureOption(exit.cause), (error) => error._tag === "PersistenceFailed")

const stopped = (sessionId: string) =>
  new PersistenceFailed({ operation: "actor", message: `the actor of session ${sessionId} stopped` })
