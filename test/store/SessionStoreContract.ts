/**
 * The SessionStore contract: one suite every driver must pass (memory, SQL on embedded PGlite, SQL on Postgres).
 * The layer is built once per suite and shared by its tests, so each test works in its own org and sessions;
 * live services are used because a driver may do real I/O.
 */
import { expect, layer } from "@effect/vitest"
import { Effect, Option } from "effect"
import type { Layer } from "effect"
import { AgentSpec } from "../../src/domain/AgentSpec.js"
import type { ApprovalRecord } from "../../src/domain/Approval.js"
import { AgentId } from "../../src/domain/Ids.js"
import type { InboxMessage } from "../../src/domain/Inbox.js"
import type { TurnEntry } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import type { Session, SessionState } from "../../src/domain/Session.js"
import { initialState, view } from "../../src/domain/Session.js"
import type { Trajectory } from "../../src/domain/Trajectory.js"
import { Usage } from "../../src/domain/Usage.js"
import * as Limits from "../../src/rails/Limits.js"
import * as OrgBudget from "../../src/rails/OrgBudget.js"
import * as Pairing from "../../src/store/Pairing.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import { newOrg, newSession, uid, user } from "./StoreFixtures.js"

/** An agent spec `id` v`version`. */
export const spec = (id: string, version: number, name = `Agent ${id} v${version}`) =>
  new AgentSpec({ id: AgentId.make(id), version, name, instructions: "Investigate the incident." })

/** The n-th run of `session`: a trajectory with one read and one write call. */
export const trajectory = (session: Session, n: number): Trajectory => ({
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
  toolCalls: [
    {
      callId: "c1",
      name: "search",
      origin: "model",
      effect: "read",
      source: "core",
      status: "ok",
      durationMs: 12,
      arguments: `{"q":"oom"}`,
      result: "3 hits",
      isError: false
    },
    {
      callId: "c2",
      name: "restart_pod",
      origin: "handler",
      effect: "write",
      source: "mcp:k8s",
      status: "error",
      durationMs: 40,
      arguments: `{"pod":"api-1"}`,
      result: "pod not found",
      isError: true
    }
  ],
  errors: [{ code: "tool_error", message: "search failed once" }],
  budgets: [{ at: 1_000 * n, modelCallsBurst: 1, modelCallsSession: n, toolCalls: 1, tokens: 100, activeMs: 500 }],
  usage: new Usage({ inputTokens: 100, outputTokens: 20, cacheReadTokens: 0, cacheWriteTokens: 0 }),
  exitReason: "completed"
})

/** An assistant turn asking for calls with these ids (tool `search`). */
export const withCalls = (...ids: ReadonlyArray<string>): TurnEntry => ({
  kind: "assistant",
  text: "",
  toolCalls: ids.map((id) => ({ id, name: "search", arguments: `{"q":"${id}"}` })),
  finishReason: "tool_calls"
})

/** The turn a store writes to close the calls of `withCalls(...ids)`. */
export const closingOf = (...ids: ReadonlyArray<string>): TurnEntry => ({
  kind: "tool_results",
  results: ids.map((id) => ({
    callId: id,
    name: "search",
    content: Pairing.closingText("search"),
    isError: true,
    status: "unknown_outcome" as const
  }))
})

