/**
 * Tool notices on a session's stream: the wiring turns them into live-only `tool_progress` / `tool_log` events at
 * the session's last published sequence (the SSE resume point), drops them once the burst reported, and the SSE
 * framing carries them like `tool_start`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Context, Deferred, Effect, Fiber, Layer, Stream } from "effect"
import { AgentId, SessionId } from "../../src/domain/Ids.js"
import { Principal } from "../../src/domain/Principal.js"
import { Scope } from "../../src/domain/Scope.js"
import { initialState } from "../../src/domain/Session.js"
import { SessionEvents } from "../../src/events/SessionEvents.js"
import * as Sse from "../../src/server/Sse.js"
import * as Wiring from "../../src/server/Wiring.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import { ToolNotices } from "../../src/tools/ToolNotices.js"

const session = {
  id: SessionId.make("ses_1"),
  principal: new Principal({ orgId: "org_a", userId: "u1" }),
  scope: Scope.make("incident:1"),
  agentId: AgentId.make("triage"),
  agentVersion: 1,
  createdAt: 0,
  updatedAt: 0,
  state: initialState
}

const at = { sessionId: "ses_1", callId: "call_1", name: "search" }

describe("Wiring.events", () => {
  it.scoped("publishes tool notices at the session's last sequence, and none after its report", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(Wiring.events.pipe(Layer.provideMerge(MemoryStore.layerMemory)))
      const store = Context.get(context, SessionStore)
      const events = Context.get(context, SessionEvents)
      const notices = Context.get(context, ToolNotices)
      yield* store.createSession(session)
      // Before any event of a burst: nobody follows a live call there, the notice is dropped.
      yield* notices.notify({ _tag: "log", ...at, level: "info", message: "too early" })
      const turn = yield* store.appendTurn(session.id, { kind: "user", text: "go" }, 0)
      yield* events.publish({ _tag: "turn", sessionId: session.id, seq: turn.seq, turn })

      const ready = yield* Deferred.make<void>()
      const fiber = yield* events.subscribe("org_a", session.id, 0).pipe(
        Stream.tap((e) => (e._tag === "turn" ? Deferred.succeed(ready, undefined) : Effect.void)),
        Stream.take(5),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(ready)
      yield* notices.notify({ _tag: "progress", ...at, progress: 2, total: 3, message: undefined })
      yield* notices.notify({ _tag: "log", ...at, level: "warning", message: "slow upstream" })
      yield* events.publish({
        _tag: "report",
        sessionId: session.id,
        seq: 1,
        report: { exitReason: "completed", source: "fallback", data: {} }
      })
      yield* notices.notify({ _tag: "log", ...at, level: "info", message: "too late" })
      yield* events.publish({ _tag: "delta", sessionId: session.id, seq: 1, text: "end" })

      const got = Chunk.toArray(yield* Fiber.join(fiber))
      expect(got.map((e) => `${e._tag}:${e.seq}`)).toEqual([
        "turn:1",
        "tool_progress:1",
        "tool_log:1",
        "report:1",
        "delta:1"
      ])
      expect(got[1]).toEqual({
        _tag: "tool_progress",
        sessionId: "ses_1",
        seq: 1,
        callId: "call_1",
        name: "search",
        progress: 2,
        total: 3
      })
      expect(got[2]).toEqual({
        _tag: "tool_log",
        sessionId: "ses_1",
        seq: 1,
        callId: "call_1",
        name: "search",
        level: "warning",
        message: "slow upstream"
      })
      expect(Sse.frame(got[1]!)).toBe(
        `id: 1\nevent: tool_progress\ndata: ${JSON.stringify(got[1])}\n\n`
      )
    }))
})
