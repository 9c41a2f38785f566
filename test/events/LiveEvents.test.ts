import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, FastCheck, Fiber, Random, Stream } from "effect"
import type { PersistenceFailed } from "../../src/domain/Errors.js"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope } from "../../src/domain/Scope.js"
import type { Session } from "../../src/domain/Session.js"
import { initialState } from "../../src/domain/Session.js"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { SessionEvents } from "../../src/events/SessionEvents.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"

const newSession = (orgId: string, id = "ses_1"): Session => ({
  id: SessionId.make(id),
  principal: new Principal({ orgId, userId: "u1" }),
  scope: Scope.make("incident:INC-42"),
  agentId: AgentId.make("triage"),
  agentVersion: 1,
  createdAt: 0,
  updatedAt: 0,
  state: initialState
})

/** A store with one session of org_a, the events service over it, and persist-then-publish as the loop does it. */
const setup = Effect.gen(function*() {
  const store = yield* MemoryStore.makeMemory
  const events = yield* LiveEvents.make.pipe(Effect.provideService(SessionStore, store))
  const session = newSession("org_a")
  yield* store.createSession(session)
  const persist = (text: string) => store.appendTurn(session.id, { kind: "user", text }, 0)
  const publishTurn = (turn: Effect.Effect.Success<ReturnType<typeof persist>>) =>
    events.publish({ _tag: "turn", sessionId: turn.sessionId, seq: turn.seq, turn })
  const append = (text: string) => Effect.flatMap(persist(text), publishTurn)
  return { store, events, session, persist, publishTurn, append }
})

const seqs = (events: Iterable<SessionEvent>) => Array.from(events, (e) => `${e._tag}:${e.seq}`)

/** Collects `count` events; `ready` completes once the event with `readyAt` (a replayed one) went by. */
const collect = (
  stream: Stream.Stream<SessionEvent, unknown>,
  count: number,
  ready: Deferred.Deferred<void>,
  readyAt: number
) =>
  stream.pipe(
    Stream.tap((e) => e._tag === "turn" && e.seq === readyAt ? Deferred.succeed(ready, void 0) : Effect.void),
    Stream.take(count),
    Stream.runCollect,
    Effect.map(Chunk.toArray),
    Effect.fork
  )

