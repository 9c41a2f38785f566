/**
 * The cluster sweep (cluster/Sweep) on two `corral serve --cluster` processes: sessions that no message will ever
 * wake are woken by the runner that owns them.
 *
 * Two faults put sessions out of the cluster's reach, both made real in the cluster's own message table: a message
 * whose prompt says `[lost]` is refused by a trigger the test installs (the cluster's storage failed between the
 * acknowledgement and the hand-over: the 202 was given, the message waits in the session's inbox, the cluster holds
 * nothing to deliver), and the messages of the `[settled]` bursts are marked processed once their bursts run (the
 * cluster holds them as answered, so it will never deliver them again). Node B is SIGKILLed while `[settled]` bursts
 * run on it, and nothing is sent to its sessions afterwards: read through node A, each must stop reading `running` (it reads
 * `interrupted`) and each `[lost]` prompt must run — exactly once — within a bound of a few sweep periods; then a
 * follow-up completes on every session. Postgres only; skipped without CORRAL_TEST_DATABASE_URL.
 */
import type { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Scope } from "effect"
import { randomUUID } from "node:crypto"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { eventually } from "../support/ServerHarness.js"
import {
  awaitShards,
  expectExactlyOnce,
  followUp,
  isUser,
  json,
  liveActors,
  post,
  stop,
  turnsOf,
  withCluster
} from "./support.js"
import type { Node } from "./support.js"

/** Short locks: node B's shards move within seconds, and the sweep runs as often as a lock lives. */
const LOCK_EXPIRATION_MS = 3_000
const env = { CORRAL_DEMO_DELAY_MS: "500", CORRAL_CLUSTER_LOCK_EXPIRATION_MS: String(LOCK_EXPIRATION_MS) }

/** The cluster's storage refuses every message that says `[lost]` (in its table, created by the first node). */
const refuseLost = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    yield* sql.unsafe(`CREATE FUNCTION corral_test_refuse() RETURNS trigger AS $$
      BEGIN
        IF NEW.payload LIKE '%[lost]%' THEN RAISE EXCEPTION 'the test refuses this message'; END IF;
        RETURN NEW;
      END $$ LANGUAGE plpgsql`)
    yield* sql.unsafe(`CREATE TRIGGER corral_test_refuse BEFORE INSERT ON cluster_messages
      FOR EACH ROW EXECUTE FUNCTION corral_test_refuse()`)
  })

const begin = (via: Node, marker: string, i: number) =>
  Effect.gen(function*() {
    const prompt = `Why is service ${i} failing? ${marker} (${randomUUID()})`
    const started = yield* post(`${via.url}/v1/sessions`, { agentId: "demo", scope: `svc:${i}`, prompt })
    expect(started.status, started.text).toBe(202)
    return { sessionId: JSON.parse(started.text).sessionId as string, prompt }
  })

const scenario = ({ sql, start }: {
  readonly sql: SqlClient.SqlClient
  readonly start: () => Effect.Effect<Node, never, Scope.Scope>
}) =>
  Effect.gen(function*() {
    const a = yield* start()
    const b = yield* start()
    yield* awaitShards(sql, 2, "30 seconds")
    yield* refuseLost(sql)

    const settled = yield* Effect.forEach(Array.from({ length: 8 }, (_, i) => i), (i) =>
      begin(i % 2 === 0 ? a : b, "[settled]", i), { concurrency: 4 })
    yield* eventually(
      "every burst to start",
      Effect.map(
        Effect.forEach(settled, ({ sessionId }) =>
          turnsOf(a.url, sessionId)),
        (all) =>
          all.every((turns) => turns.length >= 1) ? true : undefined
      ),
      "30 seconds"
    )
    expect(yield* liveActors(b.url)).toBeGreaterThan(0)
    // The cluster holds the running bursts' messages as answered: it will not deliver them again.
    const marked = yield* sql`UPDATE cluster_messages SET processed = true WHERE payload LIKE '%[settled]%'`.raw
    expect((marked as { rowCount: number }).rowCount).toBe(settled.length)
    // Acknowledged, but the cluster never got them.
    const lost = yield* Effect.forEach(
      Array.from({ length: 4 }, (_, i) => i),
      (i) => begin(i % 2 === 0 ? a : b, "[lost]", 100 + i),
      { concurrency: 4 }
    )
    yield* stop(b, "SIGKILL")

    // Nothing is sent to any session: node A's sweep wakes what node B left behind, and what never reached anyone.
    const views = yield* eventually(
      "every session to settle and every lost prompt to run",
      Effect.gen(function*() {
        const settledViews = yield* Effect.forEach(
          settled,
          ({ sessionId }) => json(`${a.url}/v1/sessions/${sessionId}`)
        )
        const lostRuns = yield* Effect.forEach(lost, ({ prompt, sessionId }) =>
          Effect.zipWith(
            json(`${a.url}/v1/sessions/${sessionId}`),
            turnsOf(a.url, sessionId),
            (view, turns) => view.status === "idle" && turns.some((t) => isUser(t, prompt))
          ))
        return settledViews.every((v) => v.status === "idle" || v.status === "interrupted") && lostRuns.every(Boolean)
          ? settledViews
          : undefined
      }),
      // Node B's shards move within ~2 lock lives, then a sweep period, a message's grace and the burst itself.
      "45 seconds"
    )
    // Node B died in some bursts; only the sweep could have recovered them (the cluster holds them as answered).
    expect(views.filter((v) => v.status === "interrupted").length).toBeGreaterThan(0)

    // A follow-up completes on every session, and every acknowledged message ran exactly once.
    const all = [...settled, ...lost]
    const followUps = new Map(all.map(({ sessionId }) => [sessionId, `And its database? (${randomUUID()})`]))
    yield* Effect.forEach(all, ({ sessionId }) => followUp(a.url, sessionId, followUps.get(sessionId)!), {
      concurrency: 4
    })
    const landed = yield* eventually(
      "every follow-up to land",
      Effect.map(
        Effect.forEach(
          all,
          ({ sessionId }) => Effect.zip(json(`${a.url}/v1/sessions/${sessionId}`), turnsOf(a.url, sessionId))
        ),
        (sessions) =>
          sessions.every(([view, turns]) =>
              view.status === "idle" && view.exitReason === "completed" &&
              turns.some((t) => isUser(t, followUps.get(view.id)))
            )
            ? sessions
            : undefined
      ),
      "30 seconds"
    )
    for (const [index, [view, turns]] of landed.entries()) {
      expectExactlyOnce(turns, [all[index]!.prompt, followUps.get(view.id)!])
    }
  })

describe("the cluster sweep", () => {
  it.live.skipIf(testDatabaseUrl === undefined)(
    `sessions no message will wake (a dead node's, an acknowledged message the cluster never stored) are woken by their owner${
      testDatabaseUrl === undefined ? ` (${skipReason})` : ""
    }`,
    () => withCluster(testDatabaseUrl!, env, scenario),
    { timeout: 110_000 }
  )
})
