/**
 * The one place SQL failures become `PersistenceFailed`. @effect/sql's `SqlError` carries a generic message
 * ("Failed to execute statement") and the driver's error as its cause; the useful part (Postgres's own message and
 * SQLSTATE) is down that chain, so it is flattened into the message here. Interruption is never converted.
 *
 * It is also where a store call gets its deadline (`within`): a partition leaves a statement waiting on a socket
 * that never answers, and the caller must hear "no answer" at the persistence timeout, not when TCP gives up.
 */
import { Cause, Effect } from "effect"
import { PersistenceFailed } from "../../domain/Errors.js"
import * as BoundedWait from "../../internal/boundedWait.js"

const field = (value: unknown, key: string): unknown => {
  if (typeof value !== "object" || value === null) return undefined
  const found: unknown = Reflect.get(value, key)
  return found
}

/** The SQLSTATE of the Postgres error somewhere in `error`'s cause chain (e.g. `23503`), if any. */
export const sqlState = (error: unknown): string | undefined => {
  let current: unknown = error
  for (let depth = 0; depth < 8 && current !== undefined; depth++) {
    const code = field(current, "code")
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code
    current = field(current, "cause")
  }
  return undefined
}

/** The distinct messages along `error`'s cause chain, outermost first, with the SQLSTATE when there is one. */
export const describe = (error: unknown): string => {
  const parts: Array<string> = []
  let current: unknown = error
  for (let depth = 0; depth < 8 && current !== undefined && current !== null; depth++) {
    const message = typeof current === "string" ? current : field(current, "message")
    if (typeof message === "string" && message.length > 0 && !parts.includes(message)) parts.push(message)
    current = field(current, "cause")
  }
  const state = sqlState(error)
  const text = parts.length > 0 ? parts.join(": ") : String(error)
  return state === undefined ? text : `${text} (SQLSTATE ${state})`
}

/** Wraps any failure or defect of `self` into `PersistenceFailed` for `operation`; interruption passes through. */
export const persist = (operation: string) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.catchAllCause(self, (cause): Effect.Effect<never, PersistenceFailed> => {
    if (Cause.isInterruptedOnly(cause)) return Effect.interrupt
    const failure = Cause.failureOption(cause)
    const error = failure._tag === "Some" ? failure.value : Cause.squash(cause)
    if (error instanceof PersistenceFailed) return Effect.fail(error)
    return Effect.fail(new PersistenceFailed({ operation, message: describe(error) }))
  })

/** The failure of a store call that got no answer in time (it may still land: the next read shows whether it did). */
export const timedOut = (operation: string, waitedMs: number, overloaded = false) =>
  new PersistenceFailed({
    operation,
    message: overloaded
      ? `the store did not answer within ${waitedMs} ms (overloaded: it went on answering other statements)`
      : `the store did not answer within ${waitedMs} ms`
  })

/**
 * Fails `self` with `timedOut` once `timeoutMs` passed — or, given `patience` (internal/overload.ts), once it passed
 * with the database quiet, or at the overload ceiling. The statement is left behind (disconnected), not waited
 * for: interrupting a query on a silent socket runs the driver's cancel (a second statement, on another connection,
 * itself up to 5 s), and the caller's bound must not include it. The driver's own statement timeout then ends the
 * abandoned statement and discards its connection (Database.ts). One fiber per call (internal/boundedWait.ts): every
 * store statement but appendTurn goes through here.
 */
export const within =
  (operation: string, timeoutMs: number, patience?: BoundedWait.Patience) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
    BoundedWait.disconnected(
      self,
      patience === undefined
        ? { duration: timeoutMs, onTimeout: (waitedMs) => timedOut(operation, waitedMs, waitedMs > timeoutMs) }
        : {
          duration: timeoutMs,
          onTimeout: (waitedMs) => timedOut(operation, waitedMs, waitedMs > timeoutMs),
          patience
        }
    )
