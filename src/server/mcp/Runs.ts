/**
 * Runs — one Corral session driven for an MCP host, from its start (or an approval) to its landing: each persisted
 * turn becomes a progress message, each tool log a log message, a write that waits for a person is put to the host
 * (elicitation) when it can ask, and the caller learns where the session stands.
 *
 * Prevents: an MCP request that hangs. Every wait here has a bound: the wait for a landing ends at `deadlineAt`
 * (the agent's active-time ceiling plus a margin for the landing, computed by the caller), an approval asked of the
 * host ends when the host's answer times out (the write then stays pending, with its token in the answer), and the
 * rounds of approvals are counted. What happens at a bound is visible: the answer says the session is still
 * running (or waiting) and how to follow it, and a warning naming the session is logged.
 *
 * Cancellation: interrupting a drive (the host sent `notifications/cancelled`) cancels the session's burst through
 * `Corral.cancel`, which lands it `cancelled` with its transcript kept.
 */
import { Clock, Effect, Fiber, Option, Stream } from "effect"
import type { Corral } from "../../Corral.js"
import type { Principal } from "../../domain/Principal.js"
import type { SessionView } from "../../domain/Session.js"
import type { SessionEvent } from "../../domain/SessionEvent.js"
import * as Render from "./internal/render.js"

/** The MCP log levels Corral uses. */
export type LogLevel = "debug" | "info" | "notice" | "warning" | "error"

/** A write that waits for a person, as put to the host: the exact call. */
export interface ApprovalRequest {
  readonly sessionId: string
  readonly agentId: string
  readonly tool: string
  readonly arguments: string
  readonly expiresAt?: number
}

/** A person's answer to an `ApprovalRequest`; `undecided` leaves the write pending (no answer, or cancelled). */
export type Decision = "approve" | "reject" | "undecided"

/** What the protocol side offers a drive. Every method never fails. */
export interface Host {
  /** Reports that the session moved (a progress notification when the request carries a progress token). */
  readonly progress: (message: string) => Effect.Effect<void>
  /** A log notification (the host's level filters it). */
  readonly log: (level: LogLevel, message: string) => Effect.Effect<void>
  /** Asks the person behind the host; absent when the host cannot ask (no elicitation capability). */
  readonly decide?: (request: ApprovalRequest) => Effect.Effect<Decision>
}

/** Where a drive left the session: its view (with approval tokens when some were issued) and what to tell the host. */
export interface Outcome {
  readonly view: SessionView
  /** The burst landed (false: the bound of the call passed first, and the session goes on). */
  readonly landed: boolean
  readonly note?: string
}

/** How many rounds of approvals one call decides at most (each round is one assistant turn's writes). */
const MAX_ROUNDS = 16

type Service = Corral["Type"]

const describeEvent = (host: Host, event: SessionEvent): Effect.Effect<void> => {
  switch (event._tag) {
    case "turn":
      return host.progress(Render.turn(event.turn))
    case "tool_log":
      return host.log(
        event.level === "warning" || event.level === "error" ? event.level : "debug",
        `${event.name}: ${event.message}`
      )
    case "exit":
      return host.log("info", `session ${event.sessionId}: the burst ended: ${event.reason}`)
    case "error":
      return host.log("error", `session ${event.sessionId}: ${event.message}`)
    default:
      return Effect.void
  }
}

/** Follows the session until the burst running (or queued) now lands; every event goes to the host. */
const untilLanded = (corral: Service, by: Principal, sessionId: string, host: Host) =>
  corral.events(by, sessionId, { fromSeq: 0, until: "landed" }).pipe(
    Stream.runForEach((event) => describeEvent(host, event))
  )

/** Live turns from `fromSeq` on, to the host, until interrupted (alongside an awaited approval). */
const alongside = (corral: Service, by: Principal, sessionId: string, fromSeq: number, host: Host) =>
  corral.events(by, sessionId, fromSeq).pipe(
    Stream.runForEach((event) => describeEvent(host, event)),
    Effect.ignore
  )

const remaining = (deadlineAt: number) => Effect.map(Clock.currentTimeMillis, (now) => Math.max(0, deadlineAt - now))

const stillRunning = (corral: Service, by: Principal, sessionId: string, waitedFor: string) =>
  Effect.gen(function*() {
    yield* Effect.logWarning(`MCP: session ${sessionId} had not landed when the call's bound passed (${waitedFor})`)
    return {
      view: yield* corral.get(by, sessionId),
      landed: false,
      note: `The session is still running: this call waited ${waitedFor} (its bound) and returns now; the session ` +
        `goes on. Read ${Render.sessionUri(sessionId)} for its transcript and report once it lands.`
    } satisfies Outcome
  })

const lastSeq = (corral: Service, by: Principal, sessionId: string) =>
  Effect.map(corral.turns(by, sessionId), (turns) => turns.at(-1)?.seq ?? 0)

