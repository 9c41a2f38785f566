/**
 * Cross-node events without a later event (issue 46): a turn stored on one node whose notification never left it
 * (the node exited with it still queued) reaches a follower on another node anyway, caught up from the store by the
 * follower's node's high-water check, and so does the landing it waits for. Two relays in one process on one fresh
 * Postgres database stand for the two nodes; the lost notification is a turn written to the store and never
 * published. Postgres only; skipped without CORRAL_TEST_DATABASE_URL. Real time: the check runs on a real timer
 * (1 s), and every wait is bounded.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import * as ClusterEvents from "../../src/cluster/ClusterEvents.js"
import { initialState } from "../../src/domain/Session.js"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import * as Migrations from "../../src/store/Migrations.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import { freshDatabase, skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { trajectory } from "../store/SessionStoreContract.js"
import { newOrg, newSession, user } from "../store/StoreFixtures.js"

const url = testDatabaseUrl ?? "postgres://unused"

/** The next events of `subscription` until one matches, within `millis`. */
const until = (
  next: Effect.Effect<ReadonlyArray<SessionEvent>, unknown>,
  match: (event: SessionEvent) => boolean,
  millis: number
) =>
  Effect.gen(function*() {
    const seen: Array<SessionEvent> = []
    while (!seen.some(match)) seen.push(...(yield* next))
    return seen
  }).pipe(Effect.timeoutFail({ duration: millis, onTimeout: () => new Error(`no matching event within ${millis} ms`) }))

describe.skipIf(testDatabaseUrl === undefined)(
  `cluster events: the high-water check${testDatabaseUrl === undefined ? ` (${skipReason})` : ""}`,
  () => {
    it.live(
      "a follower on another node gets a turn whose notification was lost, and then the landing, from the store",
      () =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const pg = yield* PgClient.PgClient
          const relay = (node: string) =>
            Effect.flatMap(LiveEvents.make, (local) => ClusterEvents.relay({ local, pg, store, node }))
          const owner = yield* relay("owner")
          const follower = yield* relay("follower")
          const session = newSession(newOrg(), { ...initialState, status: "running" })
          yield* store.createSession(session)
          const org = session.principal.orgId
          const first = yield* store.appendTurn(session.id, user("why?"), 1)
          yield* owner.publish({ _tag: "turn", sessionId: session.id, seq: first.seq, turn: first })
          const subscription = yield* follower.open(org, session.id, 0, { landings: true })
          const replayed = yield* until(subscription.next, (e) => e._tag === "turn" && e.seq === 1, 5_000)
          expect(replayed.map((e) => e._tag)).toEqual(["turn"])
          // Stored and published live on the owner (the follower hears it), then one stored whose notification is
          // lost: the owner exits before sending it.
          const second = yield* store.appendTurn(session.id, user("still there?"), 2)
          yield* owner.publish({ _tag: "turn", sessionId: session.id, seq: second.seq, turn: second })
          yield* until(subscription.next, (e) => e._tag === "turn" && e.seq === 2, 5_000)
          yield* store.appendTurn(
            session.id,
            { kind: "assistant", text: "yes", toolCalls: [], finishReason: "stop" },
            3
          )
          const caught = yield* until(subscription.next, (e) => e._tag === "turn" && e.seq === 3, 5_000)
          expect(caught.filter((e) => e._tag === "turn").map((e) => e.seq)).toEqual([3])
          // The burst lands, and its exit and report are lost the same way: the follower gets them from the store.
          yield* store.saveTrajectory({ ...trajectory(session, 1), turns: { from: 1, to: 3 } })
          yield* store.saveState(session.id, initialState, 4)
          const landing = yield* until(subscription.next, (e) => e._tag === "exit", 5_000)
          expect(landing.filter((e) => e._tag === "exit").map((e) => e.seq)).toEqual([3])
        }).pipe(Effect.scoped, Effect.provide(SqlStore.layer().pipe(Layer.provideMerge(freshDatabase(url))))),
      30_000
    )

    it.live(
      "a node's store notifies each turn in the transaction that stores it: at the commit, never for a rollback",
      () =>
        Effect.gen(function*() {
          const pg = yield* PgClient.PgClient
          const sql = yield* SqlClient.SqlClient
          yield* Migrations.run
          const store = yield* SqlStore.make({
            notify: { channel: ClusterEvents.channel, payloads: ClusterEvents.stored("owner") }
          })
          const heard: Array<string> = []
          yield* Effect.forkScoped(
            Stream.runForEach(pg.listen(ClusterEvents.channel), (text) => Effect.sync(() => void heard.push(text)))
          )
          // Listening once a probe comes back.
          for (let i = 0; !heard.includes("probe"); i++) {
            if (i > 200) return yield* Effect.dieMessage("the LISTEN never heard the probe")
            yield* sql`SELECT pg_notify(${ClusterEvents.channel}, 'probe')`
            yield* Effect.sleep("50 millis")
          }
          const session = newSession(newOrg())
          yield* store.createSession(session)
          yield* sql.withTransaction(Effect.zipRight(
            store.appendTurn(session.id, user("rolled back"), 1),
            Effect.fail("rollback" as const)
          )).pipe(Effect.ignore)
          const kept = yield* store.appendTurn(session.id, user("kept"), 2)
          let turns: Array<unknown> = []
          for (let i = 0; turns.length === 0; i++) {
            if (i > 200) return yield* Effect.dieMessage("no turn was notified")
            yield* Effect.sleep("50 millis")
            turns = heard.filter((text) => text !== "probe").map((text) => JSON.parse(text))
          }
          // Notifications arrive in commit order: had the rolled-back turn been notified, it would come first.
          expect(turns[0]).toEqual({ node: "owner", stored: kept })
        }).pipe(Effect.scoped, Effect.provide(freshDatabase(url))),
      30_000
    )
  }
)
