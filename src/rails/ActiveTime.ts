/**
 * ActiveTime — the 5-minute active-time deadline.
 *
 * Prevents: a session that works forever in slow motion (slow tools, slow providers, retries) while each single
 * call stays within its own timeout. Only time inside bursts counts: a session waiting for a person's follow-up or
 * approval is idle, not working, and must not be punished for it. Five minutes is well past a healthy
 * investigation and short enough that an operator is never left waiting on a stuck one.
 */
import type { Limits } from "../domain/Limits.js"

/** Total active ms after the current burst so far: earlier bursts plus `now - burstStartedAt` (never negative). */
export const spent = (usedBeforeMs: number, burstStartedAt: number, now: number): number =>
  usedBeforeMs + Math.max(0, now - burstStartedAt)

/** Active ms left before the deadline; `0` once spent (never negative, even when a step overran it). */
export const remainingMs = (limits: Limits, usedBeforeMs: number, burstStartedAt: number, now: number): number =>
  Math.max(0, limits.activeTimeMs - spent(usedBeforeMs, burstStartedAt, now))
