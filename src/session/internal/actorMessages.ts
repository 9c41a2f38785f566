/**
 * actorMessages — what each message does to a session's actor (liveActor.ts): `Run` and `Continue` run a burst,
 * `Approve` decides a pending write (running it first when approved), `Renew` issues fresh approval tokens. Each is a
 * module-level function taking the actor, so an actor holds no closure per operation.
 */
import { Clock, Deferred, Effect, Option } from "effect"
import type { IssuedToken } from "../../domain/Approval.js"
import { AlreadyDecided, InvalidSessionState } from "../../domain/Errors.js"
import type { PersistenceFailed } from "../../domain/Errors.js"
import type { TurnEntry } from "../../domain/Message.js"
import type { Principal } from "../../domain/Principal.js"
import type { PendingConfirmation, Resolution, SessionState } from "../../domain/Session.js"
import { currentRound, undecided } from "../../domain/Session.js"
import { SessionEvents } from "../../events/SessionEvents.js"
import * as Budget from "../../rails/Budget.js"
import * as Limits from "../../rails/Limits.js"
import * as Truncate from "../../rails/Truncate.js"
import { SessionStore } from "../../store/SessionStore.js"
import * as GenAi from "../../telemetry/GenAi.js"
import * as Approvals from "../../tools/Approvals.js"
import { ToolExecutor } from "../../tools/ToolExecutor.js"
import { Ids } from "../Ids.js"
import * as Run from "../Run.js"
import type { Failure, Message, Reply, Requirements } from "../SessionActor.js"
import * as Transcript from "../Transcript.js"
import { resolutionText } from "./actorRepair.js"
import type { LiveActor } from "./liveActor.js"

/** Why a follow-up is refused while writes wait for a person's decision. */
export const waitingForDecision =
  "the session waits for a decision on its pending write(s): approve or reject them first"

/** Processes one message. */
export const handle = (actor: LiveActor, message: Message): Effect.Effect<Reply, Failure, Requirements> => {
  switch (message._tag) {
    case "Run":
      return burst(actor, {
        kind: "user",
        text: message.text,
        ...(message.context === undefined ? {} : { context: message.context }),
        ...(message.inboxId === undefined ? {} : { messageId: message.inboxId })
      }, message.notes === undefined ? {} : { notes: message.notes })
    case "Continue":
      if (actor.current.state.status === "awaiting_confirmation") {
        return Effect.fail(new InvalidSessionState({ sessionId: actor.current.id, message: waitingForDecision }))
      }
      return burst(actor, {
        kind: "user",
        text: message.text,
        ...(message.inboxId === undefined ? {} : { messageId: message.inboxId })
      })
    case "Approve":
      return approve(actor, message.by, message.tokenHash, message.decision)
    case "Renew":
      return renew(actor, message.by)
  }
}

/** Forgets a settled accepted message; a failure only leaves the row for the next load to settle. */
export const settle = (actor: LiveActor, inboxId: string) => {
  const sessionId = actor.current.id
  return Effect.flatMap(SessionStore, (store) => store.settle(sessionId, inboxId)).pipe(
    Effect.catchAll((error) =>
      Effect.logWarning(`session ${sessionId}: accepted message ${inboxId} not settled: ${error.message}`)
    )
  )
}

const reply = (actor: LiveActor, tokens: ReadonlyArray<IssuedToken> = []): Reply => ({
  session: actor.current,
  tokens
})

/** The limits of this session's agent (host ∩ spec), as its bursts run under: the approval path obeys them too. */
const agentLimits = (actor: LiveActor) => Effect.map(Limits.Limits, (host) => Limits.effective(host, actor.spec.limits))

const burst = (
  actor: LiveActor,
  opening: TurnEntry,
  extra: Pick<Run.Request, "notes"> = {}
): Effect.Effect<Reply, PersistenceFailed, Requirements> =>
  Effect.gen(function*() {
    const cancel = yield* Deferred.make<void>()
    const done = yield* Deferred.make<void>()
    actor.running = cancel
    actor.landing = done
    const before = actor.current
    const { later, orgId, sessionId } = actor
    // Readers (`get`) see the burst in flight, as the store does.
    actor.current = { ...actor.current, state: { ...actor.current.state, status: "running" } }
    const run = Run.burst({
      session: before,
      spec: actor.spec,
      history: actor.conversation,
      opening,
      cancel,
      ...extra,
      ...(later === undefined ? {} : { later: (settle) => later(sessionId, orgId, settle) })
    })
    // While it waits for a place the session reads `running` (its message is accepted) and can be cancelled.
    const admission = actor.admission
    const landed = yield* (admission === undefined ? run : admission.admit(run, cancel)).pipe(
      Effect.ensuring(Effect.sync(() => (actor.running = undefined)))
    )
    actor.current = { ...actor.current, state: landed.state, updatedAt: landed.trajectory.endedAt }
    actor.conversation = landed.messages
    return reply(actor, landed.tokens)
  }).pipe(
    // After the landed state is held (or the burst failed): a `cancel` awaiting it then reads the landed view.
    Effect.ensuring(Effect.suspend(() => {
      const done = actor.landing
      actor.landing = undefined
      return done === undefined ? Effect.void : Deferred.succeed(done, undefined)
    }))
  )

