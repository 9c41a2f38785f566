/**
 * The pairing invariant across writers (issue 46): a follow-up taken by a live actor after calls another writer left
 * without results (a burst cut on another node, a stop that landed after the assistant turn was stored) closes them
 * first, in the same write; a transcript stored broken before that is repaired when loaded, and the repair is logged
 * with the session id. Time is the TestClock's.
 */
import { SqlClient } from "@effect/sql"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Logger, Stream, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import type { TurnEntry } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { toStream } from "../../src/events/SessionEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Embedded from "../../src/store/Embedded.js"
import { makeMemory } from "../../src/store/MemoryStore.js"
import * as Pairing from "../../src/store/Pairing.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as SqlStore from "../../src/store/SqlStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as Tools from "../support/tools.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })

const agent = {
  id: "triage",
  version: 1,
  name: "Triage",
  instructions: "Find the cause of the incident.",
  tools: ["echo"],
  finalize: "transcript" as const
}

const runtime = (store: SessionStore["Type"], model: Scripted.Scripted) =>
  Corral.layer().pipe(
    Layer.provide(Layer.mergeAll(
      LiveEvents.layer,
      ToolRegistry.layer([Tools.echo]),
      Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
    )),
    Layer.provide(Layer.succeed(SessionStore, store))
  )

const landed = (c: Corral["Type"], id: string, bursts: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const v = yield* c.get(alice, id)
      if (v.status !== "running" && v.exitReason !== undefined && v.bursts >= bursts) return v
      yield* TestClock.adjust("100 millis")
    }
    return yield* Effect.dieMessage(`session ${id} never landed`)
  })

const openCalls: TurnEntry = {
  kind: "assistant",
  text: "",
  toolCalls: [{ id: "call_cut", name: "echo", arguments: `{"text":"x"}` }],
  finishReason: "tool_calls"
}

/** Indexes of entries that break the pairing (anything but results right after an assistant turn with calls). */
const breaks = (entries: ReadonlyArray<TurnEntry>) =>
  entries.flatMap((entry, i) => i > 0 && Pairing.opens(entries[i - 1]) && Pairing.breaks(entry) ? [i] : [])

describe("the pairing invariant across writers", () => {
  it.effect("a live actor's follow-up after calls another writer left open closes them first, and the model sees them paired", () =>
    Effect.gen(function*() {
      const store = yield* makeMemory
      const model = Scripted.make({
        script: [Scripted.text("first answer"), Scripted.delay(5_000, Scripted.text("second answer"))]
      })
      yield* Effect.gen(function*() {
        const c = yield* Corral
        yield* c.publishAgent(alice, agent)
        const v = yield* c.start(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
        yield* landed(c, v.id, 1)
        // Another writer (a burst cut by a stop, on this node or another) stored calls the live actor never saw.
        yield* store.appendTurn(v.id, openCalls, 1)
        // A follower from there on sees the turn that closes them, then the follow-up's turns, each once, in order.
        const subscription = yield* c.openEvents(alice, v.id, 3)
        const seen: Array<SessionEvent> = []
        const follower = yield* Effect.fork(
          Stream.runForEach(
            toStream(Effect.succeed(subscription)).pipe(Stream.takeUntil((e) => e._tag === "report")),
            (e) => Effect.sync(() => void seen.push(e))
          )
        )
        yield* c.post(alice, v.id, "and now?")
        // While the model thinks, the follower has the closing turn and the follow-up already, not at the next turn.
        yield* TestClock.adjust("1 second")
        expect(seen.flatMap((e) => e._tag === "turn" ? [e.seq] : [])).toEqual([4, 5])
        const done = yield* landed(c, v.id, 2)
        expect(done.exitReason).toBe("completed")
        yield* Fiber.join(follower)
        expect(seen.flatMap((e) => e._tag === "turn" ? [[e.seq, e.turn.entry.kind]] : [])).toEqual([
          [4, "tool_results"],
          [5, "user"],
          [6, "assistant"]
        ])
        expect(seen.filter((e) => !["turn", "delta", "exit", "report", "tool_progress"].includes(e._tag))).toEqual([])
        const turns = yield* c.turns(alice, v.id)
        expect(turns.map((t) => t.entry.kind)).toEqual([
          "user",
          "assistant",
          "assistant",
          "tool_results",
          "user",
          "assistant"
        ])
        expect(turns[3]!.entry).toMatchObject({ results: [{ callId: "call_cut", status: "unknown_outcome" }] })
        expect(breaks(turns.map((t) => t.entry))).toEqual([])
        // The second burst's request was paired too (a provider refuses unpaired calls with a 400).
        const second = model.requests[1]!
        expect(breaks(second.messages)).toEqual([])
        expect(second.messages.map((m) => m.kind)).toEqual(["user", "assistant", "assistant", "tool_results", "user"])
      }).pipe(Effect.scoped, Effect.provide(runtime(store, model)))
    }))

  it.live(
    "a transcript stored broken mid-way is repaired when loaded, and the repair is logged with the session",
    () =>
      Effect.gen(function*() {
        // Embedded PGlite: only a SQL store can be given the rows a previous version wrote (raw INSERTs).
        const context = yield* Layer.build(
          SqlStore.layer({ lanes: 1 }).pipe(Layer.provideMerge(Embedded.layerEmbedded()))
        )
        const store = Context.get(context, SessionStore)
        const sql = Context.get(context, SqlClient.SqlClient)
        const logs: Array<string> = []
        const logger = Logger.make(({ message }) => {
          logs.push(String(Array.isArray(message) ? message.join(" ") : message))
        })
        const model = Scripted.make({ script: [Scripted.text("first"), Scripted.text("second")] })
        const first = yield* Effect.gen(function*() {
          const c = yield* Corral
          yield* c.publishAgent(alice, agent)
          return yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why?" })
        }).pipe(Effect.provide(runtime(store, model)))
        // What a previous version stored: a user turn right after calls with no results (seq 3, then 4).
        const row = (seq: number, entry: TurnEntry) =>
          sql`INSERT INTO turns (session_id, seq, kind, payload, created_at)
          VALUES (${first.id}, ${seq}, ${entry.kind}, ${JSON.stringify(entry)}::json, 0)`
        yield* row(3, openCalls)
        yield* row(4, { kind: "user", text: "follow-up after a stop" })
        yield* row(5, { kind: "assistant", text: "answered", toolCalls: [], finishReason: "stop" })
        yield* sql`UPDATE session_counters SET last_seq = 5 WHERE session_id = ${first.id}`
        // A new runtime on the same store (another node, or a restart): the session is loaded from it.
        yield* Effect.gen(function*() {
          const c = yield* Corral
          const v = yield* c.continue(alice, first.id, "again")
          expect(v.exitReason).toBe("completed")
        }).pipe(Effect.provide(runtime(store, model)), Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
        const second = model.requests[1]!
        expect(breaks(second.messages)).toEqual([])
        expect(second.messages.map((m) => m.kind)).toEqual([
          "user",
          "assistant",
          "assistant",
          "tool_results",
          "user",
          "assistant",
          "user"
        ])
        expect(logs.some((line) => line.includes(`session ${first.id}`) && line.includes("turn(s) 3 "))).toBe(true)
        // The stored rows keep their numbers: the repair is the model's view, and the log.
        expect((yield* store.turns(alice.orgId, first.id)).map((t) => t.entry.kind)).toEqual([
          "user",
          "assistant",
          "assistant",
          "user",
          "assistant",
          "user",
          "assistant"
        ])
      }).pipe(Effect.scoped),
    60_000
  )
})
