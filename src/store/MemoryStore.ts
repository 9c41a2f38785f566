/**
 * MemoryStore — the `SessionStore` port over plain Maps, for tests, the demo and the all-in-memory runtime.
 *
 * Every method runs as one synchronous step: JavaScript is single threaded and nothing yields between reading the
 * last sequence number and writing the next, so concurrent `appendTurn`s on one session can never share or skip a
 * number. Memory per session is one record, the turn entries exactly as appended with their times beside them, and
 * the trajectories, closed ones packed once the session holds two (the benchmark holds 10,000 sessions of 20 turns:
 * no copies, no per-turn indexes). Because sequence numbers start at 1 with no gaps, a turn's index in the arrays is
 * `seq - 1`, which makes "turns after seq N" a slice.
 */
import { Effect, Layer, Option } from "effect"
import type { Context } from "effect"
import type { AgentSpec } from "../domain/AgentSpec.js"
import type { ApprovalRecord } from "../domain/Approval.js"
import { PersistenceFailed } from "../domain/Errors.js"
import type { ScopeMismatch } from "../domain/Errors.js"
import type { IdempotencyRecord, InboxMessage } from "../domain/Inbox.js"
import type { Turn, TurnEntry } from "../domain/Message.js"
import { Principal } from "../domain/Principal.js"
import type { Session } from "../domain/Session.js"
import type { Trajectory } from "../domain/Trajectory.js"
import { Usage } from "../domain/Usage.js"
import * as OrgBudget from "../rails/OrgBudget.js"
import * as Ledger from "./internal/ledger.js"
import * as Packing from "./internal/packing.js"
import * as Refusals from "./internal/refusals.js"
import * as Pairing from "./Pairing.js"
import type { AcceptOutcome, Appended } from "./SessionStore.js"
import { decodeCursor, encodeCursor, listedBefore, SessionStore } from "./SessionStore.js"

interface SessionRecord {
  session: Session
  /**
   * The transcript by column: the entries exactly as appended (the live actor's conversation holds the same
   * objects) and their times, a number array V8 keeps unboxed. A Turn object and a boxed timestamp per turn were 72
   * bytes of every turn a host keeps; `turns` makes the Turns when they are read. Both have room for more than
   * `length` (see `appendEntry`).
   */
  entries: Array<TurnEntry>
  times: Array<number>
  /** Turns stored: also the last sequence number. */
  length: number
  /**
   * Created on the first trajectory. A closed trajectory is kept packed (internal/packing), an open one (replaced as its
   * burst goes) as it is.
   */
  trajectories: Array<StoredTrajectory> | undefined
  /** Ids of the sessions this one inherits artifacts from; created on the first. */
  inherits: Set<string> | undefined
}

/** A trajectory as it was saved, or packed (an array) with its run id as the key. */
type StoredTrajectory = Trajectory | Packing.Packed

/** A trajectory is an object, a packed one an array. */
const isPacked = (stored: StoredTrajectory): stored is Packing.Packed => Array.isArray(stored)

const runIdOf = (stored: StoredTrajectory): string => isPacked(stored) ? Packing.keyOf(stored) as string : stored.runId

/**
 * `entries` with `entry` put at `length` (its first free slot), grown when full: by a quarter (at least 4), into an
 * array of exactly that room. A pushed array grows by half plus 16 slots (41 slots for 18 turns), and a host keeps
 * every session's transcript: at 20 turns this leaves no free slot at all.
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
 * transition per store site, and a site shared with the entries made the times' arrays hold boxed numbers (16 bytes
 * more per turn).
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

/** The record of a session with nothing stored yet. */
const fresh = (session: Session): SessionRecord => ({
  session,
  entries: [],
  times: [],
  length: 0,
  trajectories: undefined,
  inherits: undefined
})

const byId = (a: AgentSpec, b: AgentSpec): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

const missing = (operation: string, sessionId: string) =>
  Effect.fail(new PersistenceFailed({ operation, message: `no session "${sessionId}"` }))

/**
 * A fresh, empty in-memory store. Never fails to build; its methods fail with `PersistenceFailed` only for a
 * duplicate session id or a write to a session that does not exist, and `inheritArtifact` with `ScopeMismatch`
 * across orgs or scopes.
 */
