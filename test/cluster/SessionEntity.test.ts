import { MessageStorage, TestRunner } from "@effect/cluster"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Option } from "effect"
import { layerCluster } from "../../src/cluster.js"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import type { Session } from "../../src/domain/Session.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Supervisor from "../../src/session/Supervisor.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as Approvals from "../../src/tools/Approvals.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: ["echo", "restart"]
}

/** One script that walks every message kind: a tool turn, a write that waits, its approval, and a follow-up. */
const script = () =>
  Scripted.make({
    script: [
      Scripted.toolCalls([{ name: "echo", arguments: { q: "logs" } }]),
      Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }]),
      Scripted.text("The restart worked."),
      Scripted.text("Nothing else is wrong.")
    ]
  })

const ports = (model: Scripted.Scripted | ReturnType<typeof Scripted.make>) =>
  Layer.mergeAll(
    LiveEvents.layer,
    ToolRegistry.layer(Tools.all),
    Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
  ).pipe(Layer.provideMerge(MemoryStore.layerMemory))

/** What a user sees of a session after the script: every view, the transcript, the trajectories' exit reasons. */
const walk = Effect.gen(function*() {
  const c = yield* Corral
  yield* c.publishAgent(alice, agent)
  const first = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why is db down?" })
  const token = first.pending[0]?.token ?? ""
  const refused = yield* Effect.flip(c.continue(alice, first.id, "hurry"))
  const approved = yield* c.approve(alice, first.id, token)
  const again = yield* Effect.flip(c.approve(alice, first.id, token))
  const followed = yield* c.continue(alice, first.id, "anything else?")
  const turns = yield* c.turns(alice, first.id)
  const trajectories = yield* c.trajectories(alice, first.id)
  const strip = (v: typeof first) => ({
    status: v.status,
    exitReason: v.exitReason,
    modelCalls: v.modelCalls,
    toolCalls: v.toolCalls,
    bursts: v.bursts,
    usage: v.usage,
    report: v.report,
    pending: v.pending.map((p) => ({ tool: p.tool, arguments: p.arguments, hasToken: p.token !== undefined }))
  })
  return {
    views: [strip(first), strip(approved), strip(followed)],
    refused: refused._tag,
    again: again._tag,
    // Accepted-message ids are random per host; that each user turn carries one is what matters.
    transcript: turns.map((t) => ({
      seq: t.seq,
      entry: t.entry.kind === "user" && t.entry.messageId !== undefined
        ? { ...t.entry, messageId: t.entry.messageId.startsWith("msg_") }
        : t.entry
    })),
    exits: trajectories.map((t) => t.exitReason)
  }
})

/** A session of `agent` that ran its first prompt ("why?"), with the store and the `Corral` it ran on. */
const started = Effect.gen(function*() {
  const store = yield* SessionStore
  const c = yield* Corral
  yield* c.publishAgent(alice, agent)
  const first = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
  return { store, c, first }
})

/** A follow-up to `first` acknowledged (stored in its inbox) as of `acceptedAt`, under the message id `id`. */
const acceptFollowUp = (first: { readonly id: string }, id: string, text: string, acceptedAt: number) =>
  Effect.flatMap(
    SessionStore,
    (store) =>
      store.accept({ message: { id, sessionId: first.id, orgId: alice.orgId, kind: "continue", text, acceptedAt } })
  )

const cluster = (model: ReturnType<typeof Scripted.make>) =>
  layerCluster().pipe(Layer.provideMerge(ports(model)), Layer.provideMerge(TestRunner.layer))