describe("LiveEvents", () => {
  it.effect("replays a turn persisted before subscribing, then delivers later turns once each", () =>
    Effect.gen(function*() {
      const { append, events, session } = yield* setup
      yield* append("first")
      const ready = yield* Deferred.make<void>()
      const fiber = yield* collect(events.subscribe("org_a", session.id, 0), 3, ready, 1)
      yield* Deferred.await(ready)
      yield* append("second")
      yield* append("third")
      const got = yield* Fiber.join(fiber)
      expect(seqs(got)).toEqual(["turn:1", "turn:2", "turn:3"])
      expect(got[1]).toMatchObject({
        _tag: "turn",
        sessionId: "ses_1",
        seq: 2,
        turn: { seq: 2, entry: { text: "second" } }
      })
    }))

  it.effect("a subscriber from seq 0 after 3 turns gets 1, 2, 3, then live 4, 5 and live-only events", () =>
    Effect.gen(function*() {
      const { append, events, session } = yield* setup
      yield* Effect.forEach(["a", "b", "c"], append, { discard: true })
      const ready = yield* Deferred.make<void>()
      const fiber = yield* collect(events.subscribe("org_a", session.id, 0), 7, ready, 3)
      yield* Deferred.await(ready)
      yield* append("d")
      yield* events.publish({ _tag: "tool_start", sessionId: session.id, seq: 4, callId: "c1", name: "search" })
      yield* events.publish({ _tag: "delta", sessionId: session.id, seq: 4, text: "thinking" })
      yield* append("e")
      expect(seqs(yield* Fiber.join(fiber))).toEqual([
        "turn:1",
        "turn:2",
        "turn:3",
        "turn:4",
        "tool_start:4",
        "delta:4",
        "turn:5"
      ])
    }))

  it.effect("resumes after the given sequence number", () =>
    Effect.gen(function*() {
      const { append, events, session } = yield* setup
      yield* Effect.forEach(["a", "b", "c"], append, { discard: true })
      const ready = yield* Deferred.make<void>()
      const fiber = yield* collect(events.subscribe("org_a", session.id, 2), 2, ready, 3)
      yield* Deferred.await(ready)
      yield* append("d")
      expect(seqs(yield* Fiber.join(fiber))).toEqual(["turn:3", "turn:4"])
    }))

  it.effect("drops a turn that was both replayed and published late", () =>
    Effect.gen(function*() {
      const { events, persist, publishTurn, session } = yield* setup
      // Persisted before the subscription, published after it: present in the read AND in the live queue.
      const late = yield* persist("late")
      const ready = yield* Deferred.make<void>()
      const fiber = yield* collect(events.subscribe("org_a", session.id, 0), 2, ready, 1)
      yield* Deferred.await(ready)
      yield* publishTurn(late)
      yield* Effect.flatMap(persist("next"), publishTurn)
      expect(seqs(yield* Fiber.join(fiber))).toEqual(["turn:1", "turn:2"])
    }))

  it.effect("fills a gap from the store when a later turn is published first", () =>
    Effect.gen(function*() {
      const { append, events, persist, publishTurn, session } = yield* setup
      yield* append("a")
      const ready = yield* Deferred.make<void>()
      const fiber = yield* collect(events.subscribe("org_a", session.id, 0), 3, ready, 1)
      yield* Deferred.await(ready)
      const second = yield* persist("b")
      const third = yield* persist("c")
      yield* publishTurn(third)
      yield* publishTurn(second)
      expect(seqs(yield* Fiber.join(fiber))).toEqual(["turn:1", "turn:2", "turn:3"])
    }))

  it.effect.prop(
    "concurrent writers racing the subscription never cause a gap or a duplicate",
    {
      seed: FastCheck.integer(),
      fromSeq: FastCheck.integer({ min: 0, max: 6 }),
      writers: FastCheck.integer({ min: 1, max: 3 })
    },
    ({ fromSeq, seed, writers }) =>
      Effect.gen(function*() {
        const { events, persist, publishTurn, session } = yield* setup
        const total = 24
        const pause = Effect.flatMap(Random.nextIntBetween(0, 4), (n) => Effect.repeatN(Effect.yieldNow(), n))
        // Each writer persists, pauses a random while, then publishes: writers overtake each other at random.
        const writer = Effect.forEach(
          Array.from({ length: total / writers }),
          () => persist("x").pipe(Effect.tap(() => pause), Effect.flatMap(publishTurn), Effect.zipLeft(pause)),
          { discard: true }
        )
        const writing = yield* Effect.forkAll(Array.from({ length: writers }, () => writer))
        yield* pause
        const got = yield* events.subscribe("org_a", session.id, fromSeq).pipe(
          Stream.filter((e) => e._tag === "turn"),
          Stream.takeUntil((e) => e.seq === total),
          Stream.runCollect
        )
        yield* Fiber.join(writing)
        expect(Chunk.toArray(got).map((e) => e.seq)).toEqual(
          Array.from({ length: total - fromSeq }, (_, i) => fromSeq + i + 1)
        )
      }).pipe(Effect.withRandom(Random.make(seed))),
    { fastCheck: { numRuns: 200 } }
  )

  it.effect("a turn written right after the replay read still arrives, live", () =>
    Effect.gen(function*() {
      const memory = yield* MemoryStore.makeMemory
      const session = newSession("org_a")
      yield* memory.createSession(session)
      // The racing writer persists and publishes right after the subscription's store read: its turn is not in the
      // read, so only the live queue has it. Joining the hub before reading is what catches it.
      let racing: Effect.Effect<void, PersistenceFailed> = Effect.void
      const store: typeof memory = {
        ...memory,
        turns: (orgId, sessionId, afterSeq) => {
          const writer = racing
          racing = Effect.void
          return memory.turns(orgId, sessionId, afterSeq).pipe(Effect.zipLeft(writer))
        }
      }
      const events = yield* LiveEvents.make.pipe(Effect.provideService(SessionStore, store))
      const append = (text: string) =>
        Effect.flatMap(
          memory.appendTurn(session.id, { kind: "user", text }, 0),
          (turn) => events.publish({ _tag: "turn", sessionId: turn.sessionId, seq: turn.seq, turn })
        )
      yield* append("before subscribing")
      racing = append("during the read")
      const got = yield* events.subscribe("org_a", session.id, 0).pipe(
        Stream.takeUntil((e) => e.seq === 2),
        Stream.runCollect
      )
      expect(seqs(got)).toEqual(["turn:1", "turn:2"])
    }))

  it.effect("another org's subscriber gets nothing, stored or live", () =>
    Effect.gen(function*() {
      const { append, events, session } = yield* setup
      yield* append("secret")
      const got = yield* Stream.runCollect(events.subscribe("org_b", session.id, 0))
      expect(Chunk.toArray(got)).toEqual([])
      expect(yield* events.liveSessions).toBe(0)
      yield* append("still secret")
      expect(Chunk.toArray(yield* Stream.runCollect(events.subscribe("org_b", session.id, 0)))).toEqual([])
    }))

  it.effect("a session nobody watches has no hub, and the hub goes with the last subscriber", () =>
    Effect.gen(function*() {
      const { append, events, session } = yield* setup
      yield* append("unwatched")
      expect(yield* events.liveSessions).toBe(0)

      const ready = yield* Deferred.make<void>()
      const one = yield* collect(events.subscribe("org_a", session.id, 0), 2, ready, 1)
      yield* Deferred.await(ready)
      const readyTwo = yield* Deferred.make<void>()
      const two = yield* collect(events.subscribe("org_a", session.id, 0), 3, readyTwo, 1)
      yield* Deferred.await(readyTwo)
      expect(yield* events.liveSessions).toBe(1)

      yield* append("second")
      yield* Fiber.join(one)
      expect(yield* events.liveSessions).toBe(1)
      yield* append("third")
      expect(seqs(yield* Fiber.join(two))).toEqual(["turn:1", "turn:2", "turn:3"])
      expect(yield* events.liveSessions).toBe(0)
    }))

  it.scoped("a pulled subscription gives the replay, then what was published meanwhile as one batch, in order", () =>
    Effect.gen(function*() {
      const { append, events, persist, publishTurn, session } = yield* setup
      yield* append("first")
      const subscription = yield* events.open("org_a", session.id, 0)
      expect(seqs(yield* subscription.next)).toEqual(["turn:1"])
      // Published out of order (two writers between persist and publish), plus a live-only event: one pull.
      const second = yield* persist("second")
      const third = yield* persist("third")
      yield* publishTurn(third)
      yield* events.publish({ _tag: "delta", sessionId: session.id, seq: 3, text: "x" })
      yield* publishTurn(second)
      expect(seqs(yield* subscription.next)).toEqual(["turn:2", "turn:3", "delta:3"])
      // Nothing ready: the pull waits for the next publish.
      const waiting = yield* Effect.fork(subscription.next)
      yield* append("fourth")
      expect(seqs(yield* Fiber.join(waiting))).toEqual(["turn:4"])
      expect(yield* events.liveSessions).toBe(1)
    }))

  it.effect("a subscription's scope closing leaves the hub; publishing afterwards reaches nobody", () =>
    Effect.gen(function*() {
      const { append, events, session } = yield* setup
      yield* append("before")
      const replayed = yield* Effect.scoped(Effect.flatMap(events.open("org_a", session.id, 0), (s) => s.next))
      expect(seqs(replayed)).toEqual(["turn:1"])
      expect(yield* events.liveSessions).toBe(0)
      yield* append("after")
    }))

  it.effect("layer provides SessionEvents over the store in context", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const events = yield* SessionEvents
      yield* store.createSession(newSession("org_a", "ses_9"))
      const turn = yield* store.appendTurn(SessionId.make("ses_9"), { kind: "user", text: "hi" }, 0)
      yield* events.publish({ _tag: "turn", sessionId: turn.sessionId, seq: turn.seq, turn })
      const got = yield* events.subscribe("org_a", "ses_9", 0).pipe(Stream.take(1), Stream.runCollect)
      expect(seqs(got)).toEqual(["turn:1"])
    }).pipe(Effect.provide(LiveEvents.layer), Effect.provide(MemoryStore.layerMemory)))
})
