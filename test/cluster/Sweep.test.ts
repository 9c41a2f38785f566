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
 *
 * In-process first, on the cluster's `TestRunner` (it runs on the live clock, so the test polls; nothing waits on a
 * fixed time): the same two states made directly in the store, a short sweep period, and what the sweep must leave
 * alone — a session whose actor is live, a message younger than the period; and, with the sweep an hour away, a
 * prompt whose Run the owner refused for a store failure, which the sending node's wake-ups run within seconds.
 */
import { TestRunner } from "@effect/cluster"
import type { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import type { Duration } from "effect"
import { Clock, Effect, Layer, Option } from "effect"
import { randomUUID } from "node:crypto"
import { layerCluster } from "../../src/cluster.js"
import { Corral } from "../../src/Corral.js"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Supervisor from "../../src/session/Supervisor.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import { eventually } from "../support/ServerHarness.js"
import {
  awaitFollowUps,
  expectExactlyOnce,
  followUp,
  isUser,
  json,
  liveActors,
  post,
  startTwo,
  stop,
  turnsOf,
  withCluster
} from "./support.js"
import type { Cluster, Node } from "./support.js"

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

const scenario = (cluster: Cluster) =>
  Effect.gen(function*() {
    const [a, b] = yield* startTwo(cluster)
    const { sql } = cluster
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
    const landed = yield* awaitFollowUps(
      a.url,
      a.url,
      all.map(({ sessionId }) => sessionId),
      (id) => followUps.get(id),
      "30 seconds"
    )
    for (const [index, [view, turns]] of landed.entries()) {
      expectExactlyOnce(turns, [all[index]!.prompt, followUps.get(view.id)!])
    }
  })

const alice = new Principal({ orgId: "org_a", userId: "alice" })

/** A cluster of one test runner over `store`, sweeping every `sweepInterval`; every model call answers at once. */
const inProcessWith = (sweepInterval: Duration.DurationInput, store: Layer.Layer<SessionStore>) =>
  layerCluster({ sweepInterval }).pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        LiveEvents.layer,
        ToolRegistry.layer([]),
        Layer.succeed(
          Providers,
          Providers.fromRoutes({ default: [Scripted.make({ script: [], whenDone: Scripted.text("Done.") })] })
        )
      ).pipe(Layer.provideMerge(store))
    ),
    Layer.provideMerge(TestRunner.layer)
  )

/** Over the memory store, sweeping every 100 ms. */
const inProcess = inProcessWith("100 millis", MemoryStore.layerMemory)

/**
 * The same cluster sweeping only once an hour, over a store whose `getAgent` fails while `failing` is set: the owner
 * answers a Run `PersistenceFailed` (the cluster keeps that answer), as a store hiccup or a stopping owner does.
 */
const hiccup = Effect.gen(function*() {
  const base = yield* MemoryStore.makeMemory
  const state = { failing: false, refused: 0 }
  const store: SessionStore["Type"] = {
    ...base,
    getAgent: (...args) =>
      Effect.suspend(() => {
        if (!state.failing) return base.getAgent(...args)
        state.failing = false
        state.refused++
        return Effect.fail(new PersistenceFailed({ operation: "getAgent", message: "connection reset" }))
      })
  }
  return { state, layer: Layer.succeed(SessionStore, store) }
})

