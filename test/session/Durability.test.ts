/**
 * Durability at the session's edges (issue 12), in process: acknowledged means stored, accepted messages survive a
 * process that dies before their burst, Idempotency-Key replays create nothing twice, a burst the store stops ends
 * visibly and lands once the store is back, and the trajectory keeps what a crash cut off.
 *
 * "A process dies" is a runtime whose scope is closed mid-flight over a memory store that outlives it (the next
 * runtime starts on the same store, as a restarted process would on its database); the child-process SIGKILL tests
 * are in test/store/AcceptCrash.test.ts. Time is the TestClock's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer, Logger, LogLevel, Schema, Scope, Stream, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import { AgentSpec } from "../../src/domain/AgentSpec.js"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import type { InboxMessage } from "../../src/domain/Inbox.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope as SessionScope } from "../../src/domain/Scope.js"
import type { Session } from "../../src/domain/Session.js"
import { initialState } from "../../src/domain/Session.js"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import { makeMemory } from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })

const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: ["echo", "restart", "slow1", "slow3"],
  finalize: "transcript" as const
}

/** A store whose every call fails while `down` is set: an outage as the actor meets it (no driver involved). */
const outageStore = (base: SessionStore["Type"]) => {
  const state = { down: false }
  const wrapped = Object.fromEntries(
    Object.entries(base).map(([name, method]) => [
      name,
      (...args: Array<unknown>) =>
        Effect.suspend(() =>
          state.down
            ? Effect.fail(new PersistenceFailed({ operation: name, message: "connection refused (outage)" }))
            : (method as (...a: Array<unknown>) => Effect.Effect<unknown, PersistenceFailed>)(...args)
        )
    ])
  ) as unknown as SessionStore["Type"]
  return { store: wrapped, state }
}

const sleepy = (name: string, seconds: number) =>
  ToolRegistry.define<{ q: string }>({
    name,
    description: `Takes ${seconds} s.`,
    parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
    run: (args) => Effect.as(Effect.sleep(`${seconds} seconds`), `${name}:${args.q}`)
  })

const runtime = (
  store: SessionStore["Type"],
  model: Scripted.Scripted,
  tools: ReadonlyArray<ToolRegistry.ToolHandler> = [Tools.echo, Tools.restart, sleepy("slow1", 1), sleepy("slow3", 3)]
) =>
  Corral.layer().pipe(
    Layer.provide(Layer.mergeAll(
      LiveEvents.layer,
      ToolRegistry.layer(tools),
      Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
    )),
    Layer.provide(Layer.succeed(SessionStore, store))
  )

/** Waits (on the TestClock) until the session is no longer running and has an exit reason. */
const landed = (c: Corral["Type"], id: string, bursts = 1) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const v = yield* c.get(alice, id)
      if (v.status !== "running" && v.exitReason !== undefined && v.bursts >= bursts) return v
      yield* TestClock.adjust("100 millis")
    }
    return yield* Effect.dieMessage(`session ${id} never landed`)
  })

const userTexts = (c: Corral["Type"], id: string) =>
  Effect.map(c.turns(alice, id), (turns) => turns.flatMap((t) => t.entry.kind === "user" ? [t.entry.text] : []))

