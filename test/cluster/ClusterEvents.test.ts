/**
 * Cross-node events (cluster/ClusterEvents) outlive their LISTEN connection: two `corral serve --cluster` processes
 * whose listening backends are killed with `pg_terminate_backend` listen again on their own, saying so in their logs,
 * and a client on either node then follows a session owned by the other over SSE. Each session is followed on both
 * nodes, so whichever owns it, one stream crosses nodes. Postgres only; skipped without CORRAL_TEST_DATABASE_URL.
 */
import type { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import type { Scope } from "effect"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { eventually, readSse } from "../support/ServerHarness.js"
import { awaitShards, startSession, turnsOf, withCluster } from "./support.js"
import type { Node } from "./support.js"

const env = { CORRAL_DEMO_DELAY_MS: "100", CORRAL_CLUSTER_LOCK_EXPIRATION_MS: "3000" }

/** The backends LISTENing on the events channel (the last statement of a listen connection is its LISTEN). */
const listeners = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
      WHERE datname = current_database() AND query LIKE 'LISTEN %corral_events%'`,
    (rows) => rows.map((r) => r.pid)
  )

const scenario = ({ sql, start }: {
  readonly sql: SqlClient.SqlClient
  readonly start: () => Effect.Effect<Node, never, Scope.Scope>
}) =>
  Effect.gen(function*() {
    const a = yield* start()
    const b = yield* start()
    yield* awaitShards(sql, 2, "30 seconds")
    const before = yield* eventually(
      "both nodes to LISTEN",
      Effect.map(listeners(sql), (pids) => pids.length === 2 ? pids : undefined),
      "20 seconds"
    )
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

    // Every session followed on both nodes, from its start to its report: one of the two streams crosses nodes.
    const sessions = yield* Effect.forEach([0, 1, 2, 3], (i) =>
      startSession(i % 2 === 0 ? a.url : b.url, `ev-${i}`))
    const streams = yield* Effect.forEach(sessions, ({ sessionId }) =>
      Effect.forEach([a, b], (node) =>
        Effect.fork(readSse(
          `${node.url}/v1/sessions/${sessionId}/events`,
          (events) =>
            events.some((e) =>
              e.event === "report"
            ),
          { timeout: "30 seconds" }
        ))))
    for (const [index, pair] of streams.entries()) {
      const seen = yield* Effect.forEach(pair, Fiber.join)
      // The report lands after the burst's last turn is stored.
      const turns = yield* turnsOf(a.url, sessions[index]!.sessionId)
      for (const events of seen) {
        const streamed = events.filter((e) => e.event === "turn").map((e) => (e.data as { seq: number }).seq)
        expect(streamed.length).toBeGreaterThan(0)
        expect(streamed).toEqual(turns.map((t) => t.seq).slice(0, streamed.length))
        expect(events.some((e) => e.event === "report")).toBe(true)
      }
    }
  })

describe("cluster events", () => {
  it.live.skipIf(testDatabaseUrl === undefined)(
    `the LISTEN connection killed on both nodes: each listens again and SSE follows sessions across nodes${
      testDatabaseUrl === undefined ? ` (${skipReason})` : ""
    }`,
    () => withCluster(testDatabaseUrl!, env, scenario),
    { timeout: 110_000 }
  )
})