export const makeMemory: Effect.Effect<Context.Tag.Service<SessionStore>> = Effect.sync(() => {
  /** org → agent id → version → spec. */
  const agents = new Map<string, Map<string, Map<number, AgentSpec>>>()
  const sessions = new Map<string, SessionRecord>()
  /** token hash → approval. */
  const approvals = new Map<string, ApprovalRecord>()
  /** message id → accepted message not yet settled, in acceptance order (a Map iterates in insertion order). */
  const inbox = new Map<string, InboxMessage>()
  /** `<org>\u0000<key>` → the first answer under that idempotency key. */
  const idempotency = new Map<string, IdempotencyRecord>()
  const keyOf = (orgId: string, key: string) => `${orgId}\u0000${key}`
  /** `<org>\u0000<UTC day>` → the day's spend under a daily budget (rails/OrgBudget). */
  const spend = new Map<string, { spentMicros: number; heldMicros: number; heldUntil: number }>()
  // Closed trajectories are kept packed (internal/packing): as objects they were two fifths of a held session's
  // bytes. Their templates are this store's own, so they go with it.
  const packer = Packing.make({ classes: [Usage, Principal], maxTemplates: 1024 })

  /** The session's record when it belongs to `orgId`: every read goes through here, so no read crosses orgs. */
  const owned = (orgId: string, id: string): SessionRecord | undefined => {
    const record = sessions.get(id)
    return record !== undefined && record.session.principal.orgId === orgId ? record : undefined
  }

  const latest = (versions: Map<number, AgentSpec>): AgentSpec | undefined => {
    let best: AgentSpec | undefined
    for (const spec of versions.values()) if (best === undefined || spec.version > best.version) best = spec
    return best
  }

  const service: Context.Tag.Service<SessionStore> = {
    putAgent: (orgId, spec) =>
      Effect.sync(() => {
        let byAgent = agents.get(orgId)
        if (byAgent === undefined) agents.set(orgId, byAgent = new Map())
        let versions = byAgent.get(spec.id)
        if (versions === undefined) byAgent.set(spec.id, versions = new Map())
        versions.set(spec.version, spec)
      }),

    getAgent: (orgId, id, version) =>
      Effect.sync(() => {
        const versions = agents.get(orgId)?.get(id)
        if (versions === undefined) return Option.none()
        return Option.fromNullable(version === undefined ? latest(versions) : versions.get(version))
      }),

    listAgents: (orgId) =>
      Effect.sync(() => {
        const byAgent = agents.get(orgId)
        if (byAgent === undefined) return []
        const out: Array<AgentSpec> = []
        for (const versions of byAgent.values()) {
          const spec = latest(versions)
          if (spec !== undefined) out.push(spec)
        }
        return out.sort(byId)
      }),

    createSession: (session) =>
      Effect.suspend(() => {
        if (sessions.has(session.id)) {
          return Effect.fail(
            new PersistenceFailed({ operation: "createSession", message: `session "${session.id}" already exists` })
          )
        }
        sessions.set(session.id, fresh(session))
        return Effect.void
      }),

    accept: ({ idempotency: first, message, session }) =>
      Effect.suspend((): Effect.Effect<AcceptOutcome, PersistenceFailed> => {
        // Checked before anything is written, and written in one synchronous step: all of it or none.
        if (first !== undefined) {
          const taken = idempotency.get(keyOf(first.orgId, first.key))
          if (taken !== undefined) return Effect.succeed({ _tag: "Duplicate" as const, first: taken })
        }
        if (session !== undefined && sessions.has(session.id)) {
          return Effect.fail(
            new PersistenceFailed({ operation: "accept", message: `session "${session.id}" already exists` })
          )
        }
        const stranger = session !== undefined &&
          (message.sessionId !== session.id || message.orgId !== session.principal.orgId)
        if (stranger || (session === undefined && owned(message.orgId, message.sessionId) === undefined)) {
          return missing("accept", message.sessionId)
        }
        if (session !== undefined) {
          sessions.set(session.id, fresh(session))
        }
        inbox.set(message.id, message)
        if (first !== undefined) idempotency.set(keyOf(first.orgId, first.key), first)
        return Effect.succeed({ _tag: "Accepted" as const })
      }),

    findIdempotency: (orgId, key) => Effect.sync(() => Option.fromNullable(idempotency.get(keyOf(orgId, key)))),

    inbox: (sessionId) =>
      Effect.sync(() => {
        const out: Array<InboxMessage> = []
        for (const message of inbox.values()) {
          if (sessionId === undefined || message.sessionId === sessionId) out.push(message)
        }
        return out
      }),

    settle: (sessionId, messageId) =>
      Effect.sync(() => {
        if (inbox.get(messageId)?.sessionId === sessionId) inbox.delete(messageId)
      }),

    getSession: (orgId, id) => Effect.sync(() => Option.fromNullable(owned(orgId, id)?.session)),

    listSessions: (orgId, options) =>
      Effect.suspend(() => {
        const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor)
        if (options.cursor !== undefined && after === undefined) {
          return Effect.fail(new PersistenceFailed({ operation: "listSessions", message: "not a session cursor" }))
        }
        // A scan: the memory store serves tests and demos, where a full pass over the sessions is cheap.
        const matching: Array<Session> = []
        for (const { session } of sessions.values()) {
          if (session.principal.orgId !== orgId) continue
          if (options.scope !== undefined && session.scope !== options.scope) continue
          if (options.status !== undefined && session.state.status !== options.status) continue
          if (after !== undefined && !listedBefore(after, session)) continue
          matching.push(session)
        }
        matching.sort((a, b) => (listedBefore(a, b) ? -1 : listedBefore(b, a) ? 1 : 0))
        const limit = Math.max(1, Math.floor(options.limit))
        const page = matching.slice(0, limit)
        const last = page[page.length - 1]
        return Effect.succeed(
          matching.length > limit && last !== undefined
            ? { sessions: page, nextCursor: encodeCursor(last) }
            : { sessions: page }
        )
      }),

    saveState: (id, state, at) =>
      Effect.suspend(() => {
        const record = sessions.get(id)
        if (record === undefined) return missing("saveState", id)
        record.session = { ...record.session, state, updatedAt: at }
        return Effect.void
      }),

    listRunning: () =>
      Effect.sync(() => {
        const out: Array<Session> = []
        for (const record of sessions.values()) if (record.session.state.status === "running") out.push(record.session)
        return out
      }),

    // Answers synchronously, so it has no use for a timeout.
    appendTurn: (sessionId, entry, at) =>
      Effect.suspend(() => {
        const record = sessions.get(sessionId)
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
        const record = owned(orgId, sessionId)
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
        const record = owned(orgId, sessionId)
        if (record === undefined) return missing("inheritArtifact", sessionId)
        // The same rule the SQL drivers' composite foreign key enforces: same org AND same scope.
        const from = owned(orgId, fromSessionId)
        if (from === undefined || from.session.scope !== record.session.scope) {
          return Effect.fail(Refusals.crossScope(sessionId, fromSessionId, record.session.scope, from?.session.scope))
        }
        if (record.inherits === undefined) record.inherits = new Set([fromSessionId])
        else record.inherits.add(fromSessionId)
        return Effect.void
      }),

    inherited: (orgId, sessionId) =>
      Effect.sync(() => {
        const inherits = owned(orgId, sessionId)?.inherits
        return inherits === undefined ? [] : Array.from(inherits).sort()
      }),

    issueApprovals: (sessionId, records) =>
      Effect.suspend(() => {
        if (!sessions.has(sessionId)) return missing("issueApprovals", sessionId)
        const calls = new Set(records.map((r) => `${r.turnSeq}:${r.callId}`))
        for (const [hash, record] of approvals) {
          if (
            record.sessionId === sessionId && record.usedAt === undefined &&
            calls.has(`${record.turnSeq}:${record.callId}`)
          ) {
            approvals.delete(hash)
          }
        }
        for (const record of records) approvals.set(record.tokenHash, { ...record, sessionId })
        return Effect.void
      }),

    findApproval: (orgId, sessionId, tokenHash) =>
      Effect.sync(() => {
        const record = approvals.get(tokenHash)
        return record !== undefined && record.orgId === orgId && record.sessionId === sessionId
          ? Option.some(record)
          : Option.none()
      }),

    spendApproval: (tokenHash, at) =>
      Effect.sync(() => {
        const record = approvals.get(tokenHash)
        if (record === undefined || record.usedAt !== undefined || record.expiresAt <= at) return false
        approvals.set(tokenHash, { ...record, usedAt: at })
        return true
      }),

    countPendingApprovals: (at, cap) =>
      Effect.sync(() => {
        let n = 0
        for (const record of approvals.values()) {
          if (n >= cap) break
          if (record.usedAt === undefined && record.expiresAt > at) n++
        }
        return n
      }),

    saveTrajectory: (trajectory) =>
      Effect.suspend(() => {
        const record = sessions.get(trajectory.sessionId)
        if (record === undefined) return missing("saveTrajectory", trajectory.sessionId)
        // An open trajectory is saved again and again as its burst goes: kept as it is until it closes. A closed one
        // is packed once its session holds another run: packing costs about a microsecond per leaf (a burst of
        // eleven model turns is ~200 µs, docs/benchmarks.md at 09f4c1e, "Issue 14, tenth pass"), and a session of one burst
        // — most of them — is not where held memory piles up; a session with history is.
        const list = record.trajectories ?? (record.trajectories = [])
        let at = list.length - 1
        while (at >= 0 && runIdOf(list[at]!) !== trajectory.runId) at--
        const others = at < 0 ? list.length : list.length - 1
        const stored = trajectory.open === true || others === 0
          ? trajectory
          : packer.pack(trajectory, trajectory.runId) ?? trajectory
        // Saved again as the burst goes (an open trajectory, then the closed one): replace, like the SQL upsert.
        const own = at < 0 ? list.push(stored) - 1 : at
        list[own] = stored
        if (stored !== trajectory) {
          // The session's first closed run, kept as an object while it was the only one, is packed with the second
          // (once: an open run's saves, every turn, do not look).
          for (let i = 0; i < list.length; i++) {
            const held = list[i]!
            if (i !== own && !isPacked(held) && held.open !== true) {
              list[i] = packer.pack(held, held.runId) ?? held
            }
          }
        }
        return Effect.void
      }),

    trajectories: (orgId, sessionId) =>
      Effect.sync(() => {
        const record = owned(orgId, sessionId)
        return record?.trajectories === undefined
          ? []
          : record.trajectories.map((stored) => isPacked(stored) ? packer.unpack(stored) as Trajectory : stored)
      }),

    usage: (orgId, from, to) =>
      Effect.sync(() => {
        const found: Array<Trajectory> = []
        for (const record of sessions.values()) {
          if (record.session.principal.orgId !== orgId || record.trajectories === undefined) continue
          for (const stored of record.trajectories) {
            const t = isPacked(stored) ? packer.unpack(stored) as Trajectory : stored
            if (t.startedAt >= from - Ledger.lookBehindMs && t.startedAt < to) found.push(t)
          }
        }
        return Ledger.rows(found, from, to)
      }),

    holdSpend: (orgId, day, perDayMicros, wantMicros, at) =>
      Effect.sync(() => {
        const key = keyOf(orgId, day)
        const row = spend.get(key) ?? { spentMicros: 0, heldMicros: 0, heldUntil: 0 }
        const live = row.heldUntil > at ? row.heldMicros : 0
        const granted = OrgBudget.grant(perDayMicros, row.spentMicros, live, wantMicros)
        if (granted > 0) {
          spend.set(key, {
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
        const row = spend.get(key) ?? { spentMicros: 0, heldMicros: 0, heldUntil: 0 }
        spend.set(key, {
          spentMicros: row.spentMicros + spentMicros,
          heldMicros: Math.max(0, row.heldMicros - heldMicros),
          heldUntil: row.heldUntil
        })
      }),

    daySpend: (orgId, day) => Effect.sync(() => spend.get(keyOf(orgId, day))?.spentMicros ?? 0)
  }
  for (const listener of listeners) listener(service, () => [...sessions.values()].map((r) => r.session))
  return service
})

/** A memory store as `track` hands it over: the store, and every session it holds (of every org). */
export type Tracked = (store: Context.Tag.Service<SessionStore>, sessions: () => ReadonlyArray<Session>) => void

const listeners = new Set<Tracked>()

/**
 * Calls `listener` with every memory store made from now on (the test kit replays every session a test suite
 * stores this way). Returns the function that stops it.
 */
export const track = (listener: Tracked): () => void => {
  listeners.add(listener)
  return () => listeners.delete(listener)
}

/** The in-memory `SessionStore`; each build of the layer starts empty. */
export const layerMemory: Layer.Layer<SessionStore> = Layer.effect(SessionStore, makeMemory)
