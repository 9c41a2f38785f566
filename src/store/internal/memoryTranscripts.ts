/**
 * memoryTranscripts — the memory store's transcripts, inherited artifacts and trajectories (MemoryStore).
 *
 * An append reads the last sequence number and writes the next in one synchronous step: JavaScript is single threaded
 * and nothing yields in between, so concurrent `appendTurn`s on one session can never share or skip a number.
 */
import { Effect } from "effect"
import type { Context } from "effect"
import type { PersistenceFailed, ScopeMismatch } from "../../domain/Errors.js"
import type { Turn, TurnEntry } from "../../domain/Message.js"
import * as Pairing from "../Pairing.js"
import type { Appended, SessionStore } from "../SessionStore.js"
import type { State } from "./memoryState.js"
import { isPacked, missing, owned, runIdOf, unpacked } from "./memoryState.js"
import * as Refusals from "./refusals.js"

type Service = Context.Tag.Service<SessionStore>

/**
 * `entries` with `entry` put at `length` (its first free slot), grown when full: by a quarter (at least 4), into an
 * array of exactly that room. A pushed array grows by half plus 16 slots, and a host keeps every session's
 * transcript: at 20 turns this leaves no free slot at all.
 */
const appendEntry = (entries: Array<TurnEntry>, length: number, entry: TurnEntry): Array<TurnEntry> => {
  if (length < entries.length) {
    entries[length] = entry
    return entries
  }
  const grown = new Array<TurnEntry>(length + Math.max(4, length >> 2))
  for (let i = 0; i < length; i++) grown[i] = entries[i]!
  grown[length] = entry
  return grown
}

/**
 * `appendEntry` for the times. A function of its own, not a generic one: V8 learns an array store's element-kind
 * transition per store site, and a site shared with the entries made the times' arrays hold boxed numbers.
 */
const appendTime = (times: Array<number>, length: number, at: number): Array<number> => {
  if (length < times.length) {
    times[length] = at
    return times
  }
  const grown = new Array<number>(length + Math.max(4, length >> 2))
  for (let i = 0; i < length; i++) grown[i] = times[i]!
  grown[length] = at
  return grown
}

/** Transcripts: appended turn by turn (closing calls a break leaves open in the same write), read after a seq. */
export const transcripts = (
  state: State
): Pick<Service, "appendTurn" | "turns" | "inheritArtifact" | "inherited"> => ({
  // Answers synchronously, so it has no use for a timeout.
  appendTurn: (sessionId, entry, at) =>
    Effect.suspend(() => {
      const record = state.sessions.get(sessionId)
      if (record === undefined) return missing("appendTurn", sessionId)
      // Read and write in one synchronous step: this is what makes the sequence gap-free under concurrency, and
      // the closing of open calls part of the same write.
      const last = record.length === 0 ? undefined : record.entries[record.length - 1]
      const closing = Pairing.breaks(entry) && Pairing.opens(last) ? Pairing.closing(last!) : undefined
      let closed: Turn | undefined
      if (closing !== undefined) {
        record.entries = appendEntry(record.entries, record.length, closing)
        record.times = appendTime(record.times, record.length, at)
        closed = { sessionId, seq: ++record.length, at, entry: closing }
      }
      record.entries = appendEntry(record.entries, record.length, entry)
      record.times = appendTime(record.times, record.length, at)
      const seq = ++record.length
      return Effect.succeed(
        (closed === undefined
          ? { sessionId, seq, at, entry }
          : { sessionId, seq, at, entry, closed }) satisfies Appended
      )
    }),

  turns: (orgId, sessionId, afterSeq) =>
    Effect.sync(() => {
      const record = owned(state, orgId, sessionId)
      if (record === undefined) return []
      // seq = index + 1, so the turns after `afterSeq` start at index `afterSeq`.
      const out: Array<Turn> = []
      for (let i = afterSeq === undefined ? 0 : Math.max(0, Math.floor(afterSeq)); i < record.length; i++) {
        out.push({ sessionId: record.session.id, seq: i + 1, at: record.times[i]!, entry: record.entries[i]! })
      }
      return out
    }),

  inheritArtifact: (orgId, sessionId, fromSessionId) =>
    Effect.suspend((): Effect.Effect<void, PersistenceFailed | ScopeMismatch> => {
      const record = owned(state, orgId, sessionId)
      if (record === undefined) return missing("inheritArtifact", sessionId)
      // The same rule the SQL drivers' composite foreign key enforces: same org AND same scope.
      const from = owned(state, orgId, fromSessionId)
      if (from === undefined || from.session.scope !== record.session.scope) {
        return Effect.fail(Refusals.crossScope(sessionId, fromSessionId, record.session.scope, from?.session.scope))
      }
      if (record.inherits === undefined) record.inherits = new Set([fromSessionId])
      else record.inherits.add(fromSessionId)
      return Effect.void
    }),

  inherited: (orgId, sessionId) =>
    Effect.sync(() => {
      const inherits = owned(state, orgId, sessionId)?.inherits
      return inherits === undefined ? [] : Array.from(inherits).sort()
    })
})

/** Trajectories: saved again and again as a burst goes, closed ones packed once their session holds another. */
export const trajectories = (state: State): Pick<Service, "saveTrajectory" | "trajectories"> => ({
  saveTrajectory: (trajectory) =>
    Effect.suspend(() => {
      const record = state.sessions.get(trajectory.sessionId)
      if (record === undefined) return missing("saveTrajectory", trajectory.sessionId)
      // An open trajectory is saved again and again as its burst goes: kept as it is until it closes. A closed one
      // is packed once its session holds another run: packing costs time per leaf (docs/benchmarks.md, "Notes moved
      // from the code"), and a session of one burst — most of them — is not where held memory piles up; a session
      // with history is.
      const list = record.trajectories ?? (record.trajectories = [])
      let at = list.length - 1
      while (at >= 0 && runIdOf(list[at]!) !== trajectory.runId) at--
      const others = at < 0 ? list.length : list.length - 1
      const stored = trajectory.open === true || others === 0
        ? trajectory
        : state.packer.pack(trajectory, trajectory.runId) ?? trajectory
      // Saved again as the burst goes (an open trajectory, then the closed one): replace, like the SQL upsert.
      const own = at < 0 ? list.push(stored) - 1 : at
      list[own] = stored
      if (stored !== trajectory) {
        // The session's first closed run, kept as an object while it was the only one, is packed with the second
        // (once: an open run's saves, every turn, do not look).
        for (let i = 0; i < list.length; i++) {
          const held = list[i]!
          if (i !== own && !isPacked(held) && held.open !== true) {
            list[i] = state.packer.pack(held, held.runId) ?? held
          }
        }
      }
      return Effect.void
    }),

  trajectories: (orgId, sessionId) =>
    Effect.sync(() => {
      const record = owned(state, orgId, sessionId)
      return record?.trajectories === undefined ? [] : record.trajectories.map((stored) => unpacked(state, stored))
    })
})
