/**
 * Two `corral serve --cluster` processes on 127.0.0.1 sharing one Postgres database, and the loss of one of them.
 *
 * Sessions are started through node A only and spread over both runners by the cluster. A client on node A follows
 * every session over SSE — about half are owned by node B, so their events cross nodes. Node B is SIGKILLed while
 * the bursts are in flight: the sessions it owned must be taken over by node A (they read `interrupted`, not
 * `running`), a follow-up sent to node A must run on each of them, and no acknowledged message may be lost or run
 * twice (each prompt and follow-up is exactly one user turn; sequence numbers have no gap and no repeat, in the store
 * and on the SSE stream). Postgres only (the embedded store cannot be shared); skipped without
 * CORRAL_TEST_DATABASE_URL. Wall time only because real processes are the subject; every wait is bounded.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Redacted } from "effect"
import { randomUUID } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Turn } from "../../src/domain/Message.js"
import * as Database from "../../src/store/Database.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { corral, eventually, raw, readSse } from "../support/ServerHarness.js"
import type { SseEvent } from "../support/ServerHarness.js"

const SESSIONS = 12
/** How long a dead node's shard locks outlive it: short, so the takeover fits the test's bounds. */
const LOCK_EXPIRATION_MS = 3_000

/** A free TCP port on 127.0.0.1 (for a runner, which needs a fixed address other nodes can dial). */
const freePort = Effect.promise(() =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => resolve(typeof address === "object" && address !== null ? address.port : 0))
    })
  })
)

const post = (url: string, body: unknown) =>
  raw(url, { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } })

const json = (url: string) => Effect.map(raw(url), (r) => JSON.parse(r.text))

const nodeLogs: Array<string> = []

/** A node of the cluster, until the scope closes (SIGKILL then). */
const node = (dir: string, env: Record<string, string>) =>
  Effect.gen(function*() {
    const runnerPort = yield* freePort
    const child = corral(["serve", "--cluster", "--port", "0"], {
      ...env,
      CORRAL_CLUSTER_HOST: "127.0.0.1",
      CORRAL_CLUSTER_PORT: String(runnerPort)
    }, dir)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        child.process.kill("SIGKILL")
        nodeLogs.push(`runner ${runnerPort}:\n${child.stdout()}${child.stderr()}`)
      })
    )
    const url = yield* eventually(
      "the node to listen",
      Effect.sync(() => /listening on (http:\/\/[0-9.]+:\d+)/.exec(child.stdout() + child.stderr())?.[1]),
      "60 seconds"
    ).pipe(
      Effect.raceFirst(
        Effect.flatMap(
          Effect.promise(() => child.exited),
          (code) => Effect.dieMessage(`the node exited (${code}) before listening: ${child.stderr().slice(-2000)}`)
        )
      )
    )
    return { child, url, runner: `127.0.0.1:${runnerPort}` }
  })

const isUser = (turn: Turn, text: string | undefined) => turn.entry.kind === "user" && turn.entry.text === text

const turnsOf = (url: string, sessionId: string) =>
  Effect.map(json(`${url}/v1/sessions/${sessionId}/turns`), (body) => body.turns as Array<Turn>)