/**
 * Decides the writes the session waits for, round after round: through the host when it can ask (each decision
 * sent with `Corral.approve`, the resumed burst followed to its landing), else the waiting view with fresh tokens.
 */
const settle = (corral: Service, by: Principal, sessionId: string, host: Host, deadlineAt: number) =>
  Effect.gen(function*() {
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const view = yield* corral.get(by, sessionId)
      if (view.status !== "awaiting_confirmation" || view.pending.length === 0) {
        return { view, landed: true } satisfies Outcome
      }
      // Tokens are shown once: fresh ones are issued here for whoever decides next (this host or a person).
      const issued = yield* corral.renewApprovals(by, sessionId)
      if (host.decide === undefined) {
        return { view: issued, landed: true, note: "The session waits for a person's decision on a write." }
      }
      for (const pending of issued.pending) {
        if (pending.token === undefined) continue
        const decision = yield* host.decide({
          sessionId,
          agentId: issued.agentId,
          tool: pending.tool,
          arguments: pending.arguments,
          ...(pending.expiresAt === undefined ? {} : { expiresAt: pending.expiresAt })
        })
        if (decision === "undecided") {
          yield* Effect.logInfo(`MCP: session ${sessionId}: the approval of ${pending.tool} was not answered`)
          return {
            view: issued,
            landed: true,
            note: "The approval was not answered (declined to answer, cancelled or timed out): the write stays pending."
          } satisfies Outcome
        }
        yield* host.log(
          "info",
          `session ${sessionId}: ${pending.tool} ${decision === "approve" ? "approved" : "rejected"}`
        )
        const from = yield* lastSeq(corral, by, sessionId)
        const follower = yield* Effect.fork(alongside(corral, by, sessionId, from, host))
        const wait = yield* remaining(deadlineAt)
        const decided = yield* corral.approve(by, sessionId, pending.token, decision).pipe(
          Effect.timeoutOption(wait),
          Effect.ensuring(Fiber.interrupt(follower))
        )
        if (Option.isNone(decided)) return yield* stillRunning(corral, by, sessionId, `${wait} ms`)
      }
    }
    return {
      view: yield* corral.renewApprovals(by, sessionId),
      landed: true,
      note: `${MAX_ROUNDS} rounds of approvals were decided in this call; the session waits for the next one.`
    } satisfies Outcome
  })

/**
 * Awaits the landing of the burst just started (or queued) for `sessionId`, reporting its events to `host`, then
 * settles its pending writes (`settle`). Ends by `deadlineAt` at the latest; interrupted, it cancels the burst.
 * Fails only with what reading the session fails with.
 */
export const drive = (corral: Service, by: Principal, sessionId: string, host: Host, deadlineAt: number) =>
  Effect.gen(function*() {
    const wait = yield* remaining(deadlineAt)
    const followed = yield* Effect.timeoutOption(untilLanded(corral, by, sessionId, host), wait)
    if (Option.isNone(followed)) return yield* stillRunning(corral, by, sessionId, `${wait} ms`)
    return yield* settle(corral, by, sessionId, host, deadlineAt)
  }).pipe(Effect.onInterrupt(() => cancelled(corral, by, sessionId)))

/**
 * Decides one pending write with `token` (the `approve` tool), then follows the resumed burst like `drive`.
 * Fails with what `Corral.approve` fails with (a token not valid for a waiting write, a write decided already).
 */
export const decide = (
  corral: Service,
  by: Principal,
  sessionId: string,
  token: string,
  decision: "approve" | "reject",
  host: Host,
  deadlineAt: number
) =>
  Effect.gen(function*() {
    const from = yield* lastSeq(corral, by, sessionId)
    const follower = yield* Effect.fork(alongside(corral, by, sessionId, from, host))
    const wait = yield* remaining(deadlineAt)
    const decided = yield* corral.approve(by, sessionId, token, decision).pipe(
      Effect.timeoutOption(wait),
      Effect.ensuring(Fiber.interrupt(follower))
    )
    if (Option.isNone(decided)) return yield* stillRunning(corral, by, sessionId, `${wait} ms`)
    return yield* settle(corral, by, sessionId, host, deadlineAt)
  }).pipe(Effect.onInterrupt(() => cancelled(corral, by, sessionId)))

/** The host cancelled the call: cancel the burst (bounded by `Corral.cancel`) and say so in the log. */
const cancelled = (corral: Service, by: Principal, sessionId: string) =>
  corral.cancel(by, sessionId).pipe(
    Effect.tap((view) =>
      Effect.logInfo(
        `MCP: the host cancelled its call; session ${sessionId} is ${view.status} (${view.exitReason ?? "-"})`
      )
    ),
    Effect.catchAll((error) => Effect.logWarning(`MCP: cancelling session ${sessionId} failed: ${error.message}`))
  )
