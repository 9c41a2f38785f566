/**
 * Counters — model-call ceilings per burst and per session.
 *
 * Prevents: a loop that never converges and keeps paying for model calls. The burst ceiling (20) bounds one
 * autonomous stretch; the session ceiling (60) bounds the whole conversation so follow-ups cannot reset the spend.
 * Both counters move together on every call — no path reaches the model without incrementing both — so neither
 * can drift from the real number of calls. The burst ceiling is checked first: it is the one a follow-up message
 * resets, so naming it tells the operator that continuing is still possible.
 */
import { Option } from "effect"
import type { Limits } from "../domain/Limits.js"

/** Model calls made so far: in the current burst and in the whole session. */
export interface Counters {
  readonly burst: number
  readonly session: number
}

/** The counters at the start of a burst: `burst` is 0, `session` carries the calls of earlier bursts. */
export const start = (sessionTotal: number): Counters => ({ burst: 0, session: sessionTotal })

/** The ceiling already reached, if any: `burst_limit` before `session_limit`; `None` means one more call may run. */
export const check = (c: Counters, limits: Limits): Option.Option<"burst_limit" | "session_limit"> =>
  c.burst >= limits.modelCallsPerBurst
    ? Option.some("burst_limit")
    : c.session >= limits.modelCallsPerSession
    ? Option.some("session_limit")
    : Option.none()

/** Records one model call: increments BOTH counters; never fails (the ceiling is `check`'s job). */
export const increment = (c: Counters): Counters => ({ burst: c.burst + 1, session: c.session + 1 })
