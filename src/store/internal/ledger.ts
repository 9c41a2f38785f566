/**
 * The usage ledger, summed from the trajectories the store holds: every model attempt (failed and retried ones too:
 * they were billed) by UTC day, agent and provider, in integers. Both stores sum with this one function, so the memory
 * store and the SQL store answer `usage` alike; the trajectories are the record, so the ledger survives restarts and
 * is the same whichever node of a cluster asks.
 */
import type { Trajectory } from "../../domain/Trajectory.js"
import { type UsageRow, utcDay } from "../../domain/Usage.js"

/**
 * How long before `from` a trajectory may have started and still hold an attempt at or after it: a burst's active time
 * is at most 5 minutes (a ceiling that only tightens), plus the provider timeouts of its last call — an hour is
 * ample. Stores read the trajectories started in [from − this, to).
 */
export const lookBehindMs = 60 * 60_000

/** The rows of the attempts that started in [from, to), sorted by day, agent, provider. */
export const rows = (trajectories: Iterable<Trajectory>, from: number, to: number): Array<UsageRow> => {
  const byKey = new Map<string, { -readonly [K in keyof UsageRow]: UsageRow[K] }>()
  for (const t of trajectories) {
    const models = new Map((t.replay?.route ?? []).map((entry) => [entry.name, entry.model]))
    for (const attempt of t.modelCalls) {
      if (attempt.startedAt < from || attempt.startedAt >= to) continue
      const day = utcDay(attempt.startedAt)
      const model = models.get(attempt.provider) ?? attempt.reply?.model ?? ""
      const key = `${day}\u0000${t.agentId}\u0000${attempt.provider}\u0000${model}`
      let row = byKey.get(key)
      if (row === undefined) {
        row = {
          day,
          agentId: t.agentId,
          provider: attempt.provider,
          model,
          attempts: 0,
          inputTokens: 0,
          outputTokens: 0,
          cacheReadTokens: 0,
          cacheWriteTokens: 0,
          reasoningTokens: 0,
          costMicros: 0
        }
        byKey.set(key, row)
      }
      row.attempts += 1
      row.inputTokens += attempt.usage.inputTokens
      row.outputTokens += attempt.usage.outputTokens
      row.cacheReadTokens += attempt.usage.cacheReadTokens
      row.cacheWriteTokens += attempt.usage.cacheWriteTokens
      row.reasoningTokens += attempt.usage.reasoningTokens
      row.costMicros += attempt.costMicros ?? 0
    }
  }
  return [...byKey.values()].sort((a, b) =>
    a.day < b.day ? -1 : a.day > b.day ? 1 : a.agentId < b.agentId ? -1 : a.agentId > b.agentId ?
      1 :
      a.provider < b.provider
      ? -1
      : a.provider > b.provider
      ? 1
      : a.model < b.model
      ? -1
      : a.model > b.model
      ? 1
      : 0
  )
}
