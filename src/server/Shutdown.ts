/**
 * Shutdown — the graceful stop of a serving process (SIGTERM/SIGINT).
 *
 * Order matters, and each step is bounded: (1) flip to draining — `/readyz` fails, new requests get 503 with
 * `Connection: close`, event streams end (their clients reconnect elsewhere with `Last-Event-ID`); (2) stop
 * accepting connections; (3) cancel every running burst and wait for it to land — a cancelled burst keeps its
 * transcript, lands a report and saves its state, so nothing acknowledged is lost and the session resumes with a
 * follow-up; (4) close what is left of the connections; then the layers below close the actors, the store (its
 * group commit flushes) and the database. Cancelling rather than waiting for bursts to finish keeps the bound
 * honest: a burst may run for minutes, an orchestrator's grace period is seconds.
 *
 * The bound holds whatever the store does. Which bursts are running is asked of the live actors, never of the
 * store (a store that hangs would hold the drain on its first read); a burst that cannot land by the deadline (its
 * store writes hang or fail) is named in the log and left `running` in the store, which the next start recovers as
 * `interrupted`. Closing the layers after the drain has its own bound (`launch`, Server.ts).
 */
import { Clock, Context, Deferred, Effect, Layer } from "effect"
import type { Session } from "../domain/Session.js"
import * as Supervisor from "../session/Supervisor.js"

/** The process's shutdown state. */
export class Shutdown extends Context.Tag("corral/server/Shutdown")<Shutdown, {
  /** Whether draining has begun. */
  readonly draining: () => boolean
  /** Completes when draining begins; long-lived responses end on it. */
  readonly signal: Effect.Effect<void>
  /**
   * Calls `f` once when draining begins (at once when it has begun); returns how to take it back. For a long-lived
   * response that must end on the drain: a callback costs nothing while it waits, a fiber awaiting `signal` a fiber.
   */
  readonly onDrain: (f: () => void) => () => void
  /** Begins draining (idempotent). */
  readonly begin: Effect.Effect<void>
}>() {}

/** A fresh, not-draining state. */
export const layer: Layer.Layer<Shutdown> = Layer.effect(
  Shutdown,
  Effect.map(Deferred.make<void>(), (started) => {
    let draining = false
    const waiting = new Set<() => void>()
    return {
      draining: () => draining,
      signal: Deferred.await(started),
      onDrain: (f) => {
        if (draining) {
          f()
          return () => {}
        }
        // Its own wrapper, so the same function registered twice is two registrations.
        const once = () => f()
        waiting.add(once)
        return () => {
          waiting.delete(once)
        }
      },
      begin: Effect.suspend(() => {
        if (!draining) {
          draining = true
          for (const f of [...waiting]) f()
          waiting.clear()
        }
        return Deferred.succeed(started, undefined)
      })
    }
  })
)

/**
 * Cancels every running burst and waits until none is running, for at most `timeoutMs`. Messages still queued
 * behind a cancelled burst may start new bursts; they are cancelled in turn. Returns the sessions still running at
 * the deadline (none when everything landed). Never fails and never reads the store.
 */
export const cancelRunning = (
  timeoutMs: number
): Effect.Effect<ReadonlyArray<Session>, never, Supervisor.Supervisor> =>
  Effect.gen(function*() {
    const supervisor = yield* Supervisor.Supervisor
    const deadline = (yield* Clock.currentTimeMillis) + timeoutMs
    while (true) {
      // Only the sessions this process hosts: another process sharing the database drains its own.
      const running = supervisor.running()
      if (running.length === 0) return running
      yield* Effect.forEach(running, (s) => supervisor.cancel(s.principal.orgId, s.id), { discard: true })
      if ((yield* Clock.currentTimeMillis) >= deadline) return running
      // Landing a cancelled burst is a few store writes: poll briefly rather than subscribe to every session.
      yield* Effect.sleep("25 millis")
    }
  })

/** Logs each session the drain could not settle, by id, and what that leaves behind. */
export const logUnsettled = (sessions: ReadonlyArray<Session>): Effect.Effect<void> =>
  Effect.forEach(sessions, (session) =>
    Effect.logWarning(
      `shutdown: session ${session.id} did not settle: its burst was cancelled but had not landed at the deadline ` +
        "(its store writes did not complete); the next start marks it interrupted, a follow-up resumes it"
    ).pipe(Effect.annotateLogs({ sessionId: session.id, orgId: session.principal.orgId })), { discard: true })
