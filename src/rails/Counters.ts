/**
 * Counters — model-call ceilings per burst and per session.
 *
 * Prevents: a loop that never converges and keeps paying for model calls. The burst ceiling (20) bounds one
 * autonomous stretch; the session ceiling (60) bounds the whole conversation so follow-ups cannot reset the spend.
 * Both counters move together on every call — no path reaches the model without incrementing both — so neither
 * can drift from the real number of calls. The ceilings are checks of the exit policy (`ExitPolicy.burstLimit`,
 * `ExitPolicy.sessionLimit`), the burst's first by default: it is the one a follow-up message resets, so naming it
 * tells the operator that continuing is still possible.
 */

/** Model calls made so far: in the current burst and in the whole session. */
export interface Counters {
  readonly burst: number
  readonly session: number
}

/** The counters at the start of a burst: `burst` is 0, `session` carries the calls of earlier bursts. */
export const start = (sessionTotal: number): Counters => ({ burst: 0, session: sessionTotal })

/** Records one model call: increments BOTH counters; never fails (the ceilings are the exit policy's checks). */
export const increment = (c: Counters): Counters => ({ burst: c.burst + 1, session: c.session + 1 })
