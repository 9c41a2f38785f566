/**
 * memoryRecords — the memory store's approvals, usage ledger and daily spend (MemoryStore).
 */
import { Effect, Option } from "effect"
import type { Context } from "effect"
import type { Trajectory } from "../../domain/Trajectory.js"
import * as OrgBudget from "../../rails/OrgBudget.js"
import type { SessionStore } from "../SessionStore.js"
import * as Ledger from "./ledger.js"
import type { State } from "./memoryState.js"
import { keyOf, missing, unpacked } from "./memoryState.js"

type Service = Context.Tag.Service<SessionStore>

/** Approval tokens: issued per pending write (revoking that write's unspent ones), found, spent once, counted. */
export const approvals = (
  state: State
): Pick<Service, "issueApprovals" | "findApproval" | "spendApproval" | "countPendingApprovals"> => ({
  issueApprovals: (sessionId, records) =>
    Effect.suspend(() => {
      if (!state.sessions.has(sessionId)) return missing("issueApprovals", sessionId)
      const calls = new Set(records.map((r) => `${r.turnSeq}:${r.callId}`))
      for (const [hash, record] of state.approvals) {
        if (
          record.sessionId === sessionId && record.usedAt === undefined &&
          calls.has(`${record.turnSeq}:${record.callId}`)
        ) {
          state.approvals.delete(hash)
        }
      }
      for (const record of records) state.approvals.set(record.tokenHash, { ...record, sessionId })
      return Effect.void
    }),

  findApproval: (orgId, sessionId, tokenHash) =>
    Effect.sync(() => {
      const record = state.approvals.get(tokenHash)
      return record !== undefined && record.orgId === orgId && record.sessionId === sessionId
        ? Option.some(record)
        : Option.none()
    }),

  spendApproval: (tokenHash, at) =>
    Effect.sync(() => {
      const record = state.approvals.get(tokenHash)
      if (record === undefined || record.usedAt !== undefined || record.expiresAt <= at) return false
      state.approvals.set(tokenHash, { ...record, usedAt: at })
      return true
    }),

  countPendingApprovals: (at, cap) =>
    Effect.sync(() => {
      let n = 0
      for (const record of state.approvals.values()) {
        if (n >= cap) break
        if (record.usedAt === undefined && record.expiresAt > at) n++
      }
      return n
    })
})

/** The usage ledger (from the trajectories) and an org's daily spend: held before a call, settled after it. */
export const spend = (state: State): Pick<Service, "usage" | "holdSpend" | "settleSpend" | "daySpend"> => ({
  usage: (orgId, from, to) =>
    Effect.sync(() => {
      const found: Array<Trajectory> = []
      for (const record of state.sessions.values()) {
        if (record.session.principal.orgId !== orgId || record.trajectories === undefined) continue
        for (const stored of record.trajectories) {
          const t = unpacked(state, stored)
          if (t.startedAt >= from - Ledger.lookBehindMs && t.startedAt < to) found.push(t)
        }
      }
      return Ledger.rows(found, from, to)
    }),

  holdSpend: (orgId, day, perDayMicros, wantMicros, at) =>
    Effect.sync(() => {
      const key = keyOf(orgId, day)
      const row = state.spend.get(key) ?? { spentMicros: 0, heldMicros: 0, heldUntil: 0 }
      const live = row.heldUntil > at ? row.heldMicros : 0
      const granted = OrgBudget.grant(perDayMicros, row.spentMicros, live, wantMicros)
      if (granted > 0) {
        state.spend.set(key, {
          spentMicros: row.spentMicros,
          heldMicros: live + granted,
          heldUntil: Math.max(row.heldUntil, at + OrgBudget.holdLifetimeMs)
        })
      }
      return { granted, tally: { spentMicros: row.spentMicros, heldMicros: live } }
    }),

  settleSpend: (orgId, day, heldMicros, spentMicros) =>
    Effect.sync(() => {
      const key = keyOf(orgId, day)
      const row = state.spend.get(key) ?? { spentMicros: 0, heldMicros: 0, heldUntil: 0 }
      state.spend.set(key, {
        spentMicros: row.spentMicros + spentMicros,
        heldMicros: Math.max(0, row.heldMicros - heldMicros),
        heldUntil: row.heldUntil
      })
    }),

  daySpend: (orgId, day) => Effect.sync(() => state.spend.get(keyOf(orgId, day))?.spentMicros ?? 0)
})
