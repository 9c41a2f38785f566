/**
 * inbox — an accepted message is stored, so it must run: the deliveries of the durable mailbox that do not ride on a
 * caller of `send` — to a session being loaded, again after the store failed, and by the sweep.
 *
 * How an accepted message that the store kept from its burst is delivered again (`redeliver`): soon (after 0.5 s,
 * doubling to 5 s, so it runs within seconds of the store's return), for at most 10 minutes — then it is left to the
 * inbox sweep, and the log says so. A session whose deliveries keep failing after the store answered (it reads but
 * does not write) is left to the sweep after `maxRedeliveries` rounds in a row, also logged.
 *
 * The inbox sweep (local hosting) is the bound on everything else: every period (`Options.inboxSweep`, 30 s by
 * default) it lists the accepted messages older than one period that no caller and no actor holds, and delivers them
 * (through a live actor, or by loading the session). So an accepted message never waits on an event that may not come
 * — a next message, a restart — once the store answers again: it runs within two periods of that. Why the bound
 * sits at 30 s: it is the slow lane behind the redelivery above (which runs within seconds of the store's return), so
 * it only has to be short next to an outage; a round is one indexed read of the inbox, cheap at that period even
 * when thousands of messages wait. A message younger than one period may still be on its way to its actor.
 */
import { Clock, Deferred, Duration, Effect, Option, Schedule } from "effect"
import type { PersistenceFailed, SendError } from "../../domain/Errors.js"
import type { InboxMessage } from "../../domain/Inbox.js"
import type * as SessionActor from "../SessionActor.js"
import type { Host } from "./host.js"
import { fromInbox, takenIds } from "./host.js"

const maxRedeliveries = 10
const firstRedelivery = "500 millis"
const redelivery = Schedule.union(Schedule.exponential(firstRedelivery), Schedule.spaced("5 seconds")).pipe(
  Schedule.upTo("10 minutes")
)

/**
 * Keeps retrying the landing of a burst the store stopped until the store takes it (backoff 0.5 s doubling to
 * 5 s, so a session reads `interrupted` within seconds of the store's return), then runs what its mailbox still
 * holds. A load runs a waiting landing first (actors.ts), so the two never overwrite a newer state.
 */
export const later = (host: Host, sessionId: string, orgId: string, settle: Effect.Effect<void, PersistenceFailed>) => {
  const lock = Effect.unsafeMakeSemaphore(1)
  const attempt: Effect.Effect<void, PersistenceFailed> = lock.withPermits(1)(
    Effect.suspend(() =>
      host.unsettled.get(sessionId) === attempt
        ? Effect.zipRight(settle, Effect.sync(() => void host.unsettled.delete(sessionId)))
        : Effect.void
    )
  )
  host.unsettled.set(sessionId, attempt)
  host.runDrain(
    attempt.pipe(
      Effect.retry(Schedule.union(Schedule.exponential("500 millis"), Schedule.spaced("5 seconds"))),
      Effect.zipRight(Effect.logInfo(`session ${sessionId}: the stopped burst's landing is saved`)),
      Effect.zipRight(host.pendingInbox(orgId, sessionId)),
      Effect.catchAllCause((cause) => Effect.logDebug(`session ${sessionId}: landing retry ended`, cause))
    ),
    { immediate: false }
  )
}

/**
 * Delivers the accepted messages that still wait: by rebuilding the actor when none is live (it delivers them: see
 * actors.ts), or through the live actor (local hosting) when no caller or actor holds them already. Returns how many
 * were found waiting for nothing: the messages of a session rebuilt here, or those offered to its live actor
 * (0 when every waiting one was held, or had run and was only settled).
 */
export const pendingInbox = (host: Host, orgId: string, sessionId: string): Effect.Effect<number, SendError> =>
  Effect.flatMap(host.store.inbox(sessionId), (waiting) => {
    if (waiting.length === 0) return Effect.succeed(0)
    const live = host.actors.get(sessionId)
    if (live === undefined || live.closed()) return Effect.as(host.acquire(orgId, sessionId), waiting.length)
    if (host.clustered || waiting.every((message) => host.claimed.has(message.id))) return Effect.succeed(0)
    return Effect.flatMap(
      host.store.turns(orgId, sessionId),
      (turns) => host.deliverInbox(live, takenIds(turns), waiting)
    )
  })

/**
 * Delivers the accepted messages of the session that no burst took up (`taken`: its user turn carries the message
 * id when one did), oldest first, ahead of anything sent after; the ones already taken up are settled. A message
 * offered here is held (`claimed`) until its actor answers it, so no other delivery offers it again meanwhile.
 * Returns how many it offered.
 */