const scenario = (databaseUrl: string, sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "corral-cluster-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    // Each demo reply takes ~2 × 700 ms and a burst makes four: bursts are in flight for ~6 s, long enough to be cut.
    const env = {
      DATABASE_URL: databaseUrl,
      CORRAL_DEMO_DELAY_MS: "700",
      CORRAL_CLUSTER_LOCK_EXPIRATION_MS: String(LOCK_EXPIRATION_MS)
    }
    // One after the other: the first node migrates the fresh database (the store's and the cluster's tables).
    const a = yield* node(dir, env)
    const b = yield* node(dir, env)
    // Both runners registered and every shard held: sessions go to both from the first message.
    yield* eventually(
      "both runners to hold shards",
      // Each runner holds its shards as advisory locks on its own lock connection: the 300 shards are balanced once
      // two holders have about half each (node A gave up node B's half first, so it routes there already).
      sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database
        WHERE l.locktype = 'advisory' AND l.granted AND d.datname = current_database() GROUP BY l.pid`.pipe(
        Effect.map((rows) => rows.length === 2 && rows.every((r) => r.n >= 100) ? true : undefined),
        // The runners create the table as they start.
        Effect.orElseSucceed(() => undefined)
      ),
      "30 seconds"
    )

    // Start every session through node A; each 202 is an acknowledged prompt.
    const acked = yield* Effect.forEach(Array.from({ length: SESSIONS }, (_, i) => i), (i) =>
      Effect.gen(function*() {
        const prompt = `Why is service ${i} failing? (${randomUUID()})`
        const started = yield* post(`${a.url}/v1/sessions`, { agentId: "demo", scope: `svc:${i}`, prompt })
        expect(started.status, started.text).toBe(202)
        return { sessionId: JSON.parse(started.text).sessionId as string, prompt }
      }), { concurrency: 4 })

    // A client on node A follows every session from the start until the report of the burst after the follow-up.
    const followUps = new Map(acked.map(({ sessionId }) => [sessionId, `And its database? (${randomUUID()})`]))
    const streams = yield* Effect.forEach(acked, ({ sessionId }) =>
      Effect.fork(readSse(`${a.url}/v1/sessions/${sessionId}/events`, (events) =>
        events.some((e) =>
          e.event === "report" &&
          events.some((t) =>
            t.event === "turn" && isUser((t.data as { turn: Turn }).turn, followUps.get(sessionId))
          )
        ), { timeout: "90 seconds" })))

    // Mid-burst: every prompt is stored as a turn and most bursts are still running. Then node B dies.
    yield* eventually(
      "every burst to start",
      Effect.map(
        Effect.forEach(acked, ({ sessionId }) => turnsOf(a.url, sessionId)),
        (all) => all.every((turns) => turns.length >= 1) ? true : undefined
      ),
      "30 seconds"
    )
    // Node B hosts some of them (its live actors), or there is nothing to take over.
    const onB = yield* Effect.map(raw(`${b.url}/metrics`), (r) =>
      Number(/^corral_actors_active (\d+)/m.exec(r.text)?.[1]))
    expect(onB).toBeGreaterThan(0)
    const killedAt = Date.now()
    b.child.process.kill("SIGKILL")
    yield* Effect.promise(() =>
      b.child.exited
    )

    // Node A takes node B's sessions over: none stays `running` (B's read `interrupted` once A has loaded them).
    const settled = yield* eventually(
      "every session to land or be taken over",
      Effect.map(
        Effect.forEach(acked, ({ sessionId }) => json(`${a.url}/v1/sessions/${sessionId}`)),
        (views) => views.every((v) => v.status === "idle" || v.status === "interrupted") ? views : undefined
      ),
      "60 seconds"
    )
    const interrupted = settled.filter((v) => v.status === "interrupted")
    // Node B owned some sessions and died in their bursts; node A ran its own to the end.
    const transcripts = yield* Effect.forEach(acked, ({ sessionId }) => turnsOf(a.url, sessionId))
    const trajectories = yield* Effect.forEach(acked, ({ sessionId }) =>
      json(`${a.url}/v1/sessions/${sessionId}/trajectory`))
    // On failure, the whole picture: each session's state, transcript kinds, and its bursts' times and exits.
    const picture = JSON.stringify(settled.map((v, i) => [
      v.status,
      v.exitReason,
      transcripts[i]!.map((t) =>
        t.entry.kind
      ).join(","),
      (trajectories[i].trajectories as Array<{ startedAt: number; endedAt: number; exitReason: string }>).map((
        t
      ) => [t.startedAt, t.endedAt, t.exitReason])
    ]))
    expect(interrupted.length, `${killedAt}: ${picture}`).toBeGreaterThan(0)
    expect(settled.filter((v) => v.status === "idle" && v.exitReason === "completed").length).toBeGreaterThan(0)

    // A follow-up to every session, through node A: the taken-over ones resume there.
    for (const { sessionId } of acked) {
      const sent = yield* post(`${a.url}/v1/sessions/${sessionId}/messages`, { text: followUps.get(sessionId) })
      expect(sent.status, sent.text).toBe(202)
    }
    const landed = yield* eventually(
      "every follow-up to land",
      Effect.map(
        Effect.forEach(acked, ({ sessionId }) =>
          Effect.zip(json(`${a.url}/v1/sessions/${sessionId}`), turnsOf(a.url, sessionId))),
        (all) =>
          all.every(([view, turns]) =>
              view.status === "idle" && view.exitReason === "completed" &&
              turns.some((t) =>
                t.entry.kind === "user" && t.entry.text === followUps.get(view.id)
              )
            )
            ? all
            : undefined
      ),
      "60 seconds"
    )
    for (const [index, [view, turns]] of landed.entries()) {
      const { prompt } = acked[index]!
      // Every acknowledged message exactly once, in order; no turn lost or repeated.
      const users = turns.flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : [])
      expect(users.filter((u) => u === prompt || u === followUps.get(view.id))).toEqual([
        prompt,
        followUps.get(view.id)
      ])
      expect(turns.map((t) => t.seq)).toEqual(turns.map((_, i) => i + 1))
    }

    // The client on node A saw every session's turns, B's included, in order, each once, up to the last report.
    const seen = yield* Effect.forEach(streams, Fiber.join)
    for (const [index, events] of seen.entries()) {
      const [, turns] = landed[index]!
      const streamed = events.filter((e: SseEvent) => e.event === "turn").map((e) => (e.data as { seq: number }).seq)
      expect(streamed).toEqual(turns.map((t) => t.seq).slice(0, streamed.length))
      expect(events.some((e) => e.event === "report")).toBe(true)
    }
  }).pipe(
    // What the nodes said, when something went wrong: the only window into two other processes.
    Effect.scoped,
    Effect.tapErrorCause(() => Effect.sync(() => console.log(nodeLogs.join("\n\n"))))
  )

describe("a cluster of two nodes", () => {
  it.live.skipIf(testDatabaseUrl === undefined)(
    `node B is SIGKILLed mid-burst: node A takes its sessions over, follow-ups run, nothing is lost or run twice${
      testDatabaseUrl === undefined ? ` (${skipReason})` : ""
    }`,
    () =>
      Effect.gen(function*() {
        const admin = yield* Layer.build(Database.layerPostgres(Redacted.make(testDatabaseUrl!), { maxConnections: 1 }))
        const adminSql = yield* Effect.provide(SqlClient.SqlClient, admin)
        const name = `corral_cluster_${randomUUID().replaceAll("-", "").slice(0, 12)}`
        yield* adminSql`CREATE DATABASE ${adminSql(name)}`
        yield* Effect.addFinalizer(() =>
          adminSql`DROP DATABASE IF EXISTS ${adminSql(name)} WITH (FORCE)`.pipe(Effect.ignore)
        )
        const url = new URL(testDatabaseUrl!)
        url.pathname = `/${name}`
        const context = yield* Layer.build(Database.layerPostgres(Redacted.make(url.toString()), { maxConnections: 2 }))
        yield* scenario(url.toString(), yield* Effect.provide(SqlClient.SqlClient, context))
      }).pipe(Effect.scoped),
    { timeout: 110_000 }
  )
})