describe("the cluster sweep", () => {
  it.scopedLive("an accepted message whose Run the owner refused for its store runs within seconds, not a sweep later", () =>
    Effect.gen(function*() {
      const { layer, state } = yield* hiccup
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const c = yield* Corral
        yield* c.publishAgent(alice, { id: "triage", version: 1, name: "Triage", instructions: "Look.", tools: [] })
        const started = yield* c.start(alice, { agentId: "triage", scope: "a", prompt: "why?" })
        // Acknowledged; its delivery (detached, not begun yet) meets the hiccup when the owner loads the session.
        state.failing = true
        const landed = yield* eventually(
          "the refused prompt to run",
          Effect.map(
            c.get(alice, started.id),
            (view) => view.status === "idle" && view.exitReason === "completed" ? view : undefined
          ),
          "10 seconds"
        )
        expect(state.refused).toBe(1)
        expect(landed.bursts).toBe(1)
        const asked = (yield* c.turns(alice, started.id)).flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : [])
        expect(asked).toEqual(["why?"])
        expect(yield* store.inbox(started.id)).toEqual([])
      }).pipe(Effect.provide(inProcessWith("1 hour", layer)))
    }))

  it.scopedLive("runs an acknowledged message the cluster never got and recovers a session left running, once", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const supervisor = yield* Supervisor.Supervisor
      const c = yield* Corral
      yield* c.publishAgent(alice, { id: "triage", version: 1, name: "Triage", instructions: "Look.", tools: [] })
      const start = (scope: string) => c.run(alice, { agentId: "triage", scope, prompt: "why?" })
      const [waiting, orphan, live] = yield* Effect.all([start("a"), start("b"), start("c")])
      const now = yield* Clock.currentTimeMillis
      // Acknowledged (stored in the inbox) but never handed to the cluster.
      const message = {
        id: `msg_${randomUUID().replaceAll("-", "")}`,
        sessionId: waiting!.id,
        orgId: alice.orgId,
        kind: "continue" as const,
        text: "and the database?",
        acceptedAt: now - 60_000
      }
      yield* store.accept({ message })
      // Left `running` by a runner that is gone: no live actor holds it.
      yield* supervisor.release(orphan!.id)
      const stale = Option.getOrThrow(yield* store.getSession(alice.orgId, orphan!.id))
      yield* store.saveState(orphan!.id, { ...stale.state, status: "running" }, stale.updatedAt + 1)
      // `running` too, but its actor is live here: the sweep leaves it to that actor.
      const held = Option.getOrThrow(yield* store.getSession(alice.orgId, live!.id))
      yield* store.saveState(live!.id, { ...held.state, status: "running" }, held.updatedAt + 1)
      // Too young: it may still be on its way through the cluster.
      yield* store.accept({
        message: {
          ...message,
          id: `msg_${randomUUID().replaceAll("-", "")}`,
          sessionId: live!.id,
          acceptedAt: now + 60_000
        }
      })

      const turns = yield* eventually(
        "the waiting message to run and the orphan to be recovered",
        Effect.gen(function*() {
          const ran = yield* store.turns(alice.orgId, waiting!.id)
          const recovered = Option.getOrThrow(yield* store.getSession(alice.orgId, orphan!.id))
          return ran.some((t) => t.entry.kind === "user" && t.entry.text === message.text) &&
              recovered.state.status === "interrupted"
            ? ran
            : undefined
        }),
        "10 seconds"
      )
      // Several sweeps ran meanwhile: the message ran once, and it is settled.
      expect(turns.filter((t) => t.entry.kind === "user" && t.entry.text === message.text)).toHaveLength(1)
      expect(yield* store.inbox(waiting!.id)).toEqual([])
      // The session with a live actor and the young message were left alone.
      expect(Option.getOrThrow(yield* store.getSession(alice.orgId, live!.id)).state.status).toBe("running")
      expect(yield* store.inbox(live!.id)).toHaveLength(1)
      // The recovered session resumes with a follow-up.
      expect((yield* c.continue(alice, orphan!.id, "go on")).exitReason).toBe("completed")
    }).pipe(Effect.provide(inProcess)))

  it.live.skipIf(testDatabaseUrl === undefined)(
    `sessions no message will wake (a dead node's, an acknowledged message the cluster never stored) are woken by their owner${
      testDatabaseUrl === undefined ? ` (${skipReason})` : ""
    }`,
    () => withCluster(testDatabaseUrl!, env, scenario),
    // Room to wait for the other multi-node scenarios (one at a time, `withCluster`).
    { timeout: 240_000 }
  )
})