describe("acknowledged means stored", () => {
  it.effect("start returns only once the session and its prompt are stored", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        const v = yield* c.start(alice, { agentId: "triage", scope: "incident:1", prompt: "why is checkout down?" })
        // Nothing has run yet (the burst is detached): the prompt is in the durable mailbox.
        const waiting = yield* store.inbox(v.id)
        expect(waiting.map((m) => [m.kind, m.text])).toEqual([["run", "why is checkout down?"]])
        const done = yield* landed(c, v.id)
        expect(done.exitReason).toBe("completed")
        // Taken up: its user turn carries the message id, and the mailbox is empty.
        const turns = yield* c.turns(alice, v.id)
        expect(turns[0]?.entry).toMatchObject({ kind: "user", messageId: waiting[0]?.id })
        expect(yield* store.inbox(v.id)).toEqual([])
      }).pipe(Effect.provide(runtime(store, Scripted.make({ script: [Scripted.text("db down")] }))))
    }))

  it.effect("a prompt acknowledged just before the process died runs at the next start", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      // What the first process left: the session and its accepted prompt, and nothing else (it died right after the
      // acknowledgement, before the burst took the prompt up).
      yield* store.putAgent(alice.orgId, Schema.decodeUnknownSync(AgentSpec)(agent))
      const session: Session = {
        id: SessionId.make("ses_orphan"),
        principal: alice,
        scope: SessionScope.make("incident:1"),
        agentId: AgentId.make("triage"),
        agentVersion: 1,
        createdAt: 0,
        updatedAt: 0,
        state: initialState
      }
      const message: InboxMessage = {
        id: "msg_orphan",
        sessionId: session.id,
        orgId: alice.orgId,
        kind: "run",
        text: "is the queue backed up?",
        acceptedAt: 0
      }
      expect((yield* store.accept({ session, message }))._tag).toBe("Accepted")
      yield* Effect.gen(function*() {
        const c = yield* Corral
        const v = yield* landed(c, session.id)
        expect(v.exitReason).toBe("completed")
        expect(yield* userTexts(c, session.id)).toEqual(["is the queue backed up?"])
        expect(yield* store.inbox()).toEqual([])
      }).pipe(Effect.provide(runtime(store, Scripted.make({ script: [Scripted.text("it is")] }))))
    }))

  it.effect("a follow-up queued behind a burst the crash cut off runs after the restart, the cut one does not rerun", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      const first = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        runtime(store, Scripted.make({ script: [Scripted.delay(600_000, Scripted.text("never"))] })),
        first
      )
      const c1 = yield* Effect.provide(Corral, context)
      yield* c1.publishAgent(alice, agent)
      const v = yield* c1.start(alice, { agentId: "triage", scope: "incident:1", prompt: "first question" })
      yield* TestClock.adjust("1 second")
      yield* c1.post(alice, v.id, "second question")
      expect((yield* store.inbox(v.id)).length).toBe(2)
      // The process dies mid-read of the first burst.
      yield* Scope.close(first, Exit.void)

      const model = Scripted.make({ script: [Scripted.text("answered the second")] })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        const done = yield* landed(c, v.id)
        expect(done.exitReason).toBe("completed")
        // The first prompt was taken up (its turn is stored): not run again; the second ran once.
        expect(yield* userTexts(c, v.id)).toEqual(["first question", "second question"])
        expect(model.requests.length).toBe(1)
        expect(yield* store.inbox()).toEqual([])
      }).pipe(Effect.provide(runtime(store, model)))
    }))
})

describe("Idempotency-Key", () => {
  it.effect("a start retried with the same key answers the first view and creates one session", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        const request = { agentId: "triage", scope: "incident:1", prompt: "why?" }
        const [a, b] = yield* Effect.all([
          c.start(alice, request, { idempotencyKey: "key-1" }),
          c.start(alice, request, { idempotencyKey: "key-1" })
        ], { concurrency: 2 })
        const again = yield* c.start(alice, request, { idempotencyKey: "key-1" })
        expect(b.id).toBe(a.id)
        expect(again).toEqual(a)
        expect((yield* store.listSessions(alice.orgId, { limit: 10 })).sessions.length).toBe(1)
        // The same key for another request is refused, naming the header.
        const other = yield* Effect.flip(c.start(alice, { ...request, prompt: "other" }, { idempotencyKey: "key-1" }))
        expect(other._tag).toBe("InvalidRequest")
        expect(other._tag === "InvalidRequest" && other.issues[0]?.path).toBe("Idempotency-Key")
        const bad = yield* Effect.flip(c.start(alice, request, { idempotencyKey: "has space" }))
        expect(bad._tag === "InvalidRequest" && bad.issues[0]?.path).toBe("Idempotency-Key")
        yield* landed(c, a.id)
        expect(yield* userTexts(c, a.id)).toEqual(["why?"])
      }).pipe(Effect.provide(runtime(store, Scripted.make({ script: [], whenDone: Scripted.text("ok") }))))
    }))

  it.effect("a follow-up retried with the same key is sent once", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
        const first = yield* c.post(alice, v.id, "and now?", { idempotencyKey: "k2" })
        const retry = yield* c.post(alice, v.id, "and now?", { idempotencyKey: "k2" })
        expect(retry).toEqual(first)
        yield* landed(c, v.id, 2)
        const awaited = yield* c.continue(alice, v.id, "and now?", { idempotencyKey: "k2" })
        expect(awaited.bursts).toBe(2)
        expect(yield* userTexts(c, v.id)).toEqual(["why?", "and now?"])
      }).pipe(Effect.provide(runtime(store, Scripted.make({ script: [], whenDone: Scripted.text("ok") }))))
    }))
})

