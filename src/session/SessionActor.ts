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
 * fiber parked on its mailbox with an idle timer cost ~28 KB per idle session and a timeout race (two fibers and a
 * timer) per message (docs/benchmarks.md, Workload C). When the actor has been idle for the idle time, the supervisor
 * passivates it (`passivate`: it closes and is forgotten) and the next message rebuilds it from the store — the store,
 * not the actor, is the source of truth.
 */
import { Cause, Clock, Deferred, Effect, Exit, FiberId, Option } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { IssuedToken } from "../domain/Approval.js"
import { AlreadyDecided, InvalidSessionState, PersistenceFailed } from "../domain/Errors.js"
import type { ActorFailure } from "../domain/Errors.js"
import type { TurnEntry } from "../domain/Message.js"
import type { Principal } from "../domain/Principal.js"
import type { PendingConfirmation, Resolution, Session, SessionState } from "../domain/Session.js"
import { currentRound, undecided } from "../domain/Session.js"
import { SessionEvents } from "../events/SessionEvents.js"
import type { Providers } from "../model/ModelProvider.js"
import * as Budget from "../rails/Budget.js"
import * as Limits from "../rails/Limits.js"
import * as Truncate from "../rails/Truncate.js"
import { SessionStore } from "../store/SessionStore.js"
import * as GenAi from "../telemetry/GenAi.js"
import * as Approvals from "../tools/Approvals.js"
import { ToolExecutor } from "../tools/ToolExecutor.js"
import type * as Admission from "./Admission.js"
import { Ids } from "./Ids.js"
import * as Run from "./Run.js"
import * as Transcript from "./Transcript.js"

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

interface Envelope {
  readonly message: Message
  readonly reply: Deferred.Deferred<Reply, Failure>
}

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
export const waitingForDecision =
  "the session waits for a decision on its pending write(s): approve or reject them first"

/** What the model and the person are told of a call that was running when the process died. */
const unknownOutcomeText = (tool: string): string =>
  `the process stopped while "${tool}" was running; its outcome is unknown and it was NOT run again. Check its ` +
  "effect before calling it again."

/**
 * The tool_results entry for an assistant turn whose results were never persisted (the process died mid-turn):
 * every call is `unknown_outcome` and is never re-run automatically. `None` when the tail is paired.
 */
export const repairTail = (entries: ReadonlyArray<TurnEntry>): Option.Option<TurnEntry> => {
  const last = entries.at(-1)
  if (last?.kind !== "assistant" || last.toolCalls.length === 0) return Option.none()
  return Option.some({
    kind: "tool_results",
    results: last.toolCalls.map((call) => ({
      callId: call.id,
      name: call.name,
      content: unknownOutcomeText(call.name),
      isError: true,
      status: "unknown_outcome" as const
    }))
  })
}

const resolutionText = (round: ReadonlyArray<PendingConfirmation>): string =>
  round.map((p) => {
    const r = p.resolution
    if (r?.decision !== "approve") {
      return `The person DECLINED "${p.tool}" with arguments ${p.arguments}. It did not run.`
    }
    if (r.status === "not_executed") {
      return `The person APPROVED "${p.tool}" with arguments ${p.arguments}, but it did NOT run: ${r.content}`
    }
    if (r.status === "unknown_outcome") {
      return `The person APPROVED "${p.tool}" with arguments ${p.arguments}. ${r.content}`
    }
    return `The person APPROVED "${p.tool}" with arguments ${p.arguments}. It ran${
      r.isError ? " and FAILED" : ""
    }. Its result:\n${r.content}`
  }).join("\n\n")

const unknownOutcome = (p: PendingConfirmation): Resolution => ({
  decision: "approve",
  content: unknownOutcomeText(p.tool),
  isError: true,
  status: "unknown_outcome"
})

/**
 * The repair of an approved write that was dispatched but whose outcome was never saved (the process died while it
 * ran): it is resolved `unknown_outcome`, never re-run, and a notice tells the model and the person. When other
 * writes still wait, the session waits for them; otherwise it is `interrupted` (resume with Continue) and the notice
 * carries the whole round's outcome, since the burst that would have reported it never ran.
 * `None` when nothing needs repair.
 */
