/**
 * clusterOrder — cluster hosting: an accepted message runs once, and after the session's earlier accepted messages.
 *
 * In a cluster the entity's handlers run concurrently, the same message can arrive twice (delivered again after its
 * runner died), and an earlier message's own delivery can be lost in a hand-over (a runner refused it while stopping,
 * or the cluster never stored it). So, per session and one delivery at a time (`serially`), a delivery reads what
 * still waits before its message (`waitingBefore`), puts those and then its own message in the mailbox in the order
 * they were accepted — none twice (`offerOnce`) — and awaits its reply once the lock is released (`inOrder`).
 */
import { Deferred, Effect } from "effect"
import type { SendError } from "../../domain/Errors.js"
import type { InboxMessage } from "../../domain/Inbox.js"
import type * as SessionActor from "../SessionActor.js"
import { offer } from "./actors.js"
import type { Host } from "./host.js"
import { fromInbox, takenIds } from "./host.js"

/** The per-session locks and the accepted messages in a mailbox here (offered, not answered yet), with their replies. */
export interface Order {
  readonly ordering: Map<string, { readonly lock: Effect.Semaphore; holders: number }>
  readonly offered: Map<string, Deferred.Deferred<SessionActor.Reply, SessionActor.Failure>>
}

export const makeOrder = (): Order => ({ ordering: new Map(), offered: new Map() })

/**
 * The accepted messages to run before `inboxId` — the session's earlier accepted messages that still wait (in the
 * inbox, no stored user turn took them up, not in a mailbox here already), oldest first — or `undefined` when
 * `inboxId` itself no longer waits. A message the cluster delivers again (its runner died before answering) may have
 * run already; one taken up but not settled is settled here.
 */
const waitingBefore = (host: Host, order: Order, orgId: string, sessionId: string, inboxId: string) =>
  Effect.gen(function*() {
    const inbox = yield* host.store.inbox(sessionId)
    const at = inbox.findIndex((m) => m.id === inboxId)
    if (at < 0) return undefined
    const taken = takenIds(yield* host.store.turns(orgId, sessionId))
    const earlier: Array<InboxMessage> = []
    for (const message of inbox.slice(0, at + 1)) {
      if (taken.has(message.id)) yield* host.store.settle(sessionId, message.id)
      else if (message.id !== inboxId && !order.offered.has(message.id)) earlier.push(message)
    }
    return taken.has(inboxId) ? undefined : earlier
  })

/** The session as it stands here, for a message that is not run again. */
export const standing = (host: Host, orgId: string, sessionId: string) =>
  Effect.map(host.acquire(orgId, sessionId), (actor): SessionActor.Reply => ({ session: actor.session(), tokens: [] }))

/**
 * Per session, one delivery of an accepted message at a time decides what runs and puts it in the mailbox (not while
 * it runs): two messages arriving together must reach the mailbox in the order they were accepted, whichever of
 * their store reads answers first.
 */
const serially = <A, E>(order: Order, sessionId: string, self: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.suspend(() => {
    let entry = order.ordering.get(sessionId)
    if (entry === undefined) {
      entry = { lock: Effect.unsafeMakeSemaphore(1), holders: 0 }
      order.ordering.set(sessionId, entry)
    }
    const held = entry
    held.holders++
    return Effect.ensuring(
      held.lock.withPermits(1)(self),
      Effect.sync(() => {
        if (--held.holders === 0) order.ordering.delete(sessionId)
      })
    )
  })

/**
 * Puts an accepted message in the mailbox unless it is there already; its reply either way (see `inOrder`). The
 * outcome of one nobody awaits (`unawaited`: an earlier message run first) is logged.
 */
const offerOnce = (
  host: Host,
  order: Order,
  message: { readonly orgId: string; readonly sessionId: string; readonly inboxId: string },
  mailbox: SessionActor.Message,
  unawaited: boolean
) =>
  Effect.suspend(() => {
    const { inboxId, orgId, sessionId } = message
    const known = order.offered.get(inboxId)
    if (known !== undefined) return Effect.succeed(known)
    return Effect.map(offer(host, orgId, sessionId, mailbox), (reply) => {
      order.offered.set(inboxId, reply)
      const outcome = Deferred.await(reply).pipe(
        Effect.catchAll((error) =>
          unawaited
            ? Effect.logWarning(`session ${sessionId}: accepted message ${inboxId} failed: ${error.message}`)
            : Effect.void
        )
      )
      host.runDrain(Effect.ensuring(outcome, Effect.sync(() => order.offered.delete(inboxId))), { immediate: false })
      return reply
    })
  })

/**
 * An accepted message, once — unless it ran already (`standing`) — after the session's earlier accepted messages that
 * still wait (`waitingBefore`), all put in the mailbox in the order accepted under the session's lock (`serially`): a
 * message another delivery put there already is not offered again, its reply is awaited instead. The reply is
 * awaited after the lock is released.
 */
export const inOrder = (
  host: Host,
  order: Order,
  orgId: string,
  sessionId: string,
  inboxId: string,
  message: SessionActor.Message
) =>
  Effect.flatMap(
    serially(
      order,
      sessionId,
      Effect.flatMap(waitingBefore(host, order, orgId, sessionId, inboxId), (earlier) =>
        earlier === undefined
          ? Effect.succeed(undefined)
          : Effect.gen(function*() {
            for (const waiting of earlier) {
              yield* Effect.logInfo(
                `session ${sessionId}: running accepted message ${waiting.id} (${waiting.kind}) first, in order`
              )
              yield* offerOnce(
                host,
                order,
                { orgId: waiting.orgId, sessionId, inboxId: waiting.id },
                fromInbox(waiting),
                true
              )
            }
            return yield* offerOnce(host, order, { orgId, sessionId, inboxId }, message, false)
          }))
    ),
    (reply): Effect.Effect<SessionActor.Reply, SendError> =>
      reply === undefined ? standing(host, orgId, sessionId) : Deferred.await(reply)
  )