describe("a burst the store stops", () => {
  it.effect("ends visibly, lands as crashed once the store is back, and resumes with a follow-up", () =>
    Effect.gen(function*() {
      const base = yield* makeMemory
      const outage = outageStore(base)
      // The tool call is where the outage begins: the burst's next write (its tool results) is refused.
      const cut = ToolRegistry.define<{ q: string }>({
        name: "cut",
        description: "Cuts the database off.",
        parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
        run: () => Effect.sync(() => (outage.state.down = true)).pipe(Effect.as("cut"))
      })
      const model = Scripted.make({
        script: [Scripted.toolCalls([{ name: "cut", arguments: { q: "x" } }]), Scripted.text("resumed fine")]
      })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, { ...agent, tools: ["echo", "cut"] })
        const v = yield* c.start(alice, { agentId: "triage", scope: "incident:1", prompt: "go" })
        const events = yield* c.events(alice, v.id).pipe(
          Stream.takeUntil((e: SessionEvent) => e._tag === "report"),
          Stream.runCollect,
          Effect.fork
        )
        // The outage lasts 20 s; the error event went out at once.
        yield* TestClock.adjust("20 seconds")
        outage.state.down = false
        const stopped = yield* landed(c, v.id)
        expect(stopped.status).toBe("interrupted")
        expect(stopped.exitReason).toBe("crashed")
        expect(stopped.report?.exitReason).toBe("crashed")
        const seen = Array.from(yield* Fiber.join(events))
        const error = seen.find((e) => e._tag === "error")
        expect(error).toMatchObject({ code: "store_unavailable" })
        // The client is told what to do, never the driver's words.
        expect(error?._tag === "error" && error.message).not.toContain("connection refused")
        expect(seen.map((e) => e._tag).slice(-2)).toEqual(["exit", "report"])
        const trajectory = (yield* c.trajectories(alice, v.id)).at(-1)
        expect(trajectory?.exitReason).toBe("crashed")
        expect(trajectory?.open).toBeUndefined()
        expect(trajectory?.errors.map((e) => e.code)).toContain("persistence")
        // The store is back: a follow-up resumes the session.
        const next = yield* c.continue(alice, v.id, "carry on")
        expect(next.exitReason).toBe("completed")
        expect(model.requests.length).toBe(2)
      }).pipe(Effect.provide(runtime(outage.store, model, [Tools.echo, cut])))
    }))
})