export const deliverInbox = (
  host: Host,
  actor: SessionActor.Actor,
  taken: ReadonlySet<string>,
  waiting: ReadonlyArray<InboxMessage>
) =>
  Effect.gen(function*() {
    let delivered = 0
    for (const message of waiting) {
      if (host.claimed.has(message.id)) continue
      if (taken.has(message.id)) {
        yield* host.store.settle(actor.sessionId, message.id)
        continue
      }
      yield* Effect.logInfo(`session ${actor.sessionId}: running accepted message ${message.id} (${message.kind})`)
      const reply = actor.offer(fromInbox(message))
      if (Option.isSome(reply)) {
        delivered++
        host.claimed.add(message.id)
        host.runDrain(
          Deferred.await(reply.value).pipe(
            Effect.ensuring(Effect.sync(() => void host.claimed.delete(message.id))),
            Effect.tap(() => Effect.sync(() => host.redeliveries.delete(actor.sessionId))),
            Effect.catchAll((error) =>
              Effect.zipRight(
                Effect.logWarning(
                  `session ${actor.sessionId}: accepted message ${message.id} failed: ${error.message}`
                ),
                Effect.sync(() =>
                  error._tag === "PersistenceFailed" && host.redeliver(actor.orgId, actor.sessionId, error)
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

/**
 * An accepted message is stored, so it must run even when the store kept it from its burst (the actor could not
 * be loaded, or the burst stopped before taking it up): the session's inbox is delivered again in the background
 * until the store answers (`redelivery`). A message its burst took up is only settled then (never run twice).
 */
export const redeliver = (host: Host, orgId: string, sessionId: string, error: PersistenceFailed) => {
  if (host.stopping() || host.redelivering.has(sessionId)) return
  const rounds = (host.redeliveries.get(sessionId) ?? 0) + 1
  const every = Duration.format(host.inboxSweep)
  if (rounds > maxRedeliveries) {
    host.redeliveries.delete(sessionId)
    host.runDrain(Effect.logError(
      `session ${sessionId}: accepted messages failed ${maxRedeliveries} deliveries in a row (the store failed in ` +
        `${error.operation}: ${error.message}); the inbox sweep delivers them again (every ${every})`
    ))
    return
  }
  host.redeliveries.set(sessionId, rounds)
  host.redelivering.add(sessionId)
  host.runDrain(
    Effect.logWarning(
      `session ${sessionId}: an accepted message waits in the inbox: the store failed in ${error.operation} ` +
        `(${error.message}); it is delivered again once the store answers`
    ).pipe(
      // The store has just failed: the first attempt waits the schedule's first step too.
      Effect.zipRight(Effect.sleep(firstRedelivery)),
      Effect.zipRight(
        Effect.retry(
          Effect.suspend(() => host.stopping() ? Effect.void : host.pendingInbox(orgId, sessionId)),
          redelivery
        )
      ),
      Effect.zipRight(Effect.logInfo(`session ${sessionId}: the accepted messages are delivered`)),
      Effect.catchAll((last) =>
        Effect.logError(
          `session ${sessionId}: accepted messages not delivered within 10 minutes (${last.message}); the inbox ` +
            `sweep delivers them once the store answers (every ${every})`
        )
      ),
      Effect.ensuring(Effect.sync(() => void host.redelivering.delete(sessionId)))
    ),
    { immediate: false }
  )
}

/** One round of the inbox sweep (see the module header): accepted messages older than a period that nothing holds. */
const sweepRound = (host: Host) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const grace = Duration.toMillis(host.inboxSweep)
    const targets = new Map<string, string>()
    for (const message of yield* host.store.inbox()) {
      if (
        now - message.acceptedAt >= grace && !host.claimed.has(message.id) &&
        !host.redelivering.has(message.sessionId)
      ) {
        targets.set(message.sessionId, message.orgId)
      }
    }
    if (targets.size === 0) return
    // What the inbox read found may have run meanwhile (a burst answers before its message is settled, and under
    // load the settle waits its turn): only what was still waiting for nothing is worth a warning.
    const found = new Map<string, number>()
    yield* Effect.forEach(targets, ([sessionId, orgId]) =>
      host.pendingInbox(orgId, sessionId).pipe(
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

/** The inbox sweep, every period, forever (local hosting): fork it in the supervisor's scope. */
export const sweep = (host: Host): Effect.Effect<never> =>
  Effect.forever(Effect.zipRight(
    Effect.sleep(host.inboxSweep),
    Effect.suspend(() => host.stopping() ? Effect.void : sweepRound(host)).pipe(
      Effect.catchAll((error) => Effect.logWarning(`inbox sweep: the store could not be read: ${error.message}`))
    )
  ))
