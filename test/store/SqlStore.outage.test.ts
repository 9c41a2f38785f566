/**
 * The SQL store through a real network fault: a `TcpProxy` between the store's pool and Postgres partitions
 * (blackhole), resets, or resets and refuses the connections. Every store method must fail with `PersistenceFailed`
 * within the persistence timeout (1 s here) plus a margin, nothing may be half-written or duplicated, and once the
 * proxy passes again the same store (no restart) must work at once: the connections that timed out were discarded,
 * not handed to the next caller.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Either, Layer, Option } from "effect"
import type { ApprovalRecord } from "../../src/domain/Approval.js"
import type { PersistenceFailed } from "../../src/domain/Errors.js"
import type { Session } from "../../src/domain/Session.js"
import * as Readiness from "../../src/server/Readiness.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import * as TcpProxy from "../support/TcpProxy.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "./PostgresFixture.js"
import { spec, trajectory } from "./SessionStoreContract.js"
import { newOrg, newSession, uid, user } from "./StoreFixtures.js"

const url = testDatabaseUrl ?? "postgres://unused"
const TIMEOUT_MS = 1_000
/** Generous: a loaded CI machine, and the pool's own connect bound (also 1 s here) on top of the statement's. */
const BOUND_MS = TIMEOUT_MS + 2_000

type Store = Context.Tag.Service<SessionStore>

/** One call of every store method, on `session` (which exists) and a fresh `ghost` session. */
const everyMethod = (store: Store, session: Session, ghost: Session, label: string) => {
  const org = session.principal.orgId
  const approval: ApprovalRecord = {
    tokenHash: `${uid()}`,
    orgId: org,
    userId: session.principal.userId,
    sessionId: session.id,
    callId: "c1",
    turnSeq: 2,
    tool: "restart_pod",
    argsHash: "a".repeat(64),
    createdAt: 1_000,
    expiresAt: 10_000
  }
  const calls: Record<keyof Store, Effect.Effect<unknown, PersistenceFailed | { readonly _tag: string }>> = {
    putAgent: store.putAgent(org, spec(`agent-${label}`, 1)),
    getAgent: store.getAgent(org, "agent-before"),
    listAgents: store.listAgents(org),
    createSession: store.createSession(ghost),
    getSession: store.getSession(org, session.id),
    listSessions: store.listSessions(org, { limit: 10 }),
    saveState: store.saveState(session.id, { ...session.state, status: "running" }, 2_000),
    listRunning: store.listRunning(),
    appendTurn: store.appendTurn(session.id, user(`during-${label}`), 2_000, TIMEOUT_MS),
    turns: store.turns(org, session.id),
    inheritArtifact: store.inheritArtifact(org, session.id, ghost.id),
    inherited: store.inherited(org, session.id),
    issueApprovals: store.issueApprovals(session.id, [approval]),
    findApproval: store.findApproval(org, session.id, approval.tokenHash),
    spendApproval: store.spendApproval(approval.tokenHash, 2_000),
    countPendingApprovals: store.countPendingApprovals?.(5_000, 100) ?? Effect.dieMessage("no countPendingApprovals"),
    saveTrajectory: store.saveTrajectory(trajectory(session, 1)),
    trajectories: store.trajectories(org, session.id),
    usage: store.usage(org, 0, 10_000),
    holdSpend: store.holdSpend(org, "2026-01-01", 1_000, 10, 2_000),
    settleSpend: store.settleSpend(org, "2026-01-01", 10, 5),
    daySpend: store.daySpend(org, "2026-01-01"),
    accept: store.accept({
      message: {
        id: `msg_${uid()}`,
        sessionId: session.id,
        orgId: org,
        kind: "continue",
        text: `during-${label}`,
        acceptedAt: 2_000
      }
    }),
    findIdempotency: store.findIdempotency(org, `key-${label}`),
    inbox: store.inbox(session.id),
    settle: store.settle(session.id, "msg_none")
  }
  return calls
}

/** Runs every call at once; each one's outcome and how long it took (real time). */
const timed = (calls: Record<string, Effect.Effect<unknown, unknown>>) =>
  Effect.forEach(
    Object.entries(calls),
    ([name, call]) =>
      Effect.map(
        Effect.timed(Effect.either(call)),
        ([took, outcome]) => ({ name, ms: Duration.toMillis(took), outcome })
      ),
    { concurrency: "unbounded" }
  )