describe("the trajectory after a crash", () => {
  it.effect("keeps the attempts and usage of a burst killed mid-read, closed as crashed and billed", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      const first = yield* Scope.make()
      const model = Scripted.make({
        script: [
          Scripted.toolCalls([{ name: "echo", arguments: { q: "a" } }]),
          Scripted.delay(600_000, Scripted.text("never"))
        ]
      })
      const context = yield* Layer.buildWithScope(runtime(store, model), first)
      const c1 = yield* Effect.provide(Corral, context)
      yield* c1.publishAgent(alice, agent)
      const v = yield* c1.start(alice, { agentId: "triage", scope: "incident:1", prompt: "go" })
      yield* TestClock.adjust("1 second")
      expect(model.requests.length).toBe(2)
      const open = yield* store.trajectories(alice.orgId, v.id)
      expect(open.map((t) => t.open)).toEqual([true])
      yield* Scope.close(first, Exit.void)

      yield* Effect.gen(function*() {
        const c = yield* Corral
        const view = yield* c.get(alice, v.id)
        expect(view.status).toBe("interrupted")
        const [closed] = yield* c.trajectories(alice, v.id)
        expect(closed?.open).toBeUndefined()
        expect(closed?.exitReason).toBe("crashed")
        expect(closed?.errors.map((e) => e.code)).toContain("process.stopped")
        expect(closed?.modelCalls.length).toBe(1)
        expect(closed?.toolCalls.map((t) => t.name)).toEqual(["echo"])
        // Billed: the session's usage includes what the cut burst spent.
        expect(view.usage.total).toBe(closed?.usage.total)
        expect(view.usage.total).toBeGreaterThan(0)
      }).pipe(Effect.provide(runtime(store, Scripted.make({ script: [] }))))
    }))

  it.effect("records an approved write cut off by a crash as unknown_outcome in the next burst", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      const started = yield* Deferred.make<void>()
      const hanging = {
        ...Tools.restart,
        run: () => Effect.zipRight(Deferred.succeed(started, undefined), Effect.never)
      }
      const first = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        runtime(
          store,
          Scripted.make({ script: [Scripted.toolCalls([{ name: "restart", arguments: { service: "db" } }])] }),
          [
            Tools.echo,
            hanging
          ]
        ),
        first
      )
      const c1 = yield* Effect.provide(Corral, context)
      yield* c1.publishAgent(alice, { ...agent, tools: ["echo", "restart"] })
      const v = yield* c1.run(alice, { agentId: "triage", scope: "incident:1", prompt: "fix it" })
      const approving = yield* Effect.fork(c1.approve(alice, v.id, v.pending[0]?.token ?? ""))
      yield* Deferred.await(started)
      yield* Scope.close(first, Exit.void)
      yield* Fiber.await(approving)

      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.continue(alice, v.id, "what happened?")
        const last = (yield* c.trajectories(alice, v.id)).at(-1)
        expect(last?.toolCalls.filter((t) => t.origin === "handler").map((t) => [t.name, t.status])).toEqual([
          ["restart", "unknown_outcome"]
        ])
        // Recorded once: a later burst does not record it again.
        yield* c.continue(alice, v.id, "and now?")
        expect((yield* c.trajectories(alice, v.id)).at(-1)?.toolCalls.filter((t) => t.origin === "handler")).toEqual(
          []
        )
      }).pipe(
        Effect.provide(
          runtime(store, Scripted.make({ script: [], whenDone: Scripted.text("checked") }), [Tools.echo, hanging])
        )
      )
    }))

  it.effect("records each concurrent call with its own duration", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        const v = yield* c.start(alice, { agentId: "triage", scope: "incident:1", prompt: "go" })
        yield* landed(c, v.id)
        const calls = (yield* c.trajectories(alice, v.id))[0]?.toolCalls ?? []
        expect(calls.map((t) => [t.name, t.durationMs])).toEqual([["slow1", 1000], ["slow3", 3000]])
      }).pipe(Effect.provide(runtime(
        store,
        Scripted.make({
          script: [
            Scripted.toolCalls([{ name: "slow1", arguments: { q: "a" } }, { name: "slow3", arguments: { q: "b" } }]),
            Scripted.text("done")
          ]
        })
      )))
    }))
})

