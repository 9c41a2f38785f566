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
 */
import { Clock, Context, Deferred, Effect, Layer, Option } from "effect"
import type { Session } from "../domain/Session.js"
import * as Supervisor from "../session/Supervisor.js"
import { SessionStore } from "../store/SessionStore.js"

/** The process's shutdown state. */
export class Shutdown extends Context.Tag("corral/server/Shutdown")<Shutdown, {
  /** Whether draining has begun. */
  readonly draining: () => boolean
  /** Completes when draining begins; long-lived responses end on it. */
  readonly signal: Effect.Effect<void>
  /** Begins draining (idempotent). */
  readonly begin: Effect.Effect<void>
}>() {}

/** A fresh, not-draining state. */
export const layer: Layer.Layer<Shutdown> = Layer.effect(
  Shutdown,
  Effect.map(Deferred.make<void>(), (started) => {
    let draining = false
    return {
      draining: () => draining,
      signal: Deferred.await(started),
      begin: Effect.suspend(() => {
        draining = true
        return Deferred.succeed(started, undefined)
      })
    }
  })
)

/**
 * Cancels every running burst and waits until none is running, for at most `timeoutMs`. Messages still queued
 * behind a cancelled burst may start new bursts; they are cancelled in turn. Returns how many sessions were still
 * running at the deadline (0 when everything landed). Never fails: a store error ends the wait early.
 */
export const cancelRunning = (
  timeoutMs: number
): Effect.Effect<number, never, SessionStore | Supervisor.Supervisor> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const supervisor = yield* Supervisor.Supervisor
    const deadline = (yield* Clock.currentTimeMillis) + timeoutMs
    let running: ReadonlyArray<Session> = []
    while (true) {
      // Only the sessions this process hosts: another process sharing the database drains its own.
      running = (yield* store.listRunning().pipe(Effect.orElseSucceed((): ReadonlyArray<Session> => []))).filter((s) =>
        Option.isSome(supervisor.peek(s.principal.orgId, s.id))
      )
      if (running.length === 0) return 0
      yield* Effect.forEach(running, (s) => supervisor.cancel(s.principal.orgId, s.id), { discard: true })
      if ((yield* Clock.currentTimeMillis) >= deadline) return running.length
      // Landing a cancelled burst is a few store writes: poll briefly rather than subscribe to every session.
      yield* Effect.sleep("25 millis")
    }
  })
