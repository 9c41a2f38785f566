/**
 * A session as an actor: its state, its conversation, and a mailbox that serialises `Run`, `Continue` and `Approve`.
 *
 * One message is processed at a time, so one burst runs at a time per session and a follow-up sent during a burst
 * waits its turn. `Cancel` does not queue: it signals the running burst, which exits `cancelled` with its transcript
 * kept. When the mailbox stays empty for the idle time, the actor passivates (its fiber ends; the supervisor forgets
 * it) and the next message rebuilds it from the store — the store, not the actor, is the source of truth.
 */
import { Cause, Clock, Deferred, Duration, Effect, Exit, FiberId, Option, Queue } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import { InvalidSessionState, PersistenceFailed } from "../domain/Errors.js"
import type { Turn, TurnEntry } from "../domain/Message.js"
import type { PendingConfirmation, Resolution, Session } from "../domain/Session.js"
import type { SessionEvents } from "../events/SessionEvents.js"
import type { Providers } from "../model/ModelProvider.js"
import * as Budget from "../rails/Budget.js"
import * as Limits from "../rails/Limits.js"
import * as Truncate from "../rails/Truncate.js"
import { SessionStore } from "../store/SessionStore.js"
import { ToolExecutor } from "../tools/ToolExecutor.js"
import * as Run from "./Run.js"

/** The messages an actor's mailbox takes. */
export type Message =
  | {
    readonly _tag: "Run"
    readonly text: string
    readonly context?: string
    readonly notes?: ReadonlyArray<{ readonly code: string; readonly message: string }>
  }
  | { readonly _tag: "Continue"; readonly text: string }
  | { readonly _tag: "Approve"; readonly token: string; readonly decision: "approve" | "reject" }

/** Why a message could not be processed. */
export type Failure = PersistenceFailed | InvalidSessionState

interface Envelope {
  readonly message: Message
  readonly reply: Deferred.Deferred<Session, Failure>
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
  /** Enqueues a message; `None` when the actor has closed (start a new one). */
  readonly offer: (message: Message) => Option.Option<Deferred.Deferred<Session, Failure>>
  /** Signals the running burst to stop. `true` when a burst was running. */
  readonly cancel: Effect.Effect<boolean>
  /** The actor's fiber body: processes messages until idle for `idleTimeout`, then closes. */
  readonly run: Effect.Effect<void, never, Requirements>
}

/** The conversation a transcript holds: every entry, with an unpaired tail repaired (see `repairTail`). */
export const history = (turns: ReadonlyArray<Turn>): Array<TurnEntry> => turns.map((t) => t.entry)

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
      content: `the process stopped while "${call.name}" was running; its outcome is unknown and it was NOT run ` +
        "again. Check its effect before calling it again.",
      isError: true,
      status: "unknown_outcome" as const
    }))
  })
}

const resolutionText = (pending: ReadonlyArray<PendingConfirmation>): string =>
  pending.map((p) =>
    p.resolution?.decision === "approve"
      ? `The person APPROVED "${p.tool}" with arguments ${p.arguments}. It ran${
        p.resolution.isError ? " and FAILED" : ""
      }. Its result:\n${p.resolution.content}`
      : `The person DECLINED "${p.tool}" with arguments ${p.arguments}. It did not run.`
  ).join("\n\n")