describe.skipIf(testDatabaseUrl === undefined)(
  `Postgres store through a faulty network (${testDatabaseUrl === undefined ? skipReason : "TcpProxy"})`,
  () => {
    it.live(
      "partition, reset and outage: every method fails within the timeout, nothing is half-written, and the same " +
        "store works again once the network does",
      () =>
        Effect.gen(function*() {
          const target = new URL(url)
          const proxy = yield* TcpProxy.make({ host: target.hostname, port: Number(target.port || 5432) })
          const context = yield* Layer.build(
            Layer.merge(SqlStore.layer({ timeoutMs: TIMEOUT_MS }), Readiness.layerSql).pipe(
              Layer.provideMerge(freshDatabase(url, { timeoutMs: TIMEOUT_MS, maxConnections: 4 }, proxy.url))
            )
          )
          const store = Context.get(context, SessionStore)
          const readiness = Context.get(context, Readiness.Readiness)
          const session = newSession(newOrg())
          const org = session.principal.orgId
          yield* store.createSession(session)
          yield* store.putAgent(org, spec("agent-before", 1))
          const ghosts: Array<Session> = []

          for (const fault of ["blackhole", "reset", "outage"] as const) {
            yield* store.appendTurn(session.id, user(`before-${fault}`), 1_000, TIMEOUT_MS)
            // Warm the pool: the fault must meet pooled connections, not only new ones.
            yield* Effect.all([store.listRunning(), store.turns(org, session.id), store.listAgents(org)], {
              concurrency: "unbounded"
            })

            if (fault === "outage") {
              // A database that went down: open connections reset, then the port refuses.
              yield* proxy.set("reset")
              yield* proxy.set("refuse")
            } else yield* proxy.set(fault)

            const ghost = newSession(org)
            ghosts.push(ghost)
            const outcomes = yield* timed(everyMethod(store, session, ghost, fault))
            for (const { ms, name, outcome } of outcomes) {
              expect(Either.isLeft(outcome), `${fault}: ${name} failed`).toBe(true)
              if (Either.isLeft(outcome)) {
                expect((outcome.left as { _tag: string })._tag, `${fault}: ${name}`).toBe("PersistenceFailed")
              }
              expect(ms, `${fault}: ${name} answered within ${BOUND_MS} ms`).toBeLessThan(BOUND_MS)
            }
            if (fault === "blackhole") {
              // Every call waited for the deadline (nothing told it the network was gone).
              expect(Math.min(...outcomes.map((o) => o.ms))).toBeGreaterThanOrEqual(TIMEOUT_MS - 50)
            }
            // The readiness probe answers within its own 2 s bound, and says the database is unreachable.
            const [probeTook, probe] = yield* Effect.timed(Effect.either(readiness.check))
            expect(Either.isLeft(probe)).toBe(true)
            expect(Duration.toMillis(probeTook)).toBeLessThan(2_000 + 800)

            // Healed, but the connections the partition held are gone for good (as after a failover): the very next
            // calls work, on the same store, only because the connections that timed out were discarded.
            yield* proxy.set("pass", { strand: true })
            const after = yield* store.appendTurn(session.id, user(`after-${fault}`), 3_000, TIMEOUT_MS)
            expect(after.seq).toBeGreaterThan(0)
            expect(Option.isSome(yield* store.getSession(org, session.id))).toBe(true)
            expect(Either.isRight(yield* Effect.either(readiness.check))).toBe(true)
          }

          // Nothing half-written or duplicated: gap-free sequence, every acknowledged turn once, a failed one at most
          // once; each ghost session exists at most once, with its turn counter (an append to it works or is refused
          // as "no session", never half).
          const turns = yield* store.turns(org, session.id)
          expect(turns.map((t) => t.seq)).toEqual(turns.map((_, i) => i + 1))
          const texts = turns.map((t) => t.entry.kind === "user" ? t.entry.text : "")
          for (const fault of ["blackhole", "reset", "outage"]) {
            expect(texts.filter((t) => t === `before-${fault}`)).toHaveLength(1)
            expect(texts.filter((t) => t === `after-${fault}`)).toHaveLength(1)
            expect(texts.filter((t) => t === `during-${fault}`).length).toBeLessThanOrEqual(1)
          }
          const sql = Context.get(context, SqlClient.SqlClient)
          for (const ghost of ghosts) {
            const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM sessions WHERE id = ${ghost.id}`
            const counters = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM session_counters
              WHERE session_id = ${ghost.id}`
            expect(rows[0]?.n).toBe(counters[0]?.n)
            expect(rows[0]?.n ?? 0).toBeLessThanOrEqual(1)
          }
        }).pipe(Effect.scoped),
      60_000
    )

    it.live(
      "the readiness probe answers within its 2 s bound during a partition, on a pooled connection too",
      () =>
        Effect.gen(function*() {
          const target = new URL(url)
          const proxy = yield* TcpProxy.make({ host: target.hostname, port: Number(target.port || 5432) })
          // Production timeouts (10 s statements, 5 s connects): longer than the probe's own bound.
          const context = yield* Layer.build(
            // The store migrates the schema the probe checks.
            Layer.merge(SqlStore.layer(), Readiness.layerSql).pipe(
              Layer.provideMerge(freshDatabase(url, { maxConnections: 2 }, proxy.url))
            )
          )
          const readiness = Context.get(context, Readiness.Readiness)
          expect(Either.isRight(yield* Effect.either(readiness.check))).toBe(true)
          // The pool now holds an idle connection: the next probe's statement goes out on it and is never answered.
          yield* proxy.set("blackhole")
          const [took, probe] = yield* Effect.timed(Effect.either(readiness.check))
          expect(probe).toEqual(Either.left({ database: "unreachable: timed out after 2 s" }))
          expect(Duration.toMillis(took)).toBeLessThan(2_000 + 800)
          yield* proxy.set("reset")
          yield* proxy.set("pass")
        }).pipe(Effect.scoped),
      30_000
    )
  }
)
