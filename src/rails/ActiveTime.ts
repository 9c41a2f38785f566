/**
 * ActiveTime — the 5-minute active-time deadline.
 *
 * Prevents: a session that works forever in slow motion (slow tools, slow providers, retries) while each single
 * call stays within its own timeout. Only time inside bursts counts: a session waiting for a person's follow-up or
 * approval is idle, not working, and must not be punished for it. Five minutes is well past a healthy
 * investigation and short enough that an operator is never left waiting on a stuck one.
 */
import { Clock, Effect } from "effect"
import type { Limits } from "../domain/Limits.js"

/** Total active ms after the current burst so far: earlier bursts plus `now - burstStartedAt` (never negative). */
export const spent = (usedBeforeMs: number, burstStartedAt: number, now: number): number =>
  usedBeforeMs + Math.max(0, now - burstStartedAt)

/** Active ms left before the deadline; `0` once spent (never negative, even when a step overran it). */
export const remainingMs = (limits: Limits, usedBeforeMs: number, burstStartedAt: number, now: number): number =>
  Math.max(0, limits.activeTimeMs - spent(usedBeforeMs, burstStartedAt, now))

/** Whether any active time is left; `false` means the burst exits `deadline`. */
export const hasRoom = (limits: Limits, usedBeforeMs: number, burstStartedAt: number, now: number): boolean =>
  remainingMs(limits, usedBeforeMs, burstStartedAt, now) > 0

/**
 * Runs `self` and pairs its value with the elapsed ms by `Clock.currentTimeMillis` (so `TestClock` controls it);
 * failures and interruption pass through unmeasured.
 */
export const measure = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<[A, number], E, R> =>
  Effect.flatMap(
    Clock.currentTimeMillis,
    (startedAt) =>
      Effect.flatMap(
        self,
        (a) => Effect.map(Clock.currentTimeMillis, (endedAt): [A, number] => [a, endedAt - startedAt])
      )
  )