/** Builds an actor over a session already in the store, its agent spec and its conversation. */
export const make = (options: {
  readonly session: Session
  readonly spec: AgentSpec
  readonly history: ReadonlyArray<TurnEntry>
  readonly idleTimeout: Duration.DurationInput
  /** Called once, synchronously, when the actor closes (the supervisor forgets it). */
  readonly onClose: () => void
}): Actor => {
  let session = options.session
  let conversation: ReadonlyArray<TurnEntry> = options.history
  let closed = false
  let running: Deferred.Deferred<void> | undefined
  let inFlight: Envelope | undefined
  const mailbox = Effect.runSync(Queue.unbounded<Envelope>())
  const idle = Duration.decode(options.idleTimeout)

  const close = () => {
    if (closed) return
    closed = true
    options.onClose()
  }

  const burst = (opening: TurnEntry, notes: ReadonlyArray<{ readonly code: string; readonly message: string }> = []) =>
    Effect.gen(function*() {
      const cancel = yield* Deferred.make<void>()
      running = cancel
      const before = session
      // Readers (`get`) see the burst in flight, as the store does.
      session = { ...session, state: { ...session.state, status: "running" } }
      const landed = yield* Run.burst({
        session: before,
        spec: options.spec,
        history: conversation,
        opening,
        cancel,
        notes
      })
        .pipe(
          Effect.ensuring(Effect.sync(() => (running = undefined)))
        )
      session = { ...session, state: landed.state, updatedAt: landed.trajectory.endedAt }
      conversation = landed.messages
      return session
    })

  const approve = (token: string, decision: "approve" | "reject") =>
    Effect.gen(function*() {
      const pending = session.state.pending
      const target = pending.find((p) => p.token === token)
      if (target === undefined) {
        return yield* new InvalidSessionState({
          sessionId: session.id,
          message: "no pending write has this token (unknown, expired, or for another session)"
        })
      }
      // Deciding twice is not an error: the first decision stands.
      if (target.resolution !== undefined) return session
      const resolution = yield* resolve(target, decision)
      const next = pending.map((p) => p === target ? { ...p, resolution } : p)
      const now = yield* Clock.currentTimeMillis
      const claimed = decision === "approve" ? 1 : 0
      session = {
        ...session,
        state: { ...session.state, pending: next, toolCalls: session.state.toolCalls + claimed },
        updatedAt: now
      }
      yield* (yield* SessionStore).saveState(session.id, session.state, now)
      if (next.some((p) => p.resolution === undefined)) return session
      // Every pending write is decided: the model hears the outcome as data and carries on.
      return yield* burst({
        kind: "user",
        text: "The pending write(s) were decided by a person (see the context). Report the outcome and continue.",
        context: resolutionText(next)
      })
    })

  // The approved call runs FIRST, from exactly what the person was shown; the model only reports it afterwards.
  const resolve = (target: PendingConfirmation, decision: "approve" | "reject") =>
    Effect.gen(function*() {
      if (decision === "reject") {
        return { decision, content: "declined by a person; it did not run", isError: false } satisfies Resolution
      }
      const limits = yield* Limits.Limits
      const budget = { toolCalls: session.state.toolCalls, tokens: session.state.usage.total }
      if (Option.isNone(Budget.claimTool(budget, limits))) {
        return { decision, content: Budget.budgetNotice(target.tool, limits.toolCalls), isError: true } as Resolution
      }
      const executor = yield* ToolExecutor
      const outcome = yield* executor.call(target.tool, target.arguments, {
        sessionId: session.id,
        principal: session.principal,
        scope: session.scope,
        runId: "approval",
        callId: target.callId
      })
      const content = Truncate.truncate(outcome.content, limits.toolResultMaxBytes).text
      return { decision, content, isError: outcome.isError } satisfies Resolution
    })

  const handle = (message: Message) => {
    switch (message._tag) {
      case "Run":
        return burst({
          kind: "user",
          text: message.text,
          ...(message.context === undefined ? {} : { context: message.context })
        }, message.notes)
      case "Continue":
        if (session.state.status === "awaiting_confirmation") {
          return Effect.fail(
            new InvalidSessionState({
              sessionId: session.id,
              message: "the session waits for a decision on its pending write(s): approve or reject them first"
            })
          )
        }
        return burst({ kind: "user", text: message.text })
      case "Approve":
        return approve(message.token, message.decision)
    }
  }

  const run = Effect.gen(function*() {
    while (true) {
      const next = yield* Effect.timeoutOption(Queue.take(mailbox), idle)
      if (Option.isNone(next)) {
        // Synchronous check-and-close: no message can slip in between (offers are synchronous too).
        if (Option.getOrElse(mailbox.unsafeSize(), () => 0) === 0) return close()
        continue
      }
      inFlight = next.value
      const exit = yield* Effect.exit(handle(next.value.message))
      inFlight = undefined
      yield* Deferred.done(next.value.reply, exit)
      // After an infrastructure failure the in-memory state may be ahead of the store: rebuild from the store.
      if (isPersistence(exit)) return close()
    }
  }).pipe(
    Effect.ensuring(Effect.suspend(() => {
      close()
      // The message in flight (if the fiber was interrupted) and whatever is still queued get an answer.
      const interrupted = inFlight === undefined ? [] : [inFlight]
      return Effect.flatMap(
        Effect.map(Queue.takeAll(mailbox), (queued) => [...interrupted, ...queued]),
        Effect.forEach((envelope) => Deferred.fail(envelope.reply, stopped(session.id)), { discard: true })
      )
    }))
  )

  return {
    sessionId: session.id,
    orgId: session.principal.orgId,
    session: () => session,
    closed: () => closed,
    offer: (message) => {
      if (closed) return Option.none()
      const reply = Deferred.unsafeMake<Session, Failure>(FiberId.none)
      mailbox.unsafeOffer({ message, reply })
      return Option.some(reply)
    },
    cancel: Effect.suspend(() => running === undefined ? Effect.succeed(false) : Deferred.succeed(running, undefined)),
    run
  }
}

const isPersistence = (exit: Exit.Exit<Session, Failure>): boolean =>
  Exit.isFailure(exit) &&
  Option.exists(Cause.failureOption(exit.cause), (error) => error._tag === "PersistenceFailed")

const stopped = (sessionId: string) =>
  new PersistenceFailed({ operation: "actor", message: `the actor of session ${sessionId} stopped` })
