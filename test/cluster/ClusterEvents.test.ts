/**
 * Cross-node events (cluster/ClusterEvents) outlive their LISTEN connection: two `corral serve --cluster` processes
 * whose listening backends are killed with `pg_terminate_backend` mid-burst listen again on their own, saying so in
 * their logs; a client on either node that followed a session owned by the other still gets what was published while
 * no LISTEN held (its turns, and the landing it waits for, caught up from the store), and sessions started afterwards
 * are followed live across nodes again. Each session is followed on both nodes, so whichever owns it, one stream
 * crosses nodes. Postgres only; skipped without CORRAL_TEST_DATABASE_URL.
 */
import type { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { eventually, readSse } from "../support/ServerHarness.js"
import type { SseEvent } from "../support/ServerHarness.js"
import { startSession, startTwo, turnsOf, withCluster } from "./support.js"
import type { Cluster, Node } from "./support.js"

const env = { CORRAL_DEMO_DELAY_MS: "100", CORRAL_CLUSTER_LOCK_EXPIRATION_MS: "3000" }

/** The backends LISTENing on the events channel (the last statement of a listen connection is its LISTEN). */
const listeners = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND query LIKE 'LISTEN %corral_events%'`,
    (rows) => rows.map((r) => r.pid)
  )

/** Follows the session on every node, from its start to its report: whichever owns it, one stream crosses nodes. */
const followEverywhere = (nodes: ReadonlyArray<Node>, sessionId: string) =>
  Effect.forEach(nodes, (node) =>
    Effect.fork(readSse(
      `${node.url}/v1/sessions/${sessionId}/events`,
      (events) => events.some((e) => e.event === "report"),
      { timeout: "45 seconds" }
    )))

/** Every stream saw the session's turns in order, each once, and its report. */
const expectFollowed = (
  via: Node,
  sessions: ReadonlyArray<{ readonly sessionId: string }>,
  streams: ReadonlyArray<ReadonlyArray<Fiber.RuntimeFiber<ReadonlyArray<SseEvent>>>>
) =>
  Effect.forEach(streams, (pair, index) =>
    Effect.gen(function*() {
      const seen = yield* Effect.forEach(pair, Fiber.join)
      // The report lands after the burst's last turn is stored.
      const turns = yield* turnsOf(via.url, sessions[index]!.sessionId)
      for (const events of seen) {
        const streamed = events.filter((e) => e.event === "turn").map((e) => (e.data as { seq: number }).seq)
        expect(streamed.length).toBeGreaterThan(0)
        expect(streamed).toEqual(turns.map((t) => t.seq).slice(0, streamed.length))
        expect(events.some((e) => e.event === "report")).toBe(true)
      }
    }), { discard: true })

const scenario = (cluster: Cluster) =>
  Effect.gen(function*() {
    const [a, b] = yield* startTwo(cluster)
    const { sql } = cluster
    const before = yield* eventually(
      "both nodes to LISTEN",
      Effect.map(listeners(sql), (pids) => pids.length === 2 ? pids : undefined),
      "20 seconds"
    )
    // Sessions in flight, followed on both nodes: they land while no LISTEN holds.
    const during = yield* Effect.forEach([0, 1, 2, 3], (i) => startSession(i % 2 === 0 ? a.url : b.url, `cut-${i}`))
    const cut = yield* Effect.forEach(during, ({ sessionId }) => followEverywhere([a, b], sessionId))
    const killed = yield* sql<{ ok: boolean }>`SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
      WHERE pid IN ${sql.in(before)}`
    expect(killed.map((r) => r.ok)).toEqual([true, true])

    // Each node notices its silent LISTEN and opens another (a new backend), within its silence bound and a backoff.
    yield* eventually(
      "both nodes to LISTEN again",
      Effect.map(listeners(sql), (pids) =>
        pids.length === 2 && pids.every((p) => !before.includes(p)) ? true : undefined),
      "30 seconds"
    )
    for (const node of [a, b]) {
      yield* eventually(
        "the node to say it listens again",
        Effect.sync(() =>
          node.child.stdout().includes("the LISTEN connection on corral_events ended") &&
            node.child.stdout().includes("listening on corral_events again")
            ? true
            : undefined
        ),
        "15 seconds"
      )
    }
    // What landed meanwhile reached the followers on the other node too: caught up from the store.
    yield* expectFollowed(a, during, cut)

    // Sessions after the outage, followed on both nodes: events cross nodes live again.
    const after = yield* Effect.forEach([0, 1, 2, 3], (i) =>
      startSession(i % 2 === 0 ? a.url : b.url, `ev-${i}`))
    yield* expectFollowed(
      a,
      after,
      yield* Effect.forEach(after, ({ sessionId }) => followEverywhere([a, b], sessionId))
    )
  })

describe("cluster events", () => {
  it.live.skipIf(testDatabaseUrl === undefined)(
    `the LISTEN connection killed on both nodes: each listens again and SSE follows sessions across nodes${
      testDatabaseUrl === undefined ? ` (${skipReason})` : ""
    }`,
    () => withCluster(testDatabaseUrl!, env, scenario),
    // Room to wait for the other multi-node scenarios (one at a time, `withCluster`).
    { timeout: 240_000 }
  )
})