/** Saves `state` as the session's state now. */
const save = (actor: LiveActor, state: SessionState) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    yield* (yield* SessionStore).saveState(actor.current.id, state, now)
    actor.current = { ...actor.current, state, updatedAt: now }
  })

// A refused decision is recorded in the transcript (the person and the model see it), then answered with the
// reason; the session keeps waiting for a valid decision (or, when its write was decided, as it stands).
const recordRefusal = <E>(
  actor: LiveActor,
  text: string,
  error: E,
  refusal: { readonly reason: string; readonly decision: "approve" | "reject"; readonly callId?: string }
) =>
  Effect.gen(function*() {
    const limits = yield* agentLimits(actor)
    const entry: TurnEntry = { kind: "notice", rail: "Approvals", text: `A decision was refused: ${text}.` }
    const ports = { store: yield* SessionStore, events: yield* SessionEvents }
    const turn = yield* Transcript.append(
      ports,
      actor.current.id,
      entry,
      yield* Clock.currentTimeMillis,
      limits.persistTimeoutMs
    )
    // When the store closed calls another writer left open, this conversation may lack them: read it again.
    actor.conversation = turn.closed === undefined
      ? [...actor.conversation, entry]
      : Transcript.history(yield* ports.store.turns(actor.orgId, actor.sessionId))
    return yield* Effect.fail(error)
  }).pipe(GenAi.approvalRefused(actor.current, { ...refusal, notice: text }))

const refuse = (actor: LiveActor, refusal: Approvals.Refusal, decision: "approve" | "reject") => {
  const text = Approvals.refusalText(refusal)
  return recordRefusal(
    actor,
    text,
    new InvalidSessionState({ sessionId: actor.current.id, message: text, reason: refusal }),
    { reason: refusal, decision }
  )
}

const approve = (actor: LiveActor, by: Principal, tokenHash: string, decision: "approve" | "reject") =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const now = yield* Clock.currentTimeMillis
    const session = actor.current
    const record = yield* store.findApproval(session.principal.orgId, session.id, tokenHash)
    const verdict = Approvals.check({ record, by, session, now })
    // Deciding twice is refused and recorded: the first decision stands, and the client is told which it was (a
    // 200 here read as "approved" to a client whose approve came after a reject, and nothing showed it).
    if (verdict._tag === "AlreadyDecided") {
      const text = Approvals.alreadyDecidedText(verdict.target)
      return yield* recordRefusal(
        actor,
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
    if (verdict._tag === "Refused") return yield* refuse(actor, verdict.refusal, decision)
    if (!(yield* store.spendApproval(tokenHash, now))) return yield* refuse(actor, "spent", decision)
    const resolution = yield* resolve(actor, verdict.target, decision, by)
    const pending = actor.current.state.pending.map((p) =>
      p.callId === verdict.target.callId && p.turnSeq === verdict.target.turnSeq
        ? { ...p, resolution, unreported: true as const }
        : p
    )
    const claimed = resolution.status === "ok" || resolution.status === "error" ? 1 : 0
    yield* save(actor, {
      ...actor.current.state,
      status: "awaiting_confirmation",
      pending,
      toolCalls: actor.current.state.toolCalls + claimed
    })
    if (undecided(actor.current.state).length > 0) return reply(actor)
    // Every pending write is decided: the model hears the outcome as data and carries on.
    const round = currentRound(actor.current.state.pending)
    return yield* burst(actor, {
      kind: "user",
      text: "The pending write(s) were decided by a person (see the context). Report the outcome and continue.",
      context: resolutionText(round)
    })
  })

// The approved call runs FIRST, from exactly what the person was shown; the model only reports it afterwards.
const resolve = (actor: LiveActor, target: PendingConfirmation, decision: "approve" | "reject", by: Principal) =>
  Effect.gen(function*() {
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
    const limits = yield* agentLimits(actor)
    const budget = { toolCalls: actor.current.state.toolCalls, tokens: actor.current.state.usage.total }
    if (Option.isNone(Budget.claimTool(budget, limits))) {
      const content = Budget.budgetNotice(target.tool, limits.toolCalls)
      return { decision, content, isError: true, status: "not_executed", decidedBy } satisfies Resolution
    }
    // The dispatch marker is saved first: if the process dies while the call runs, the write is `unknown_outcome`
    // after the restart (repairPending) instead of being run a second time.
    const startedAt = yield* Clock.currentTimeMillis
    // The session is `running` meanwhile, so recovery at start finds it if the process dies.
    yield* save(actor, {
      ...actor.current.state,
      status: "running",
      pending: actor.current.state.pending.map((p) =>
        p.callId === target.callId && p.turnSeq === target.turnSeq ? { ...p, dispatchedAt: startedAt } : p
      )
    })
    const executor = yield* ToolExecutor
    const session = actor.current
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

const renew = (actor: LiveActor, by: Principal) =>
  Effect.gen(function*() {
    const session = actor.current
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
    return reply(actor, issued)
  })