export const repairPending = (
  state: SessionState
): Option.Option<{ readonly state: SessionState; readonly notice: TurnEntry }> => {
  if (!state.pending.some((p) => p.dispatchedAt !== undefined && p.resolution === undefined)) return Option.none()
  const pending = state.pending.map((p) =>
    p.dispatchedAt !== undefined && p.resolution === undefined
      ? { ...p, resolution: unknownOutcome(p), unreported: true as const }
      : p
  )
  const waiting = undecided({ pending }).length > 0
  const repaired = state.pending.filter((p) => p.dispatchedAt !== undefined && p.resolution === undefined)
  const text = waiting
    ? repaired.map((p) => `Approved "${p.tool}" with arguments ${p.arguments}: ${unknownOutcome(p).content}`)
      .join("\n")
    : `The approved write(s) were decided, but the process stopped before they were reported:\n\n${
      resolutionText(currentRound(pending))
    }`
  return Option.some({
    state: { ...state, pending, status: waiting ? "awaiting_confirmation" : "interrupted" },
    notice: { kind: "notice", rail: "Approvals", text }
  })
}

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

/**
 * The actor: its state in fields, its behaviour on the prototype. A host keeps an actor per live session, so what one
 * costs is per session: as a closure per operation over a shared scope (and a generator function of its own for the
 * drain, which V8 gives a prototype and two hidden classes the first time it runs) an idle actor was ~3 KB
 * (docs/benchmarks.md at 09f4c1e, "Issue 14, ninth pass"); as an object it is its fields.
 */
class LiveActor implements Actor {
  readonly sessionId: string
  readonly orgId: string
  private current: Session
  private conversation: ReadonlyArray<TurnEntry>
  private isClosed = false
  private running: Deferred.Deferred<void> | undefined = undefined
  /** Completed once the burst in flight has landed and `current` holds its state; `undefined` when none runs. */
  private landing: Deferred.Deferred<void> | undefined = undefined
  private inFlight: Envelope | undefined = undefined
  /** Messages not yet taken by the drain, oldest first; only this actor touches it. */
  private mailbox: Array<Envelope> = []
  /** Whether a drain fiber runs (or is about to): set by the offer that starts it, cleared when it finds no message. */
  private draining = false
  /** When the last drain ended (or the actor was made). */
  private lastDrained: number

  private readonly spec: AgentSpec
  private readonly start: Options["start"]
  private readonly onClose: Options["onClose"]
  private readonly later: Options["later"]
  private readonly admission: Options["admission"]

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

  private reply(tokens: ReadonlyArray<IssuedToken> = []): Reply {
    return { session: this.current, tokens }
  }

  /** The limits of this session's agent (host ∩ spec), as its bursts run under: the approval path obeys them too. */
  private get agentLimits() {
    return Effect.map(Limits.Limits, (host) => Limits.effective(host, this.spec.limits))
  }

  private burst(
    opening: TurnEntry,
    extra: Pick<Run.Request, "notes"> = {}
  ): Effect.Effect<Reply, PersistenceFailed, Requirements> {
    return Effect.gen(this, function*() {
      const cancel = yield* Deferred.make<void>()
      const done = yield* Deferred.make<void>()
      this.running = cancel
      this.landing = done
      const before = this.current
      const { later, orgId, sessionId } = this
      // Readers (`get`) see the burst in flight, as the store does.
      this.current = { ...this.current, state: { ...this.current.state, status: "running" } }
      const run = Run.burst({
        session: before,
        spec: this.spec,
        history: this.conversation,
        opening,
        cancel,
        ...extra,
        ...(later === undefined ? {} : { later: (settle) => later(sessionId, orgId, settle) })
      })
      // While it waits for a place the session reads `running` (its message is accepted) and can be cancelled.
      const admission = this.admission
      const landed = yield* (admission === undefined ? run : admission.admit(run, cancel)).pipe(
        Effect.ensuring(Effect.sync(() => (this.running = undefined)))
      )
      this.current = { ...this.current, state: landed.state, updatedAt: landed.trajectory.endedAt }
      this.conversation = landed.messages
      return this.reply(landed.tokens)
    }).pipe(
      // After the landed state is held (or the burst failed): a `cancel` awaiting it then reads the landed view.
      Effect.ensuring(Effect.suspend(() => {
        const done = this.landing
        this.landing = undefined
        return done === undefined ? Effect.void : Deferred.succeed(done, undefined)
      }))
    )
  }