/** Indexes of the entries that break the pairing: anything but results right after an assistant turn with calls. */
export const pairingBreaks = (entries: ReadonlyArray<TurnEntry>): Array<number> =>
  entries.flatMap((entry, i) => i > 0 && Pairing.opens(entries[i - 1]) && Pairing.breaks(entry) ? [i] : [])

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
        const third = yield* store.appendTurn(session.id, {
          kind: "tool_results",
          results: [{ callId: "c1", name: "search", content: "3 hits", isError: false, status: "ok" }]
        }, 12)
        const fourth = yield* store.appendTurn(session.id, { kind: "notice", rail: "RepeatGuard", text: "stop" }, 13)
        expect([first.seq, second.seq, third.seq, fourth.seq]).toEqual([1, 2, 3, 4])
        expect(first).toEqual({ sessionId: session.id, seq: 1, at: 10, entry: { kind: "user", text: "hello" } })
        expect([third.closed, fourth.closed]).toEqual([undefined, undefined])
        expect(yield* store.turns(session.principal.orgId, session.id)).toEqual([first, second, third, fourth])
      }))

    it.effect("closes an assistant turn's open calls before a user or notice turn, in the same write", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        yield* store.createSession(session)
        yield* store.appendTurn(session.id, user("hello"), 10)
        yield* store.appendTurn(session.id, withCalls("c1", "c2"), 11)
        const next = yield* store.appendTurn(session.id, user("and now?"), 12)
        expect(next.seq).toBe(4)
        expect(next.closed).toEqual({ sessionId: session.id, seq: 3, at: 12, entry: closingOf("c1", "c2") })
        // Calls closed by a notice the same way; a paired turn is left alone.
        yield* store.appendTurn(session.id, withCalls("c3"), 13)
        const notice = yield* store.appendTurn(session.id, { kind: "notice", rail: "Approvals", text: "n" }, 14)
        expect(notice.closed?.entry).toEqual(closingOf("c3"))
        const turns = yield* store.turns(session.principal.orgId, session.id)
        expect(turns.map((t) => [t.seq, t.entry.kind])).toEqual([
          [1, "user"],
          [2, "assistant"],
          [3, "tool_results"],
          [4, "user"],
          [5, "assistant"],
          [6, "tool_results"],
          [7, "notice"]
        ])
        expect(turns[2]!.entry).toEqual(closingOf("c1", "c2"))
        expect(pairingBreaks(turns.map((t) => t.entry))).toEqual([])
      }))

    it.effect("keeps the pairing when the open calls and the next turn are appended concurrently", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const sessions = Array.from({ length: 20 }, () => newSession(newOrg()))
        yield* Effect.forEach(sessions, store.createSession, { discard: true })
        // Each session's two appends are submitted together (one batch on a SQL driver, closed within it).
        const appended = yield* Effect.forEach(sessions, (session) =>
          Effect.all([
            store.appendTurn(session.id, withCalls("c1"), 1),
            store.appendTurn(session.id, user("next"), 2)
          ], { concurrency: "unbounded" }), { concurrency: "unbounded" })
        for (const [i, session] of sessions.entries()) {
          const turns = yield* store.turns(session.principal.orgId, session.id)
          expect(turns.map((t) => t.entry.kind)).toEqual(["assistant", "tool_results", "user"])
          expect(appended[i]![1].closed).toEqual(turns[1])
          expect(appended[i]![1].seq).toBe(3)
        }
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
        const sibling = newSession(org)
        yield* store.createSession(sibling)
        yield* store.inheritArtifact(org, sibling.id, session.id)
        expect(yield* store.inherited(org, sibling.id)).toEqual([session.id])
        expect(yield* store.inherited(intruder, sibling.id)).toEqual([])
        // A write through another org's id is refused like a missing session.
        expect((yield* Effect.flip(store.inheritArtifact(intruder, sibling.id, session.id)))._tag).toBe(
          "PersistenceFailed"
        )
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
          costMicros: 4_567,
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
          pending: [
            {
              callId: "c8",
              tool: "scale",
              arguments: `{"n":2}`,
              turnSeq: 3,
              source: "mcp:k8s",
              dispatchedAt: 4_000,
              resolution: {
                decision: "approve",
                content: "scaled",
                isError: false,
                status: "ok",
                decidedBy: "u1",
                durationMs: 12
              }
            },
            { callId: "c9", tool: "restart_pod", arguments: `{"pod":"api-1"}`, turnSeq: 5 }
          ]
        }
        yield* store.saveState(session.id, state, 5_000)
        const read = yield* store.getSession(session.principal.orgId, session.id)
        expect(read).toEqual(Option.some({ ...session, state, updatedAt: 5_000 }))
      }))

    it.effect("keeps approval tokens by hash, within their org and session, spent once and only before expiry", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        const other = newSession(newOrg())
        yield* Effect.forEach([session, other], store.createSession, { discard: true })
        const record = (tokenHash: string, callId: string, expiresAt = 10_000): ApprovalRecord => ({
          tokenHash,
          orgId: session.principal.orgId,
          userId: session.principal.userId,
          sessionId: session.id,
          callId,
          turnSeq: 4,
          tool: "restart_pod",
          argsHash: "a".repeat(64),
          createdAt: 1_000,
          expiresAt
        })
        const h = (n: number) => `${uid()}${n}`
        const [first, second, lapsed] = [h(1), h(2), h(3)]
        yield* store.issueApprovals(session.id, [record(first, "c1"), record(lapsed, "c2", 2_000)])
        expect(yield* store.findApproval(session.principal.orgId, session.id, first)).toEqual(
          Option.some(record(first, "c1"))
        )
        // Another org, another session, an unknown hash: nothing.
        expect(yield* store.findApproval(other.principal.orgId, session.id, first)).toEqual(Option.none())
        expect(yield* store.findApproval(session.principal.orgId, other.id, first)).toEqual(Option.none())
        expect(yield* store.findApproval(session.principal.orgId, session.id, h(9))).toEqual(Option.none())
        // Spent once; the second spend (a replay, or a racing decision) loses.
        const spends = yield* Effect.all([store.spendApproval(first, 3_000), store.spendApproval(first, 3_001)], {
          concurrency: "unbounded"
        })
        expect(spends.filter(Boolean)).toHaveLength(1)
        const spent = yield* store.findApproval(session.principal.orgId, session.id, first)
        expect(Option.map(spent, (r) => r.usedAt !== undefined)).toEqual(Option.some(true))
        // Expired tokens cannot be spent.
        expect(yield* store.spendApproval(lapsed, 2_000)).toBe(false)
        // A renewal revokes the unspent token of the same call and keeps the spent one.
        yield* store.issueApprovals(session.id, [record(second, "c2")])
        expect(yield* store.findApproval(session.principal.orgId, session.id, lapsed)).toEqual(Option.none())
        expect(Option.isSome(yield* store.findApproval(session.principal.orgId, session.id, second))).toBe(true)
        yield* store.issueApprovals(session.id, [record(h(4), "c1")])
        expect(Option.isSome(yield* store.findApproval(session.principal.orgId, session.id, first))).toBe(true)
      }))

    it.effect("counts the live approval tokens (unspent, not expired) at a time, up to a cap", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        if (store.countPendingApprovals === undefined) return
        const session = newSession(newOrg())
        yield* store.createSession(session)
        // Far-future times, so tokens other tests left in a shared database have all expired by them.
        const base = 9_000_000_000_000
        const record = (tokenHash: string, callId: string, expiresAt: number): ApprovalRecord => ({
          tokenHash,
          orgId: session.principal.orgId,
          userId: session.principal.userId,
          sessionId: session.id,
          callId,
          turnSeq: 2,
          tool: "restart_pod",
          argsHash: "a".repeat(64),
          createdAt: base,
          expiresAt
        })
        const [a, b, c] = [`${uid()}a`, `${uid()}b`, `${uid()}c`]
        yield* store.issueApprovals(session.id, [
          record(a, "c1", base + 10_000),
          record(b, "c2", base + 10_000),
          record(c, "c3", base + 1_000)
        ])
        expect(yield* store.countPendingApprovals(base + 500, 100)).toBe(3)
        // c has expired by base + 5 000; a spent token is no longer pending.
        expect(yield* store.spendApproval(a, base + 600)).toBe(true)
        expect(yield* store.countPendingApprovals(base + 5_000, 100)).toBe(1)
        // The count stops at the cap.
        expect(yield* store.countPendingApprovals(base + 500, 1)).toBe(1)
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
    it.effect("grants an org's daily budget atomically: holds never jointly pass it, settling counts the spend", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        // 40 holds of 100 at once against 1,000: exactly 10 are granted whole, the rest nothing.
        const holds = yield* Effect.forEach(
          Array.from({ length: 40 }, () => 100),
          (want) => store.holdSpend(org, "2026-12-06", 1_000, want, 5_000),
          { concurrency: "unbounded" }
        )
        const granted = holds.map((h) => h.granted)
        expect(granted.reduce((a, b) => a + b, 0)).toBe(1_000)
        expect(granted.filter((g) => g === 100).length).toBe(10)
        // A hold is granted what is left, at most what it asked.
        yield* Effect.forEach(
          holds.filter((h) => h.granted > 0).slice(0, 5),
          (h) => store.settleSpend(org, "2026-12-06", h.granted, 60),
          { discard: true }
        )
        expect(yield* store.daySpend(org, "2026-12-06")).toBe(300)
        // 300 spent, 500 still held: 200 left.
        const partial = yield* store.holdSpend(org, "2026-12-06", 1_000, 450, 6_000)
        expect(partial).toEqual({ granted: 200, tally: { spentMicros: 300, heldMicros: 500 } })
        // Other days and other orgs are their own.
        expect(yield* store.daySpend(org, "2026-12-07")).toBe(0)
        expect((yield* store.holdSpend(newOrg(), "2026-12-06", 1_000, 450, 6_000)).granted).toBe(450)
        // Holds of a process that died stop counting once the org has taken none for the hold lifetime.
        const later = yield* store.holdSpend(org, "2026-12-06", 1_000, 1_000, 6_000 + OrgBudget.holdLifetimeMs + 1)
        expect(later).toEqual({ granted: 700, tally: { spentMicros: 300, heldMicros: 0 } })
      }))
    it.effect("sums the usage ledger by UTC day, agent, provider and model, over a range, for one org only", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const session = newSession(org)
        const other = newSession(newOrg())
        yield* store.createSession(session)
        yield* store.createSession(other)
        const day1 = Date.parse("2026-12-01T23:59:00Z")
        const day2 = Date.parse("2026-12-02T00:01:00Z")
        const attempt = (provider: string, startedAt: number, usage: Usage, costMicros?: number) => ({
          provider,
          attempt: 1,
          startedAt,
          durationMs: 100,
          request: { messages: 1, tools: 0 },
          usage,
          ...(costMicros === undefined ? {} : { costMicros })
        })
        const u = (input: number, output: number, cacheRead = 0, reasoning = 0) =>
          new Usage({
            inputTokens: input,
            outputTokens: output,
            cacheReadTokens: cacheRead,
            cacheWriteTokens: 0,
            reasoningTokens: reasoning
          })
        const route = [
          { name: "claude", model: "claude-sonnet-4-5", maxAttempts: 3, timeoutMs: 1_000 },
          { name: "gpt", model: "gpt-5", maxAttempts: 3, timeoutMs: 1_000 }
        ]
        const base = trajectory(session, 1)
        const replay = {
          seed: 1,
          limits: Limits.defaults,
          policy: [],
          route,
          tools: [],
          before: {
            modelCalls: 0,
            toolCalls: 0,
            tokens: 0,
            activeMs: 0,
            providerIndex: 0,
            exhausted: false,
            costMicros: 0
          }
        }
        // A burst across midnight: a failed attempt (billed), a retry, a failover.
        yield* store.saveTrajectory({
          ...base,
          startedAt: day1 - 1_000,
          replay,
          modelCalls: [
            attempt("claude", day1, u(1_000, 0), 3_000),
            attempt("claude", day2, u(1_000, 100, 800, 40), 2_340),
            attempt("gpt", day2 + 5, u(500, 50), 1_125)
          ]
        })
        // Another org's attempt, the same day: never counted.
        yield* store.saveTrajectory({
          ...trajectory(other, 1),
          startedAt: day2,
          replay,
          modelCalls: [attempt("gpt", day2, u(9, 9), 99)]
        })
        const all = yield* store.usage(org, Date.parse("2026-12-01T00:00:00Z"), Date.parse("2026-12-03T00:00:00Z"))
        const row = (
          day: string,
          provider: string,
          model: string,
          attempts: number,
          usage: Usage,
          costMicros: number
        ) => ({
          day,
          agentId: session.agentId,
          provider,
          model,
          attempts,
          inputTokens: usage.inputTokens,
          outputTokens: usage.outputTokens,
          cacheReadTokens: usage.cacheReadTokens,
          cacheWriteTokens: 0,
          reasoningTokens: usage.reasoningTokens,
          costMicros
        })
        expect(all).toEqual([
          row("2026-12-01", "claude", "claude-sonnet-4-5", 1, u(1_000, 0), 3_000),
          row("2026-12-02", "claude", "claude-sonnet-4-5", 1, u(1_000, 100, 800, 40), 2_340),
          row("2026-12-02", "gpt", "gpt-5", 1, u(500, 50), 1_125)
        ])
        // The range is by attempt: the second day alone.
        expect(yield* store.usage(org, Date.parse("2026-12-02T00:00:00Z"), Date.parse("2026-12-03T00:00:00Z")))
          .toEqual(all.slice(1))
      }))

    it.effect("records an inherited artifact of the same org and scope, once", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const earlier = newSession(org)
        const other = newSession(org)
        const later = newSession(org)
        yield* Effect.forEach([earlier, other, later], store.createSession, { discard: true })
        yield* store.inheritArtifact(org, later.id, earlier.id)
        yield* store.inheritArtifact(org, later.id, other.id)
        yield* store.inheritArtifact(org, later.id, earlier.id)
        expect(yield* store.inherited(org, later.id)).toEqual([earlier.id, other.id].sort())
        expect(yield* store.inherited(org, earlier.id)).toEqual([])
      }))

    it.effect("refuses a cross-scope or cross-org inherited artifact with ScopeMismatch", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const later = newSession(org)
        const otherScope = newSession(org, initialState, "incident:INC-7")
        const otherOrg = newSession(newOrg())
        yield* Effect.forEach([later, otherScope, otherOrg], store.createSession, { discard: true })

        const crossScope = yield* Effect.flip(store.inheritArtifact(org, later.id, otherScope.id))
        expect(crossScope._tag).toBe("ScopeMismatch")
        if (crossScope._tag === "ScopeMismatch") {
          expect(crossScope.expected).toBe("incident:INC-42")
          expect(crossScope.actual).toBe("incident:INC-7")
        }
        // Another org's session is indistinguishable from a missing one: its scope is not revealed.
        const crossOrg = yield* Effect.flip(store.inheritArtifact(org, later.id, otherOrg.id))
        expect(crossOrg._tag).toBe("ScopeMismatch")
        if (crossOrg._tag === "ScopeMismatch") expect(crossOrg.actual).not.toBe("incident:INC-42")
        expect((yield* Effect.flip(store.inheritArtifact(org, later.id, "ses_missing")))._tag).toBe("ScopeMismatch")
        expect((yield* Effect.flip(store.inheritArtifact(org, "ses_missing", later.id)))._tag).toBe(
          "PersistenceFailed"
        )
        expect(yield* store.inherited(org, later.id)).toEqual([])
      }))

    it.effect("round-trips JSON exactly: unicode, control characters, nested tool calls, a 1 MB result", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const session = newSession(newOrg())
        yield* store.createSession(session)
        // Text a model or a tool can produce, including what jsonb would refuse (NUL, an unpaired surrogate).
        const tricky = "héllo 世界 😀 👩🏽‍💻 مرحبا e\u0301 \"quoted\" back\\slash tab\t nl\n nul\u0000 lone\ud800 end"
        const nested = JSON.stringify({
          query: tricky,
          filters: [{ field: "service", op: "in", values: ["api", "db", { deep: [[1, 2.5, -0.125e-7], null, true] }] }],
          "key with spaces": { "ключ": "значение" }
        })
        const assistant: TurnEntry = {
          kind: "assistant",
          text: tricky,
          toolCalls: [
            { id: "call_1", name: "search_logs", arguments: nested },
            { id: "call_2", name: "get_metrics", arguments: `{"series":["p99","p50"],"window":"15m"}` },
            { id: "call_3", name: "bad_json", arguments: `{"unterminated": [1, 2` }
          ],
          finishReason: "tool_calls"
        }
        const big = Array.from({ length: 20_000 }, (_, i) => `line ${i}: ${"x".repeat(40)} ✓ 🚀\n`).join("")
        expect(big.length).toBeGreaterThan(1_000_000)
        const results: TurnEntry = {
          kind: "tool_results",
          results: [
            { callId: "call_1", name: "search_logs", content: big, isError: false, status: "ok" },
            { callId: "call_2", name: "get_metrics", content: tricky, isError: true, status: "error" },
            { callId: "call_3", name: "bad_json", content: "not executed", isError: true, status: "not_executed" }
          ]
        }
        const user: TurnEntry = { kind: "user", text: tricky, context: `<context>\n${tricky}\n</context>` }
        const appended = [
          yield* store.appendTurn(session.id, user, 1),
          yield* store.appendTurn(session.id, assistant, 2),
          yield* store.appendTurn(session.id, results, 3)
        ]
        const stored = yield* store.turns(session.principal.orgId, session.id)
        expect(stored).toEqual(appended)
        expect(stored.map((t) => t.entry)).toEqual([user, assistant, results])
        const [, storedAssistant, storedResults] = stored
        if (storedAssistant?.entry.kind === "assistant") {
          expect(storedAssistant.entry.toolCalls[0]?.arguments).toBe(nested)
        }
        if (storedResults?.entry.kind === "tool_results") expect(storedResults.entry.results[0]?.content).toBe(big)
      }))

    it.effect("keeps the key order of stored JSON: report data, report schema, verbatim model replies", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const session = newSession(org)
        yield* store.createSession(session)
        // Orders a normalising store (jsonb) would change: longer keys first, then shorter ones.
        const data = { zeta_long_key: 1, b: [{ yy: 1, x: 2 }], confidence: "low", a: null }
        const state: SessionState = {
          ...initialState,
          lastExitReason: "completed",
          report: { exitReason: "completed", source: "model", data }
        }
        yield* store.saveState(session.id, state, 2_000)
        const read = yield* store.getSession(org, session.id)
        expect(JSON.stringify(Option.getOrThrow(read).state.report?.data)).toBe(JSON.stringify(data))

        const reportSchema = { type: "object", properties: { summary: {}, nextSteps: {}, a: {} }, required: [] }
        yield* store.putAgent(org, new AgentSpec({ ...spec("ordered", 1), reportSchema }))
        const agent = Option.getOrThrow(yield* store.getAgent(org, "ordered"))
        expect(JSON.stringify(agent.reportSchema)).toBe(JSON.stringify(reportSchema))

        const raw = { id: "chatcmpl-1", choices: [{ message: { role: "assistant", content: "hi\u0000" } }], a: 1 }
        const run = {
          ...trajectory(session, 1),
          modelCalls: [{
            provider: "p1",
            attempt: 1,
            startedAt: 1,
            durationMs: 2,
            request: { messages: 1, tools: 0 },
            reply: {
              text: "hi",
              toolCalls: [],
              finishReason: "stop" as const,
              usage: Usage.zero,
              model: "m",
              raw
            },
            usage: Usage.zero
          }]
        }
        yield* store.saveTrajectory(run)
        const [saved] = yield* store.trajectories(org, session.id)
        expect(saved).toEqual(run)
        expect(JSON.stringify(saved?.modelCalls[0]?.reply?.raw)).toBe(JSON.stringify(raw))
      }))

    it.effect("serves 50 concurrent fibers, each appending to its own session while reading others", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const sessions = Array.from({ length: 50 }, () => newSession(org))
        yield* Effect.forEach(sessions, store.createSession, { concurrency: "unbounded", discard: true })
        yield* Effect.forEach(sessions, (session, i) =>
          Effect.gen(function*() {
            for (let n = 1; n <= 5; n++) {
              const turn = yield* store.appendTurn(session.id, user(`s${i} m${n}`), n)
              expect(turn.seq).toBe(n)
              yield* store.saveState(session.id, { ...initialState, status: "running", modelCalls: n }, n)
              yield* store.turns(org, sessions[(i + 1) % 50]!.id)
            }
          }), { concurrency: "unbounded", discard: true })
        for (const [i, session] of sessions.entries()) {
          const stored = yield* store.turns(org, session.id)
          expect(stored.map((t) => t.entry.kind === "user" ? t.entry.text : "")).toEqual(
            range(1, 5).map((n) => `s${i} m${n}`)
          )
          expect(Option.getOrThrow(yield* store.getSession(org, session.id)).state.modelCalls).toBe(5)
        }
      }))

    it.effect("reads many sessions asked for at once, each for its own org only", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const [a, b] = [newOrg(), newOrg()]
        const sessions = Array.from({ length: 20 }, (_, i) => newSession(i % 2 === 0 ? a : b))
        yield* Effect.forEach(sessions, store.createSession, { discard: true })
        const reads = yield* Effect.all([
          ...sessions.map((session) => store.getSession(session.principal.orgId, session.id)),
          // The same ids asked for by the other org, and an id nobody has.
          ...sessions.map((session) => store.getSession(session.principal.orgId === a ? b : a, session.id)),
          store.getSession(a, newSession(a).id)
        ], { concurrency: "unbounded" })
        expect(reads.slice(0, 20).map((found) => Option.getOrThrow(found).id)).toEqual(sessions.map((s) => s.id))
        expect(reads.slice(20).every(Option.isNone)).toBe(true)
      }))

    it.effect("answers agent reads asked for at once, each by its own org, id and version", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const [a, b] = [newOrg(), newOrg()]
        yield* store.putAgent(a, spec("triage", 1))
        yield* store.putAgent(a, spec("triage", 2))
        yield* store.putAgent(b, spec("triage", 7))
        const found = yield* Effect.all([
          store.getAgent(a, "triage"),
          store.getAgent(a, "triage", 1),
          store.getAgent(b, "triage"),
          store.getAgent(b, "triage", 1),
          store.getAgent(a, "triage", 1.5),
          store.getAgent(a, "other")
        ], { concurrency: "unbounded" })
        expect(found.map((o) => Option.map(o, (s) => s.version))).toEqual([
          Option.some(2),
          Option.some(1),
          Option.some(7),
          Option.none(),
          Option.none(),
          Option.none()
        ])
      }))

    it.effect("stores states, trajectories and settlements given at once for many sessions, each as if alone", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const sessions = Array.from({ length: 30 }, () => newSession(org))
        const runs = sessions.map((session) => inbound(session, "run", "go"))
        yield* Effect.forEach(sessions, (session, i) => store.accept({ session, message: runs[i]! }), { discard: true })
        const ghost = newSession(org)
        const saved = sessions.map((session, i) => trajectory(session, i + 1))
        // Every session's saves at once (its later ones after its earlier ones), beside a missing session's.
        const outcomes = yield* Effect.all(
          [
            ...sessions.map((session, i) =>
              Effect.all([
                store.saveState(session.id, { ...initialState, status: "running", modelCalls: 1 }, 1),
                store.saveTrajectory({ ...saved[i]!, open: true }),
                store.settle(session.id, runs[i]!.id)
              ], { concurrency: "unbounded" }).pipe(
                Effect.zipRight(Effect.all([
                  store.saveState(session.id, { ...initialState, status: "idle", modelCalls: i + 2 }, 2),
                  store.saveTrajectory(saved[i]!)
                ], { concurrency: "unbounded" }))
              )
            ),
            store.saveState(ghost.id, initialState, 1),
            store.saveTrajectory(trajectory(ghost, 1))
          ].map((save) => Effect.either(save)),
          { concurrency: "unbounded" }
        )
        // Only the missing session's two saves failed.
        expect(outcomes.filter((o) => o._tag === "Left").length).toBe(2)
        expect(outcomes.slice(-2).map((o) => o._tag)).toEqual(["Left", "Left"])
        for (const [i, session] of sessions.entries()) {
          const state = Option.getOrThrow(yield* store.getSession(org, session.id)).state
          expect([state.status, state.modelCalls]).toEqual(["idle", i + 2])
          expect(yield* store.trajectories(org, session.id)).toEqual([saved[i]])
          expect(yield* store.inbox(session.id)).toEqual([])
        }
      }))

    it.effect("lists an org's sessions newest first, filtered by scope and status, never another org's", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const at = (session: Session, createdAt: number): Session => ({ ...session, createdAt, updatedAt: createdAt })
        const a = at(newSession(org), 1_000)
        const b = at(newSession(org, { ...initialState, status: "running" }), 3_000)
        const c = at(newSession(org, initialState, "incident:INC-7"), 2_000)
        const foreign = at(newSession(newOrg()), 4_000)
        yield* Effect.forEach([a, b, c, foreign], store.createSession, { discard: true })

        const all = yield* store.listSessions(org, { limit: 10 })
        expect(all.sessions.map((s) => s.id)).toEqual([b.id, c.id, a.id])
        expect(all.nextCursor).toBeUndefined()
        const scoped = yield* store.listSessions(org, { scope: "incident:INC-42", limit: 10 })
        expect(scoped.sessions.map((s) => s.id)).toEqual([b.id, a.id])
        const running = yield* store.listSessions(org, { status: "running", limit: 10 })
        expect(running.sessions.map((s) => s.id)).toEqual([b.id])
        // The status filter reads the saved state, not the state at creation.
        yield* store.saveState(a.id, { ...initialState, status: "running" }, 5_000)
        const nowRunning = yield* store.listSessions(org, { status: "running", scope: "incident:INC-42", limit: 10 })
        expect(nowRunning.sessions.map((s) => s.id)).toEqual([b.id, a.id])
        expect((yield* store.listSessions(newOrg(), { limit: 10 })).sessions).toEqual([])
      }))

    it.effect("pages through every session exactly once, ties on createdAt broken by id", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        // 23 sessions over 5 distinct creation times: pages must cut through runs of equal timestamps.
        const sessions = range(1, 23).map((n) => ({ ...newSession(org), createdAt: 1_000 * (n % 5) }))
        yield* Effect.forEach(sessions, store.createSession, { discard: true })
        const seen: Array<Session> = []
        let cursor: string | undefined
        for (let page = 0; page < 10; page++) {
          const result = yield* store.listSessions(org, { limit: 5, ...(cursor === undefined ? {} : { cursor }) })
          expect(result.sessions.length).toBeLessThanOrEqual(5)
          seen.push(...result.sessions)
          cursor = result.nextCursor
          if (cursor === undefined) break
        }
        expect(cursor).toBeUndefined()
        const expected = [...sessions].sort((x, y) =>
          x.createdAt !== y.createdAt ? y.createdAt - x.createdAt : x.id < y.id ? 1 : -1
        )
        expect(seen.map((s) => s.id)).toEqual(expected.map((s) => s.id))
        // A session created after the first page was read does not shift the following pages.
        const first = yield* store.listSessions(org, { limit: 5 })
        yield* store.createSession({ ...newSession(org), createdAt: 9_000 })
        const second = yield* store.listSessions(org, { limit: 5, cursor: first.nextCursor! })
        expect(second.sessions.map((s) => s.id)).toEqual(expected.slice(5, 10).map((s) => s.id))
      }))

    it.effect("accepts a session with its first message in one step; the mailbox lists and settles it", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const session = newSession(org)
        const run = inbound(session, "run", "why is checkout down?")
        expect(yield* store.accept({ session, message: run })).toEqual({ _tag: "Accepted" })
        expect(Option.isSome(yield* store.getSession(org, session.id))).toBe(true)
        const follow = inbound(session, "continue", "and the queue?")
        expect((yield* store.accept({ message: follow }))._tag).toBe("Accepted")
        expect(yield* store.inbox(session.id)).toEqual([run, follow])
        expect((yield* store.inbox()).filter((m) => m.sessionId === session.id)).toEqual([run, follow])
        yield* store.settle(session.id, run.id)
        yield* store.settle(session.id, run.id)
        expect(yield* store.inbox(session.id)).toEqual([follow])
        // A follow-up for a session that does not exist (or is another org's) is refused, and nothing is stored.
        const stray = inbound(
          { ...newSession(org), principal: new Principal({ orgId: newOrg(), userId: "u" }) },
          "continue",
          "x"
        )
        expect((yield* Effect.flip(store.accept({ message: stray })))._tag).toBe("PersistenceFailed")
        const foreign = { ...inbound(session, "continue", "x"), orgId: newOrg() }
        expect((yield* Effect.flip(store.accept({ message: foreign })))._tag).toBe("PersistenceFailed")
        expect(yield* store.inbox(session.id)).toEqual([follow])
      }))

    it.effect("a start is all or nothing: a taken session id, or a message of another session, stores nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const session = newSession(org)
        const first = inbound(session, "run", "first")
        yield* store.accept({ session, message: first })
        // The same id again (a second start for it): refused, and its message is not stored.
        const again = inbound(session, "run", "again")
        expect((yield* Effect.flip(store.accept({ session, message: again })))._tag).toBe("PersistenceFailed")
        expect(yield* store.inbox(session.id)).toEqual([first])
        // A start whose message names another session, or another org: refused, no session created.
        const other = newSession(org)
        const misaddressed = inbound(session, "run", "misaddressed")
        expect((yield* Effect.flip(store.accept({ session: other, message: misaddressed })))._tag)
          .toBe("PersistenceFailed")
        const foreign = { ...inbound(other, "run", "foreign"), orgId: newOrg() }
        expect((yield* Effect.flip(store.accept({ session: other, message: foreign })))._tag).toBe("PersistenceFailed")
        expect(Option.isNone(yield* store.getSession(org, other.id))).toBe(true)
        expect(yield* store.inbox(session.id)).toEqual([first])
        expect(yield* store.inbox(other.id)).toEqual([])
      }))

    it.effect("an idempotency key is taken once per org: a second accept stores nothing and returns the first", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const a = newSession(org)
        const b = newSession(org)
        const record = (session: Session) => ({
          orgId: org,
          key: "retry-me",
          fingerprint: "f1",
          sessionId: session.id,
          answer: view(session),
          createdAt: 5
        })
        const outcomes = yield* Effect.all([
          store.accept({ session: a, message: inbound(a, "run", "a"), idempotency: record(a) }),
          store.accept({ session: b, message: inbound(b, "run", "b"), idempotency: record(b) })
        ], { concurrency: 2 })
        const winner = outcomes[0]._tag === "Accepted" ? a : b
        const loser = winner === a ? b : a
        expect(outcomes.map((o) => o._tag).sort()).toEqual(["Accepted", "Duplicate"])
        const duplicate = outcomes.find((o) => o._tag === "Duplicate")
        expect(duplicate?._tag === "Duplicate" && duplicate.first).toEqual(record(winner))
        // The loser's session and message were not stored (all or nothing).
        expect(Option.isNone(yield* store.getSession(org, loser.id))).toBe(true)
        expect(yield* store.inbox(loser.id)).toEqual([])
        expect(yield* store.findIdempotency(org, "retry-me")).toEqual(Option.some(record(winner)))
        // Keys are per org.
        expect(yield* store.findIdempotency(newOrg(), "retry-me")).toEqual(Option.none())
      }))

    it.effect("a follow-up with a key: taken once; refused for a session that is not there, key left free", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const session = newSession(org)
        yield* store.accept({ session, message: inbound(session, "run", "first") })
        const keyed = (sessionId: string) => ({
          orgId: org,
          key: "follow-once",
          fingerprint: "f2",
          sessionId,
          answer: view(session),
          createdAt: 7
        })
        const ghost = newSession(org)
        const refused = yield* Effect.flip(
          store.accept({ message: inbound(ghost, "continue", "lost?"), idempotency: keyed(ghost.id) })
        )
        expect(refused._tag).toBe("PersistenceFailed")
        expect(yield* store.findIdempotency(org, "follow-once")).toEqual(Option.none())
        const follow = inbound(session, "continue", "and the queue?")
        expect(yield* store.accept({ message: follow, idempotency: keyed(session.id) })).toEqual({ _tag: "Accepted" })
        const again = yield* store.accept({
          message: inbound(session, "continue", "and the queue?"),
          idempotency: keyed(session.id)
        })
        expect(again).toEqual({ _tag: "Duplicate", first: keyed(session.id) })
        expect((yield* store.inbox(session.id)).map((m) => m.text)).toEqual(["first", "and the queue?"])
      }))

    it.effect("saving a trajectory again with its run id replaces it (an open trajectory, then the closed one)", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const org = newOrg()
        const session = newSession(org)
        yield* store.createSession(session)
        const t = trajectory(session, 1)
        yield* store.saveTrajectory({ ...t, open: true })
        yield* store.saveTrajectory(t)
        expect(yield* store.trajectories(org, session.id)).toEqual([t])
      }))

    it.effect("refuses a cursor it did not produce with PersistenceFailed", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const error = yield* Effect.flip(store.listSessions(newOrg(), { limit: 5, cursor: "not a cursor!" }))
        expect(error._tag).toBe("PersistenceFailed")
      }))
  })

let messages = 0
const inbound = (session: Session, kind: "run" | "continue", text: string): InboxMessage => ({
  id: `msg_${uid()}`,
  sessionId: session.id,
  orgId: session.principal.orgId,
  kind,
  text,
  acceptedAt: 1_000 + ++messages
})

const range = (from: number, to: number): Array<number> => Array.from({ length: to - from + 1 }, (_, i) => from + i)