describe("cluster/SessionEntity", () => {
  // TestRunner's sharding runs on the live clock (it hangs under TestClock): scopedLive, and the scripted model
  // answers at once, so nothing here waits on time.
  it.scopedLive("the same script gives the same transcript, exit reasons and counters as the local supervisor", () =>
    Effect.gen(function*() {
      const local = yield* Effect.provide(walk, Corral.layer().pipe(Layer.provideMerge(ports(script()))))
      const { clustered, journal } = yield* Effect.provide(
        Effect.all({
          clustered: walk,
          journal: Effect.map(
            MessageStorage.MemoryDriver,
            (driver) => driver.journal.flatMap((e) => "tag" in e ? [e.tag] : [])
          )
        }),
        cluster(script())
      )
      // The messages went through the cluster's storage (persisted, so a runner's death does not lose them).
      expect(journal).toEqual(["Run", "Continue", "Approve", "Approve", "Continue"])
      expect(local.views.map((v) => v.exitReason)).toEqual(["confirmation_pending", "completed", "completed"])
      expect(local.refused).toBe("InvalidSessionState")
      expect(local.again).toBe("AlreadyDecided")
      expect(clustered).toEqual(local)
    }))

  it.scopedLive("no approval token is stored by the cluster: messages carry its hash, answers say only that tokens were issued", () =>
    Effect.gen(function*() {
      const c = yield* Corral
      const driver = yield* MessageStorage.MemoryDriver
      yield* c.publishAgent(alice, agent)
      const first = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why is db down?" })
      // The user still gets the token of the write that waits (fetched by a volatile Renew), and it works.
      const token = first.pending[0]?.token
      expect(token).toMatch(/\S{20,}/)
      const approved = yield* c.approve(alice, first.id, token!)
      expect(approved.exitReason).toBe("completed")
      // What the cluster stored — every persisted message and every answer — holds no token; the Approve holds its hash.
      const stored = JSON.stringify(
        [...driver.requests.values()].map((e) => ({ envelope: e.envelope, replies: e.replies }))
      )
      expect(stored).not.toContain(token!)
      expect(stored).toContain(Approvals.hashToken(token!))
      expect(stored).toContain("\"issued\":true")
    }).pipe(Effect.provide(cluster(script()))))

  it.scopedLive("a message delivered again after it ran is answered, not run again", () =>
    Effect.gen(function*() {
      const { c, first, store } = yield* started
      yield* c.approve(alice, first.id, first.pending[0]?.token ?? "")
      const before = yield* c.turns(alice, first.id)
      const opening = before[0]!.entry
      if (opening.kind !== "user" || opening.messageId === undefined) throw new Error("no accepted message id")
      // The runner that ran it died before its answer was stored: the next owner gets the same message again.
      const host = yield* Supervisor.make({ hosting: "cluster" })
      const reply = yield* host.send(alice.orgId, first.id, {
        _tag: "Run",
        text: "why?",
        inboxId: opening.messageId
      })
      expect(reply.session.state.lastExitReason).toBe("completed")
      expect(yield* c.turns(alice, first.id)).toEqual(before)
      expect(yield* store.inbox(first.id)).toEqual([])
    }).pipe(Effect.provide(cluster(script()))))

  it.scopedLive("a message whose earlier accepted message never reached the owner runs after it, in the order accepted", () =>
    Effect.gen(function*() {
      const { c, first, store } = yield* started
      // Two follow-ups acknowledged (stored), the first of which never reached the session's owner: a stopping
      // runner refused it, or the cluster never stored it. The second one arrives.
      yield* acceptFollowUp(first, "msg_lost", "and the cache?", first.updatedAt + 1)
      yield* acceptFollowUp(first, "msg_later", "and the queue?", first.updatedAt + 2)
      const host = yield* Supervisor.make({ hosting: "cluster" })
      const answer = yield* host.send(alice.orgId, first.id, {
        _tag: "Continue",
        text: "and the queue?",
        inboxId: "msg_later"
      })
      expect(answer.session.state.bursts).toBe(3)
      const asked = (yield* c.turns(alice, first.id)).flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : [])
      expect(asked).toEqual(["why?", "and the cache?", "and the queue?"])
      expect(yield* store.inbox(first.id)).toEqual([])
      // The lost message delivered late (the cluster's copy, or the sweep) is answered, not run again.
      const late = yield* host.send(alice.orgId, first.id, {
        _tag: "Continue",
        text: "and the cache?",
        inboxId: "msg_lost"
      })
      expect(late.session.state.bursts).toBe(3)
    }).pipe(Effect.provide(cluster(Scripted.make({
      script: [Scripted.text("The database."), Scripted.text("The cache is fine."), Scripted.text("So is the queue.")]
    })))))

  it.scopedLive("two accepted messages delivered together reach the mailbox in the order accepted, whichever read answers first", () =>
    Effect.gen(function*() {
      const { c, first, store } = yield* started
      yield* acceptFollowUp(first, "msg_first", "and the cache?", first.updatedAt + 1)
      yield* acceptFollowUp(first, "msg_second", "and the queue?", first.updatedAt + 2)
      // The first message's read of the transcript is held; the second one's answers at once.
      const entered = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      let held = false
      const slow: SessionStore["Type"] = {
        ...store,
        turns: (...args) =>
          Effect.suspend(() => {
            if (held) return store.turns(...args)
            held = true
            return Effect.zipRight(
              Effect.zipRight(Deferred.succeed(entered, undefined), Deferred.await(gate)),
              store.turns(...args)
            )
          })
      }
      const host = yield* Effect.provideService(Supervisor.make({ hosting: "cluster" }), SessionStore, slow)
      const one = yield* Effect.fork(host.send(alice.orgId, first.id, {
        _tag: "Continue",
        text: "and the cache?",
        inboxId: "msg_first"
      }))
      yield* Deferred.await(entered)
      const two = yield* Effect.fork(host.send(alice.orgId, first.id, {
        _tag: "Continue",
        text: "and the queue?",
        inboxId: "msg_second"
      }))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(one)
      yield* Fiber.join(two)
      const asked = (yield* c.turns(alice, first.id)).flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : [])
      expect(asked).toEqual(["why?", "and the cache?", "and the queue?"])
    }).pipe(Effect.provide(cluster(Scripted.make({
      script: [Scripted.text("The database."), Scripted.text("The cache is fine."), Scripted.text("So is the queue.")]
    })))))

  it.scopedLive("a session left running by a dead runner is recovered by its next owner and continues", () =>
    Effect.gen(function*() {
      const { first, store } = yield* started
      const session = Option.getOrThrow(yield* store.getSession(alice.orgId, first.id)) as Session
      // What a runner killed mid-burst leaves behind: the session reads `running` in the shared store.
      yield* store.saveState(first.id, { ...session.state, status: "running", pending: [] }, session.updatedAt + 1)
      // A new runner starting does not touch it (it may be running on another runner)...
      yield* Supervisor.make({ hosting: "cluster" })
      expect(Option.getOrThrow(yield* store.getSession(alice.orgId, first.id)).state.status).toBe("running")
      // ...its owner recovers it when it loads it, and the follow-up runs.
      const host = yield* Supervisor.make({ hosting: "cluster" })
      const message = { _tag: "Continue" as const, text: "go on" }
      const answer = yield* host.send(alice.orgId, first.id, message)
      expect(answer.session.state.lastExitReason).toBe("completed")
      expect(answer.session.state.status).toBe("idle")
      // A local host, by contrast, recovers every running session of the store at start.
      yield* store.saveState(first.id, { ...answer.session.state, status: "running" }, answer.session.updatedAt + 1)
      yield* Supervisor.make()
      expect(Option.getOrThrow(yield* store.getSession(alice.orgId, first.id)).state.status).toBe("interrupted")
    }).pipe(Effect.provide(cluster(script()))))
})
