/**
 * memorySessions — the memory store's agents, sessions and accepted messages (MemoryStore). Every method is one
 * synchronous step, so an accept's checks and writes happen all together or not at all.
 */
import { Effect, Option } from "effect"
import type { Context } from "effect"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import { PersistenceFailed } from "../../domain/Errors.js"
import type { InboxMessage } from "../../domain/Inbox.js"
import type { Session } from "../../domain/Session.js"
import type { AcceptOutcome, SessionStore } from "../SessionStore.js"
import { decodeCursor, encodeCursor, listedBefore } from "../SessionStore.js"
import type { State } from "./memoryState.js"
import { fresh, keyOf, missing, owned } from "./memoryState.js"

type Service = Context.Tag.Service<SessionStore>

const byId = (a: AgentSpec, b: AgentSpec): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

const latest = (versions: Map<number, AgentSpec>): AgentSpec | undefined => {
  let best: AgentSpec | undefined
  for (const spec of versions.values()) if (best === undefined || spec.version > best.version) best = spec
  return best
}

/** Agents by org, id and version. */
export const agents = (state: State): Pick<Service, "putAgent" | "getAgent" | "listAgents"> => ({
  putAgent: (orgId, spec) =>
    Effect.sync(() => {
      let byAgent = state.agents.get(orgId)
      if (byAgent === undefined) state.agents.set(orgId, byAgent = new Map())
      let versions = byAgent.get(spec.id)
      if (versions === undefined) byAgent.set(spec.id, versions = new Map())
      versions.set(spec.version, spec)
    }),

  getAgent: (orgId, id, version) =>
    Effect.sync(() => {
      const versions = state.agents.get(orgId)?.get(id)
      if (versions === undefined) return Option.none()
      return Option.fromNullable(version === undefined ? latest(versions) : versions.get(version))
    }),

  listAgents: (orgId) =>
    Effect.sync(() => {
      const byAgent = state.agents.get(orgId)
      if (byAgent === undefined) return []
      const out: Array<AgentSpec> = []
      for (const versions of byAgent.values()) {
        const spec = latest(versions)
        if (spec !== undefined) out.push(spec)
      }
      return out.sort(byId)
    })
})

/** Accepted messages (the durable mailbox) and the idempotency records stored with them. */
export const inbox = (state: State): Pick<Service, "accept" | "findIdempotency" | "inbox" | "settle"> => ({
  accept: ({ idempotency: first, message, session }) =>
    Effect.suspend((): Effect.Effect<AcceptOutcome, PersistenceFailed> => {
      // Checked before anything is written, and written in one synchronous step: all of it or none.
      if (first !== undefined) {
        const taken = state.idempotency.get(keyOf(first.orgId, first.key))
        if (taken !== undefined) return Effect.succeed({ _tag: "Duplicate" as const, first: taken })
      }
      if (session !== undefined && state.sessions.has(session.id)) {
        return Effect.fail(
          new PersistenceFailed({ operation: "accept", message: `session "${session.id}" already exists` })
        )
      }
      const stranger = session !== undefined &&
        (message.sessionId !== session.id || message.orgId !== session.principal.orgId)
      if (stranger || (session === undefined && owned(state, message.orgId, message.sessionId) === undefined)) {
        return missing("accept", message.sessionId)
      }
      if (session !== undefined) {
        state.sessions.set(session.id, fresh(session))
      }
      state.inbox.set(message.id, message)
      if (first !== undefined) state.idempotency.set(keyOf(first.orgId, first.key), first)
      return Effect.succeed({ _tag: "Accepted" as const })
    }),

  findIdempotency: (orgId, key) => Effect.sync(() => Option.fromNullable(state.idempotency.get(keyOf(orgId, key)))),

  inbox: (sessionId) =>
    Effect.sync(() => {
      const out: Array<InboxMessage> = []
      for (const message of state.inbox.values()) {
        if (sessionId === undefined || message.sessionId === sessionId) out.push(message)
      }
      return out
    }),

  settle: (sessionId, messageId) =>
    Effect.sync(() => {
      if (state.inbox.get(messageId)?.sessionId === sessionId) state.inbox.delete(messageId)
    })
})

/** Sessions: created, read, listed a page at a time, their state saved. */
export const sessions = (
  state: State
): Pick<Service, "createSession" | "getSession" | "listSessions" | "saveState" | "listRunning"> => ({
  createSession: (session) =>
    Effect.suspend(() => {
      if (state.sessions.has(session.id)) {
        return Effect.fail(
          new PersistenceFailed({ operation: "createSession", message: `session "${session.id}" already exists` })
        )
      }
      state.sessions.set(session.id, fresh(session))
      return Effect.void
    }),

  getSession: (orgId, id) => Effect.sync(() => Option.fromNullable(owned(state, orgId, id)?.session)),

  listSessions: (orgId, options) =>
    Effect.suspend(() => {
      const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor)
      if (options.cursor !== undefined && after === undefined) {
        return Effect.fail(new PersistenceFailed({ operation: "listSessions", message: "not a session cursor" }))
      }
      // A scan: the memory store serves tests and demos, where a full pass over the sessions is cheap.
      const matching: Array<Session> = []
      for (const { session } of state.sessions.values()) {
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

  saveState: (id, sessionState, at) =>
    Effect.suspend(() => {
      const record = state.sessions.get(id)
      if (record === undefined) return missing("saveState", id)
      record.session = { ...record.session, state: sessionState, updatedAt: at }
      return Effect.void
    }),

  listRunning: () =>
    Effect.sync(() => {
      const out: Array<Session> = []
      for (const record of state.sessions.values()) {
        if (record.session.state.status === "running") out.push(record.session)
      }
      return out
    })
})