  /** Saves `state` as the session's state now. */
  private save(state: SessionState) {
    return Effect.gen(this, function*() {
      const now = yield* Clock.currentTimeMillis
      yield* (yield* SessionStore).saveState(this.current.id, state, now)
      this.current = { ...this.current, state, updatedAt: now }
    })
  }

  // A refused decision is recorded in the transcript (the person and the model see it), then answered with the
  // reason; the session keeps waiting for a valid decision (or, when its write was decided, as it stands).
  private recordRefusal<E>(
    text: string,
    error: E,
    refusal: { readonly reason: string; readonly decision: "approve" | "reject"; readonly callId?: string }
  ) {
    return Effect.gen(this, function*() {
      const limits = yield* this.agentLimits
      const entry: TurnEntry = { kind: "notice", rail: "Approvals", text: `A decision was refused: ${text}.` }
      const ports = { store: yield* SessionStore, events: yield* SessionEvents }
      const turn = yield* Transcript.append(
        ports,
        this.current.id,
        entry,
        yield* Clock.currentTimeMillis,
        limits.persistTimeoutMs
      )
      // When the store closed calls another writer left open, this conversation may lack them: read it again.
      this.conversation = turn.closed === undefined
        ? [...this.conversation, entry]
        : Transcript.history(yield* ports.store.turns(this.orgId, this.sessionId))
      return yield* Effect.fail(error)
    }).pipe(GenAi.approvalRefused(this.current, { ...refusal, notice: text }))
  }

  private refuse(refusal: Approvals.Refusal, decision: "approve" | "reject") {
    const text = Approvals.refusalText(refusal)
    return this.recordRefusal(
      text,
      new InvalidSessionState({ sessionId: this.current.id, message: text, reason: refusal }),
      { reason: refusal, decision }
    )
  }

  private approve(by: Principal, tokenHash: string, decision: "approve" | "reject") {
    return Effect.gen(this, function*() {
      const store = yield* SessionStore
      const now = yield* Clock.currentTimeMillis
      const session = this.current
      const record = yield* store.findApproval(session.principal.orgId, session.id, tokenHash)
      const verdict = Approvals.check({ record, by, session, now })
      // Deciding twice is refused and recorded: the first decision stands, and the client is told which it was (a
      // 200 here read as "approved" to a client whose approve came after a reject, and nothing showed it).
      if (verdict._tag === "AlreadyDecided") {
        const text = Approvals.alreadyDecidedText(verdict.target)
        return yield* this.recordRefusal(
          text,
          new AlreadyDecided({
            sessionId: session.id,
            message: text,
            reason: "already_decided",
            decision: verdict.decision,
            callId: verdict.target.callId
          }),
          { reason: "already_decided", decision, callId: verdict.target.callId }
        )
      }
      if (verdict._tag === "Refused") return yield* this.refuse(verdict.refusal, decision)
      if (!(yield* store.spendApproval(tokenHash, now))) return yield* this.refuse("spent", decision)
      const resolution = yield* this.resolve(verdict.target, decision, by)
      const pending = this.current.state.pending.map((p) =>
        p.callId === verdict.target.callId && p.turnSeq === verdict.target.turnSeq
          ? { ...p, resolution, unreported: true as const }
          : p
      )
      const claimed = resolution.status === "ok" || resolution.status === "error" ? 1 : 0
      yield* this.save({
        ...this.current.state,
        status: "awaiting_confirmation",
        pending,
        toolCalls: this.current.state.toolCalls + claimed
      })
      if (undecided(this.current.state).length > 0) return this.reply()
      // Every pending write is decided: the model hears the outcome as data and carries on.
      const round = currentRound(this.current.state.pending)
      return yield* this.burst({
        kind: "user",
        text: "The pending write(s) were decided by a person (see the context). Report the outcome and continue.",
        context: resolutionText(round)
      })
    })
  }

