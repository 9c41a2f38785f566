/**
 * What only a SQL driver can be asked: the database's own guarantees (foreign keys, atomic statements,
 * transactions), the Migrator, and concurrency through the real connection pool. Run against the embedded PGlite
 * and, when configured, Postgres; the layer provides the store AND the `SqlClient` it runs on.
 */
import { SqlClient } from "@effect/sql"
import { expect, layer } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import type { Layer } from "effect"
import type { Session } from "../../src/domain/Session.js"
import { initialState } from "../../src/domain/Session.js"
import { sqlState } from "../../src/store/internal/failure.js"
import * as Migrations from "../../src/store/Migrations.js"
import { backfill } from "../../src/store/migrations/0006_pairing.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import { closingOf, trajectory, withCalls } from "./SessionStoreContract.js"
import { newOrg, newSession } from "./StoreFixtures.js"

class Rollback {
  readonly _tag = "Rollback"
}

/** Registers the SQL-driver suite for one database. */
export const sqlDriverSuite = (name: string, driver: Layer.Layer<SessionStore | SqlClient.SqlClient, unknown>): void =>
  layer(driver, { excludeTestServices: true })(`SqlStore on ${name}`, (it) => {
    it.effect("applies no migration twice: a second run, and two concurrent runs, apply nothing", () =>
      Effect.gen(function*() {
        // The layer already migrated this database.
        expect(yield* Migrations.run).toEqual([])
        expect(yield* Effect.all([Migrations.run, Migrations.run], { concurrency: 2 })).toEqual([[], []])
        const sql = yield* SqlClient.SqlClient
        const applied = yield* sql<{ migration_id: number; name: string }>`
          SELECT migration_id, name FROM ${sql(Migrations.table)} ORDER BY migration_id`
        expect(applied.map((row) => [row.migration_id, row.name])).toEqual([
          [1, "init"],
          [2, "approvals"],
          [
            3,
            "append_function"
          ],
          [4, "inbox"],
          [5, "mcp_credentials"],
          [6, "pairing"],
          [7, "org_spend"]
        ])
      }))

    it.effect("refuses a cross-scope or cross-org artifact row in the database itself", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const sql = yield* SqlClient.SqlClient
        const org = newOrg()
        const later = newSession(org)
        const sameScope = newSession(org)
        const otherScope = newSession(org, initialState, "incident:INC-7")
        const otherOrg = newSession(newOrg())
        yield* Effect.forEach([later, sameScope, otherScope, otherOrg], store.createSession, { discard: true })

        // Raw INSERTs, bypassing the store: only the composite foreign keys stand in the way.
        const insert = (inherited: Session, scope: string, orgId: string) =>
          sql`INSERT INTO session_artifacts (session_id, org_id, scope, inherited_session_id)
            VALUES (${later.id}, ${orgId}, ${scope}, ${inherited.id})`.pipe(Effect.either)
        const lie = yield* insert(otherScope, "incident:INC-42", org)
        const lieAboutScope = yield* insert(otherScope, "incident:INC-7", org)
        const crossOrg = yield* insert(otherOrg, "incident:INC-42", org)
        for (const refused of [lie, lieAboutScope, crossOrg]) {
          expect(Either.isLeft(refused)).toBe(true)
          if (Either.isLeft(refused)) expect(sqlState(refused.left)).toBe("23503")
        }
        expect(Either.isRight(yield* insert(sameScope, "incident:INC-42", org))).toBe(true)
        expect(yield* store.inherited(org, later.id)).toEqual([sameScope.id])
      }))

    it.effect("keeps 50 concurrent fibers' appends and transactions apart, rolling back what failed", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const sql = yield* SqlClient.SqlClient
        const org = newOrg()
        const sessions = Array.from({ length: 50 }, () => newSession(org))
        yield* Effect.forEach(sessions, store.createSession, { discard: true })

        const fiber = (session: Session, i: number) => {
          const text = (n: number) => `f${i} m${n}`
          switch (i % 3) {
            case 0: // plain appends through group commit
              return Effect.forEach(
                [1, 2, 3, 4],
                (n) => store.appendTurn(session.id, { kind: "user", text: text(n) }, n)
              )
            case 1: // a committed transaction: a document and two turns, together
              return sql.withTransaction(Effect.gen(function*() {
                yield* sql`INSERT INTO documents (org_id, id, source, title, body, updated_at)
                  VALUES (${org}, ${`doc_${i}`}, 'runbooks', ${`Runbook ${i}`}, 'restart the pod', 1)`
                yield* store.appendTurn(session.id, { kind: "user", text: text(1) }, 1)
                yield* store.appendTurn(session.id, { kind: "user", text: text(2) }, 2)
              }))
            default: // a transaction that fails after writing: none of it may remain
              return sql.withTransaction(Effect.gen(function*() {
                yield* sql`INSERT INTO documents (org_id, id, source, title, body, updated_at)
                  VALUES (${org}, ${`doc_${i}`}, 'runbooks', 'doomed', 'never visible', 1)`
                yield* store.appendTurn(session.id, { kind: "user", text: "rolled back" }, 1)
                return yield* Effect.fail(new Rollback())
              })).pipe(Effect.catchTag("Rollback", () => Effect.void))
          }
        }
        yield* Effect.forEach(sessions, fiber, { concurrency: "unbounded", discard: true })

        for (const [i, session] of sessions.entries()) {
          const texts = (yield* store.turns(org, session.id)).map((t) => t.entry.kind === "user" ? t.entry.text : "")
          const expected = i % 3 === 0 ? [1, 2, 3, 4] : i % 3 === 1 ? [1, 2] : []
          expect(texts).toEqual(expected.map((n) => `f${i} m${n}`))
        }
        const docs = yield* sql<{ id: string }>`SELECT id FROM documents WHERE org_id = ${org} ORDER BY id`
        expect(docs.map((d) => d.id).sort()).toEqual(
          sessions.flatMap((_, i) => i % 3 === 1 ? [`doc_${i}`] : []).sort()
        )
        // The rolled-back append gave its number back: the next one is 1.
        const after = yield* store.appendTurn(sessions[2]!.id, { kind: "user", text: "after" }, 9)
        expect(after.seq).toBe(1)
      }))

    it.effect("keeps the later of two saves given together, and rolls a save back with a failed transaction", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const sql = yield* SqlClient.SqlClient
        const org = newOrg()
        const session = newSession(org)
        yield* store.createSession(session)
        const run = trajectory(session, 1)
        const stateOf = Effect.map(store.getSession(org, session.id), (found) => {
          const state = Option.getOrThrow(found).state
          return [state.status, state.modelCalls]
        })
        // Given in one tick, they travel in one statement, in the order given.
        yield* Effect.all([
          store.saveState(session.id, { ...initialState, status: "running", modelCalls: 1 }, 1),
          store.saveTrajectory({ ...run, open: true }),
          store.saveState(session.id, { ...initialState, status: "idle", modelCalls: 2 }, 2),
          store.saveTrajectory(run)
        ], { concurrency: "unbounded" })
        expect(yield* stateOf).toEqual(["idle", 2])
        expect(yield* store.trajectories(org, session.id)).toEqual([run])
        yield* sql.withTransaction(
          Effect.zipRight(
            store.saveState(session.id, { ...initialState, status: "running", modelCalls: 3 }, 3),
            Effect.fail(new Rollback())
          )
        ).pipe(Effect.catchTag("Rollback", () => Effect.void))
        expect(yield* stateOf).toEqual(["idle", 2])
      }))

    it.effect("closes calls another writer left open, as another node's store would find them", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const other = yield* SqlStore.make()
        const session = newSession(newOrg())
        yield* store.createSession(session)
        yield* store.appendTurn(session.id, withCalls("c1", "c2"), 1)
        const next = yield* other.appendTurn(session.id, { kind: "user", text: "follow-up" }, 2)
        expect(next.closed).toEqual({ sessionId: session.id, seq: 2, at: 2, entry: closingOf("c1", "c2") })
        expect((yield* store.turns(session.principal.orgId, session.id)).map((t) => [t.seq, t.entry.kind]))
          .toEqual([[1, "assistant"], [2, "tool_results"], [3, "user"]])
      }).pipe(Effect.scoped))

    it.effect("backfills the open calls a previous version stored, with the store's own closing text", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const sql = yield* SqlClient.SqlClient
        const open = newSession(newOrg())
        const paired = newSession(newOrg())
        yield* Effect.forEach([open, paired], store.createSession, { discard: true })
        yield* store.appendTurn(open.id, withCalls("c1", "c2"), 1)
        yield* store.appendTurn(paired.id, withCalls("c1"), 1)
        yield* store.appendTurn(paired.id, closingOf("c1"), 2)
        // As the previous version's append function left them: no closing recorded.
        yield* sql`UPDATE session_counters SET closing = NULL WHERE session_id IN (${open.id}, ${paired.id})`
        yield* backfill
        const next = yield* store.appendTurn(open.id, { kind: "user", text: "next" }, 3)
        expect(next.closed?.entry).toEqual(closingOf("c1", "c2"))
        expect((yield* store.appendTurn(paired.id, { kind: "user", text: "next" }, 3)).closed).toBeUndefined()
      }))

    it.effect("finds documents by full-text search on the tsvector column", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const org = newOrg()
        yield* sql`INSERT INTO documents (org_id, id, source, title, body, updated_at) VALUES
          (${org}, 'a', 'runbooks', 'Disk full', 'the disks were filling up quickly', 1),
          (${org}, 'b', 'runbooks', 'Certificates', 'renew the TLS certificate', 1)`
        const hits = yield* sql<{ id: string }>`SELECT id FROM documents
          WHERE org_id = ${org} AND search @@ websearch_to_tsquery('english', 'disk filling')`
        expect(hits.map((h) => h.id)).toEqual(["a"])
      }))

    it.effect("stores a turn as one row or not at all, and reports the store's state without SqlError", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const sql = yield* SqlClient.SqlClient
        const session = newSession(newOrg())
        yield* store.createSession(session)
        yield* store.appendTurn(session.id, { kind: "user", text: "one" }, 1)
        const rows = yield* sql<{ seq: number; kind: string }>`SELECT seq, kind FROM turns
          WHERE session_id = ${session.id}`
        expect(rows).toEqual([{ seq: 1, kind: "user" }])
        const missing = yield* Effect.flip(store.appendTurn("ses_nope", { kind: "user", text: "x" }, 1))
        expect(missing._tag).toBe("PersistenceFailed")
        expect(Option.isNone(yield* store.getSession(session.principal.orgId, "ses_nope"))).toBe(true)
      }))
  })
