/**
 * Shards moving between live nodes: a third `corral serve --cluster` process joins a two-node cluster while bursts
 * run, the cluster rebalances (about a third of the shards move to the new node, each released by its live owner),
 * and the sessions keep working wherever they now live: every burst lands, a follow-up through the new node
 * completes on every session, some of them now hosted by it, and nothing acknowledged is lost or run twice.
 * Postgres only; skipped without CORRAL_TEST_DATABASE_URL.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { randomUUID } from "node:crypto"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { eventually } from "../support/ServerHarness.js"
import {
  awaitFollowUps,
  awaitSettled,
  awaitShards,
  expectExactlyOnce,
  followUp,
  liveActors,
  startSession,
  startTwo,
  turnsOf,
  withCluster
} from "./support.js"
import type { Cluster } from "./support.js"

const SESSIONS = 24
/** Locks that outlive the test's waits: every shard that moves is handed over by a live node, none expires. */
const env = { CORRAL_DEMO_DELAY_MS: "400", CORRAL_CLUSTER_LOCK_EXPIRATION_MS: "30000" }

const scenario = (cluster: Cluster) =>
  Effect.gen(function*() {
    const [a, b] = yield* startTwo(cluster)
    const { sql, start } = cluster
    const sent = new Map<string, Array<string>>()
    const ids = yield* Effect.forEach(Array.from({ length: SESSIONS }, (_, i) => i), (i) =>
      Effect.map(startSession(i % 2 === 0 ? a.url : b.url, `move-${i}`), ({ prompt, sessionId }) => {
        sent.set(sessionId, [prompt])
        return sessionId
      }), { concurrency: 4 })
    yield* eventually(
      "every burst to start",
      Effect.map(
        Effect.forEach(ids, (id) =>
          turnsOf(a.url, id)),
        (all) =>
          all.every((turns) =>
              turns.length >= 1
            )
            ? true
            : undefined
      ),
      "30 seconds"
    )

    // A third node joins mid-burst: the shards are shared out over three.
    const c = yield* start()
    yield* awaitShards(sql, 3, "45 seconds")

    // Every burst landed (on the node that ran it, or after the move), none is left running.
    yield* awaitSettled(c.url, ids, "30 seconds")

    // A follow-up to every session through the new node: each completes wherever its session now lives.
    yield* Effect.forEach(ids, (id) => {
      const text = `And its database? (${randomUUID()})`
      sent.get(id)!.push(text)
      return followUp(c.url, id, text)
    }, { concurrency: 4 })
    const landed = yield* awaitFollowUps(c.url, c.url, ids, (id) => sent.get(id)!.at(-1), "30 seconds")
    for (const [view, turns] of landed) expectExactlyOnce(turns, sent.get(view.id)!)
    // The new node owns a third of the shards, so some sessions moved to it (none of 24 would be (2/3)^24 ≈ 1 in 16,000).
    expect(yield* liveActors(c.url)).toBeGreaterThan(0)
  })

describe("a shard move between live nodes", () => {
  it.live.skipIf(testDatabaseUrl === undefined)(
    `a third node joins mid-burst: shards rebalance, sessions keep working wherever they land${
      testDatabaseUrl === undefined ? ` (${skipReason})` : ""
    }`,
    () => withCluster(testDatabaseUrl!, env, scenario),
    // Room to wait for the other multi-node scenarios (one at a time, `withCluster`).
    { timeout: 240_000 }
  )
})