  // The approved call runs FIRST, from exactly what the person was shown; the model only reports it afterwards.
  private resolve(target: PendingConfirmation, decision: "approve" | "reject", by: Principal) {
    return Effect.gen(this, function*() {
      const decidedBy = by.userId
      if (decision === "reject") {
        return {
          decision,
          content: "declined by a person; it did not run",
          isError: false,
          status: "not_executed",
          decidedBy
        } satisfies Resolution
      }
      const limits = yield* this.agentLimits
      const budget = { toolCalls: this.current.state.toolCalls, tokens: this.current.state.usage.total }
      if (Option.isNone(Budget.claimTool(budget, limits))) {
        const content = Budget.budgetNotice(target.tool, limits.toolCalls)
        return { decision, content, isError: true, status: "not_executed", decidedBy } satisfies Resolution
      }
      // The dispatch marker is saved first: if the process dies while the call runs, the write is `unknown_outcome`
      // after the restart (repairPending) instead of being run a second time.
      const startedAt = yield* Clock.currentTimeMillis
      // The session is `running` meanwhile, so recovery at start finds it if the process dies.
      yield* this.save({
        ...this.current.state,
        status: "running",
        pending: this.current.state.pending.map((p) =>
          p.callId === target.callId && p.turnSeq === target.turnSeq ? { ...p, dispatchedAt: startedAt } : p
        )
      })
      const executor = yield* ToolExecutor
      const session = this.current
      const outcome = yield* executor.call(target.tool, target.arguments, {
        sessionId: session.id,
        principal: session.principal,
        scope: session.scope,
        runId: "approval",
        callId: target.callId,
        timeoutMs: limits.toolTimeoutMs
      })
      const durationMs = Math.max(0, (yield* Clock.currentTimeMillis) - startedAt)
      const content = Truncate.truncate(outcome.content, limits.toolResultMaxBytes).text
      const status = outcome.isError ? "error" as const : "ok" as const
      return { decision, content, isError: outcome.isError, status, decidedBy, durationMs } satisfies Resolution
    })
  }

  private renew(by: Principal) {
    return Effect.gen(this, function*() {
      const session = this.current
      if (by.orgId !== session.principal.orgId || by.userId !== session.principal.userId) {
        return yield* new InvalidSessionState({
          sessionId: session.id,
          message: Approvals.refusalText("other_principal")
        })
      }
      // A write already dispatched is never offered again: its outcome is known or unknown, not pending.
      const waiting = undecided(session.state).filter((p) => p.dispatchedAt === undefined)
      if (waiting.length === 0) {
        return yield* new InvalidSessionState({ sessionId: session.id, message: "no write waits for a decision" })
      }
      const { issued, records } = Approvals.issue({
        session,
        pending: waiting,
        now: yield* Clock.currentTimeMillis,
        settings: yield* Approvals.ApprovalSettings,
        mint: (yield* Ids).token
      })
      yield* (yield* SessionStore).issueApprovals(session.id, records)
      return this.reply(issued)
    })
  }

  /** Processes one message. */
  handle(message: Message): Effect.Effect<Reply, Failure, Requirements> {
    switch (message._tag) {
      case "Run":
        return this.burst({
          kind: "user",
          text: message.text,
          ...(message.context === undefined ? {} : { context: message.context }),
          ...(message.inboxId === undefined ? {} : { messageId: message.inboxId })
        }, message.notes === undefined ? {} : { notes: message.notes })
      case "Continue":
        if (this.current.state.status === "awaiting_confirmation") {
          return Effect.fail(
            new InvalidSessionState({
              sessionId: this.current.id,
              message: waitingForDecision
            })
          )
        }
        return this.burst({
          kind: "user",
          text: message.text,
          ...(message.inboxId === undefined ? {} : { messageId: message.inboxId })
        })
      case "Approve":
        return this.approve(message.by, message.tokenHash, message.decision)
      case "Renew":
        return this.renew(message.by)
    }
  }

  /** Forgets a settled accepted message; a failure only leaves the row for the next load to settle. */
  settle(inboxId: string) {
    const sessionId = this.current.id
    return Effect.flatMap(SessionStore, (store) => store.settle(sessionId, inboxId)).pipe(
      Effect.catchAll((error) =>
        Effect.logWarning(`session ${sessionId}: accepted message ${inboxId} not settled: ${error.message}`)
      )
    )
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
      const exit = yield* Effect.exit(actor.handle(envelope.message))
      actor.taken()
      yield* Deferred.done(envelope.reply, exit)
      // The accepted message was taken up (its user turn is stored) or refused: the mailbox row can go (after the
      // answer: the caller need not wait for it). After an infrastructure failure it stays; the next load finds
      // whether its turn was stored (`messageId`) and runs it if not.
      const inboxId = inboxOf(envelope.message)
      if (inboxId !== undefined && !isPersistence(exit)) yield* actor.settle(inboxId)
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