describe("an accepted message never waits forever", () => {
  /** A store that refuses writes of turns while `down` is set (it reads fine): bursts fail before taking the prompt up. */
  const refusingTurns = (base: SessionStore["Type"]) => {
    const state = { down: true, refused: 0 }
    const store: SessionStore["Type"] = {
      ...base,
      appendTurn: (...args) =>
        Effect.suspend(() => {
          if (!state.down) return base.appendTurn(...args)
          state.refused++
          return Effect.fail(new PersistenceFailed({ operation: "appendTurn", message: "disk full" }))
        })
    }
    return { store, state }
  }

  /** Waits, on the TestClock, up to `minutes` for the session to land `bursts` bursts. */
  const landedWithin = (c: Corral["Type"], id: string, minutes: number) =>
    Effect.gen(function*() {
      for (let i = 0; i < minutes * 12; i++) {
        const v = yield* c.get(alice, id)
        if (v.status !== "running" && v.exitReason === "completed") return v
        yield* TestClock.adjust("5 seconds")
      }
      return yield* Effect.dieMessage(`session ${id} never landed in ${minutes} minutes`)
    })

  it.effect("a prompt whose bursts the store refused past every redelivery runs once the store writes again", () =>
    Effect.gen(function*() {
      const base = yield* makeMemory
      const refusing = refusingTurns(base)
      const model = Scripted.make({ script: [Scripted.text("it is")] })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        const v = yield* c.start(alice, { agentId: "triage", scope: "incident:1", prompt: "is the queue backed up?" })
        // Long enough for every fast redelivery to be spent.
        for (let i = 0; i < 15 * 12; i++) yield* TestClock.adjust("5 seconds")
        expect(refusing.state.refused).toBeGreaterThan(10)
        expect((yield* base.inbox(v.id)).map((m) => m.text)).toEqual(["is the queue backed up?"])
        // The store writes again; nobody sends anything: the prompt still runs, once.
        refusing.state.down = false
        const done = yield* landedWithin(c, v.id, 2)
        expect(done.exitReason).toBe("completed")
        expect(yield* userTexts(c, v.id)).toEqual(["is the queue backed up?"])
        expect(model.requests.length).toBe(1)
        expect(yield* base.inbox()).toEqual([])
      }).pipe(Effect.provide(runtime(refusing.store, model)))
    }))

  it.effect("a prompt accepted before a store outage longer than the redelivery window runs after it", () =>
    Effect.gen(function*() {
      const base = yield* makeMemory
      const outage = outageStore(base)
      const model = Scripted.make({ script: [Scripted.text("it is")] })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        outage.state.down = true
        // Stored just before the outage (written through the base store), then delivered into it.
        const v = yield* Effect.acquireUseRelease(
          Effect.sync(() => (outage.state.down = false)),
          () => c.start(alice, { agentId: "triage", scope: "incident:1", prompt: "is the queue backed up?" }),
          () => Effect.sync(() => (outage.state.down = true))
        )
        for (let i = 0; i < 15 * 12; i++) yield* TestClock.adjust("5 seconds")
        expect((yield* base.inbox(v.id)).length).toBe(1)
        outage.state.down = false
        const done = yield* landedWithin(c, v.id, 2)
        expect(done.exitReason).toBe("completed")
        expect(yield* userTexts(c, v.id)).toEqual(["is the queue backed up?"])
        expect(model.requests.length).toBe(1)
      }).pipe(Effect.provide(runtime(outage.store, model)))
    }))

  it.effect("the inbox sweep warns only about messages still waiting for nothing, not one that ran and is being settled", () =>
    Effect.gen(function*() {
      const base = yield* makeMemory
      // Settling waits (as behind a flood of statements): a burst's message stays in the inbox after it ran.
      const settling = yield* Deferred.make<void>()
      const store: SessionStore["Type"] = {
        ...base,
        settle: (sessionId, id) => Effect.zipRight(Deferred.await(settling), base.settle(sessionId, id))
      }
      const model = Scripted.make({ script: [Scripted.text("it is"), Scripted.text("it was")] })
      const warnings: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => {
        if (LogLevel.greaterThanEqual(logLevel, LogLevel.Warning)) warnings.push(String(message))
      })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        const v = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "is the queue backed up?" })
        expect((yield* base.inbox(v.id)).length).toBe(1)
        for (let i = 0; i < 2 * 12; i++) yield* TestClock.adjust("5 seconds")
        expect(warnings.filter((w) => w.startsWith("inbox sweep"))).toEqual([])
        yield* Deferred.succeed(settling, undefined)
        // A follow-up acknowledged that nothing delivers (its process lost the delivery): that one is worth a warning.
        yield* base.accept({
          message: {
            id: "msg_lost",
            sessionId: v.id,
            orgId: alice.orgId,
            kind: "continue",
            text: "and now?",
            acceptedAt: yield* TestClock.currentTimeMillis
          }
        })
        for (let i = 0; i < 2 * 12; i++) yield* TestClock.adjust("5 seconds")
        expect(warnings.filter((w) => w.startsWith("inbox sweep"))).toEqual([
          "inbox sweep: 1 accepted message(s) of 1 session(s) waited with nothing to deliver them; delivered"
        ])
        expect(yield* userTexts(c, v.id)).toEqual(["is the queue backed up?", "and now?"])
        expect(model.requests.length).toBe(2)
        expect(yield* base.inbox()).toEqual([])
      }).pipe(Effect.provide(runtime(store, model)), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
    }))
})
