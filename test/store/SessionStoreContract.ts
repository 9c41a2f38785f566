/**
 * The SessionStore contract: one suite every driver must pass (memory today, SQL on PGlite and Postgres next).
 * The layer is built once per suite and shared by its tests, so each test works in its own org and sessions;
 * live services are used because a driver may do real I/O.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { Layer } from "effect"
import { randomUUID } from "node:crypto"
import { AgentSpec } from "../../src/domain/AgentSpec.js"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import type { TurnEntry } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope } from "../../src/domain/Scope.js"
import type { Session, SessionState } from "../../src/domain/Session.js"
import { initialState } from "../../src/domain/Session.js"
import type { Trajectory } from "../../src/domain/Trajectory.js"
import { Usage } from "../../src/domain/Usage.js"
import { SessionStore } from "../../src/store/SessionStore.js"

const uid = () => randomUUID().replaceAll("-", "")
const newOrg = () => `org_${uid().slice(0, 12)}`

const newSession = (orgId: string, state: SessionState = initialState): Session => ({
  id: SessionId.make(`ses_${uid()}`),
  principal: new Principal({ orgId, userId: "u1" }),
  scope: Scope.make("incident:INC-42"),
  agentId: AgentId.make("triage"),
  agentVersion: 1,
  createdAt: 1_000,
  updatedAt: 1_000,
  state
})

const user = (text: string): TurnEntry => ({ kind: "user", text })

const spec = (id: string, version: number, name = `Agent ${id} v${version}`) =>
  new AgentSpec({ id: AgentId.make(id), version, name, instructions: "Investigate the incident." })

const trajectory = (session: Session, n: number): Trajectory => ({
  runId: `run_${uid()}`,
  sessionId: session.id,
  principal: session.principal,
  agentId: session.agentId,
  agentVersion: session.agentVersion,
  tier: "default",
  startedAt: 1_000 * n,
  endedAt: 1_000 * n + 500,
  turns: { from: 2 * n - 1, to: 2 * n },
  modelCalls: [],
  toolCalls: [{ callId: "c1", name: "search", effect: "read", source: "core", status: "ok", durationMs: 12 }],
  errors: [{ code: "tool_error", message: "search failed once" }],
  budgets: [{ at: 1_000 * n, modelCallsBurst: 1, modelCallsSession: n, toolCalls: 1, tokens: 100, activeMs: 500 }],
  usage: new Usage({ inputTokens: 100, outputTokens: 20, cacheReadTokens: 0, cacheWriteTokens: 0 }),
  exitReason: "completed"
})

/** Registers the contract suite for one driver. */
export const sessionStoreContract = (name: string, storeLayer: Layer.Layer<SessionStore, unknown>): void =>
  layer(storeLayer, { excludeTestServices: true })(`SessionStore contract: ${name}`, (it) => {
    it.effect("numbers turns 1, 2, 3 in append order and reads them back as stored", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        yield* store.createSession(session)
        const first = yield* store.appendTurn(session.id, user("hello"), 10)
        const second = yield* store.appendTurn(
          session.id,
          {
            kind: "assistant",
            text: "",
            toolCalls: [{ id: "c1", name: "search", arguments: `{"q":"x"}` }],
            finishReason: "tool_calls"
          },
          11
        )
        const third = yield* store.appendTurn(session.id, { kind: "notice", rail: "RepeatGuard", text: "stop" }, 12)
        expect([first.seq, second.seq, third.seq]).toEqual([1, 2, 3])
        expect(first).toEqual({ sessionId: session.id, seq: 1, at: 10, entry: { kind: "user", text: "hello" } })
        expect(yield* store.turns(session.principal.orgId, session.id)).toEqual([first, second, third])
      }))

    it.effect("gives 50 concurrent appends on one session the numbers 1..50 with no gap or duplicate", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        yield* store.createSession(session)
        const appended = yield* Effect.all(
          Array.from({ length: 50 }, (_, i) => store.appendTurn(session.id, user(`m${i}`), i)),
          { concurrency: "unbounded" }
        )
        expect(appended.map((t) => t.seq).sort((a, b) => a - b)).toEqual(range(1, 50))
        const stored = yield* store.turns(session.principal.orgId, session.id)
        expect(stored.map((t) => t.seq)).toEqual(range(1, 50))
        expect(new Set(stored.map((t) => t.entry.kind === "user" ? t.entry.text : "")).size).toBe(50)
      }))

    it.effect("keeps each session's own sequence under concurrent appends across many sessions", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const sessions = Array.from({ length: 10 }, () => newSession(org))
        yield* Effect.forEach(sessions, store.createSession, { discard: true })
        // Interleave: append i goes to session i % 10, so every session sees 50 racing appends.
        yield* Effect.all(
          Array.from({ length: 500 }, (_, i) => store.appendTurn(sessions[i % 10]!.id, user(`m${i}`), i)),
          { concurrency: "unbounded", discard: true }
        )
        for (const session of sessions) {
          const stored = yield* store.turns(org, session.id)
          expect(stored.map((t) => t.seq)).toEqual(range(1, 50))
          expect(stored.every((t) => t.sessionId === session.id)).toBe(true)
        }
      }))

    it.effect("returns only the turns after a sequence number", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        const org = session.principal.orgId
        yield* store.createSession(session)
        yield* Effect.forEach(range(1, 5), (i) => store.appendTurn(session.id, user(`m${i}`), i), { discard: true })
        expect((yield* store.turns(org, session.id, 2)).map((t) => t.seq)).toEqual([3, 4, 5])
        expect((yield* store.turns(org, session.id, 0)).map((t) => t.seq)).toEqual([1, 2, 3, 4, 5])
        expect(yield* store.turns(org, session.id, 5)).toEqual([])
        expect(yield* store.turns(org, session.id, 99)).toEqual([])
      }))

    it.effect("never returns another org's rows from any read", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        const org = session.principal.orgId
        const intruder = newOrg()
        yield* store.createSession(session)
        yield* store.appendTurn(session.id, user("secret"), 1)
        yield* store.saveTrajectory(trajectory(session, 1))
        yield* store.putAgent(org, spec("triage", 1))

        expect(Option.isSome(yield* store.getSession(org, session.id))).toBe(true)
        expect(yield* store.getSession(intruder, session.id)).toEqual(Option.none())
        expect(yield* store.turns(intruder, session.id)).toEqual([])
        expect(yield* store.turns(intruder, session.id, 0)).toEqual([])
        expect(yield* store.trajectories(intruder, session.id)).toEqual([])
        expect(yield* store.getAgent(intruder, "triage")).toEqual(Option.none())
        expect(yield* store.getAgent(intruder, "triage", 1)).toEqual(Option.none())
        expect(yield* store.listAgents(intruder)).toEqual([])
      }))

    it.effect("fails with PersistenceFailed for a duplicate session id, even from another org", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        yield* store.createSession(session)
        const again = yield* Effect.flip(store.createSession(session))
        expect(again._tag).toBe("PersistenceFailed")
        const elsewhere = { ...session, principal: new Principal({ orgId: newOrg(), userId: "u2" }) }
        expect((yield* Effect.flip(store.createSession(elsewhere)))._tag).toBe("PersistenceFailed")
      }))

    it.effect("fails with PersistenceFailed when writing to a session that does not exist", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const ghost = newSession(newOrg())
        expect((yield* Effect.flip(store.appendTurn(ghost.id, user("x"), 1)))._tag).toBe("PersistenceFailed")
        expect((yield* Effect.flip(store.saveState(ghost.id, initialState, 1)))._tag).toBe("PersistenceFailed")
        expect((yield* Effect.flip(store.saveTrajectory(trajectory(ghost, 1))))._tag).toBe("PersistenceFailed")
        expect(yield* store.getSession(ghost.principal.orgId, ghost.id)).toEqual(Option.none())
      }))

    it.effect("keeps agent versions: the highest by default, any by number, latest of each in the list", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        yield* store.putAgent(org, spec("triage", 1))
        yield* store.putAgent(org, spec("triage", 3))
        yield* store.putAgent(org, spec("triage", 2))
        yield* store.putAgent(org, spec("billing", 1))
        expect(yield* store.getAgent(org, "triage")).toEqual(Option.some(spec("triage", 3)))
        expect(yield* store.getAgent(org, "triage", 2)).toEqual(Option.some(spec("triage", 2)))
        expect(yield* store.getAgent(org, "triage", 9)).toEqual(Option.none())
        expect(yield* store.getAgent(org, "nobody")).toEqual(Option.none())
        expect(yield* store.listAgents(org)).toEqual([spec("billing", 1), spec("triage", 3)])

        yield* store.putAgent(org, spec("triage", 2, "Renamed"))
        expect(yield* store.getAgent(org, "triage", 2)).toEqual(Option.some(spec("triage", 2, "Renamed")))
        expect(yield* store.getAgent(org, "triage")).toEqual(Option.some(spec("triage", 3)))
      }))

    it.effect("round-trips a saved state and stamps updatedAt", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        yield* store.createSession(session)
        const state: SessionState = {
          status: "awaiting_confirmation",
          modelCalls: 7,
          toolCalls: 12,
          usage: new Usage({ inputTokens: 1_200, outputTokens: 300, cacheReadTokens: 50, cacheWriteTokens: 0 }),
          providerIndex: 1,
          exhausted: false,
          activeMs: 4_321,
          bursts: 2,
          lastExitReason: "confirmation_pending",
          report: {
            exitReason: "confirmation_pending",
            source: "fallback",
            data: { summary: "waiting", findings: [], confidence: "low", nextSteps: ["approve"] },
            fallbackReason: "no report from the model"
          },
          pending: [{ callId: "c9", tool: "restart_pod", arguments: `{"pod":"api-1"}`, token: "tok_1" }]
        }
        yield* store.saveState(session.id, state, 5_000)
        const read = yield* store.getSession(session.principal.orgId, session.id)
        expect(read).toEqual(Option.some({ ...session, state, updatedAt: 5_000 }))
      }))

    it.effect("lists the running sessions of every org, and only those", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const running = newSession(newOrg(), { ...initialState, status: "running" })
        const idle = newSession(newOrg())
        const elsewhere = newSession(newOrg())
        yield* Effect.forEach([running, idle, elsewhere], store.createSession, { discard: true })
        yield* store.saveState(elsewhere.id, { ...initialState, status: "running" }, 2_000)

        const ids = (sessions: ReadonlyArray<Session>) => new Set(sessions.map((s) => s.id))
        const first = ids(yield* store.listRunning())
        expect(first.has(running.id)).toBe(true)
        expect(first.has(elsewhere.id)).toBe(true)
        expect(first.has(idle.id)).toBe(false)

        yield* store.saveState(running.id, { ...initialState, status: "interrupted" }, 3_000)
        yield* store.saveState(idle.id, { ...initialState, status: "running" }, 3_000)
        const second = ids(yield* store.listRunning())
        expect(second.has(running.id)).toBe(false)
        expect(second.has(idle.id)).toBe(true)
        expect((yield* store.listRunning()).every((s) => s.state.status === "running")).toBe(true)
      }))

    it.effect("round-trips trajectories, oldest first", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        yield* store.createSession(session)
        expect(yield* store.trajectories(session.principal.orgId, session.id)).toEqual([])
        const runs = [trajectory(session, 1), trajectory(session, 2), trajectory(session, 3)]
        yield* Effect.forEach(runs, store.saveTrajectory, { discard: true })
        expect(yield* store.trajectories(session.principal.orgId, session.id)).toEqual(runs)
      }))
  })

const range = (from: number, to: number): Array<number> => Array.from({ length: to - from + 1 }, (_, i) => from + i)
