/**
 * The SSE endpoint: event names and ids, resume with `Last-Event-ID` or `?after=` never losing or repeating a turn
 * (across a storm of reconnects during a live burst, and from every point of a landed transcript), the session
 * snapshot, keep-alive comments.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import * as Server from "../../src/server/Server.js"
import * as Sse from "../../src/server/Sse.js"
import type { SseEvent } from "../support/ServerHarness.js"
import { baseUrl, client, eventually, readSse, settings } from "../support/ServerHarness.js"

const turnSeqs = (events: ReadonlyArray<SseEvent>): Array<number> =>
  events.filter((e) => e.event === "turn" || e.event === "notice").map((e) => e.id ?? -1)

const startDemo = (scope: string, prompt = "Why is checkout failing?") =>
  Effect.gen(function*() {
    const api = yield* client()
    const accepted = yield* api.sessions.startSession({ payload: { agentId: "demo", scope, prompt }, urlParams: {} })
    if (!("sessionId" in accepted)) throw new Error("expected 202")
    return accepted.sessionId
  })

describe("Sse framing", () => {
  it("names persisted notices `notice`, other turns `turn`, and ids every event with its sequence", () => {
    const notice: SessionEvent = {
      _tag: "turn",
      sessionId: "s",
      seq: 7,
      turn: { sessionId: "s", seq: 7, at: 1, entry: { kind: "notice", rail: "RepeatGuard", text: "stop repeating" } }
    }
    expect(Sse.frame(notice)).toMatch(/^id: 7\nevent: notice\ndata: \{.*"RepeatGuard".*\}\n\n$/)
    expect(Sse.frame({ _tag: "delta", sessionId: "s", seq: 3, text: "a\nb" })).toBe(
      "id: 3\nevent: delta\ndata: {\"_tag\":\"delta\",\"sessionId\":\"s\",\"seq\":3,\"text\":\"a\\nb\"}\n\n"
    )
  })
})

layer(Server.layer(settings({ demo: { enabled: true, delayMs: 60 } })), { excludeTestServices: true })(
  "SSE events",
  (it) => {
    it.effect("delivers every turn exactly once across a storm of reconnects during a live burst", () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const id = yield* startDemo("incident:SSE-1")
        const events = `${url}/v1/sessions/${id}/events`
        // One client follows the whole burst on one connection, while another reconnects after every turn.
        const follower = yield* Effect.fork(readSse(events, (seen) => seen.some((e) => e.event === "report")))
        const all: Array<SseEvent> = []
        let lastId = 0
        let connections = 0
        // Each connection takes ONE new turn (or the report) and hangs up; the next resumes from the last id seen.
        const api = yield* client()
        // A burst that lands between two connections sends its report live only: the next connection sees a landed
        // `session` snapshot instead, and then must still replay every turn after its resume point.
        const landedSnapshot = (e: SseEvent) =>
          e.event === "session" && (e.data as { status?: string; exitReason?: string }).exitReason !== undefined &&
          (e.data as { status?: string }).status !== "running"
        let landed = false
        while (!landed && !all.some((e) => e.event === "report") && connections < 200) {
          connections++
          const got = yield* readSse(
            events,
            (seen) => seen.some((e) => e.event === "turn" || e.event === "report" || landedSnapshot(e)),
            { headers: { "last-event-id": String(lastId) } }
          )
          if (!got.some((e) => e.event === "turn" || e.event === "report") && got.some(landedSnapshot)) {
            landed = true
            const remaining = (yield* api.sessions.turns({ path: { id }, urlParams: { after: lastId } })).turns.length
            const tail = remaining === 0 ? [] : yield* readSse(
              events,
              (seen) => seen.filter((e) => e.event === "turn" || e.event === "notice").length >= remaining,
              { headers: { "last-event-id": String(lastId) } }
            )
            all.push(...tail)
            continue
          }
          for (const e of got) if (e.id !== undefined) lastId = e.id
          all.push(...got)
        }
        const stored = (yield* api.sessions.turns({ path: { id }, urlParams: {} })).turns.map((t) => t.seq)
        expect(turnSeqs(all)).toEqual(stored)
        expect(stored).toEqual(stored.map((_, i) => i + 1))
        expect(connections).toBeGreaterThan(3)
        const followed = yield* Fiber.join(follower)
        expect(turnSeqs(followed)).toEqual(stored)
        expect(followed.some((e) => e.event === "tool_start")).toBe(true)
        expect(followed.some((e) => e.event === "delta")).toBe(true)
        expect(followed.filter((e) => e.event === "exit").map((e) => (e.data as { reason: string }).reason)).toEqual([
          "completed"
        ])
        // Every event carries an id: a client resuming after a delta or a tool_start loses nothing.
        expect(followed.filter((e) => e.event !== "session").every((e) => typeof e.id === "number")).toBe(true)
      }))

    it.effect("resumes from every point of a landed transcript, by header or by ?after=, with a snapshot", () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const api = yield* client()
        const id = yield* startDemo("incident:SSE-2")
        yield* eventually(
          "the session to land",
          Effect.map(api.sessions.getSession({ path: { id } }), (v) => v.status === "idle" ? v : undefined)
        )
        const total = (yield* api.sessions.turns({ path: { id }, urlParams: {} })).turns.length
        for (let from = 0; from <= total; from++) {
          const expected = Array.from({ length: total - from }, (_, i) => from + i + 1)
          const done = (seen: ReadonlyArray<SseEvent>) =>
            seen.some((e) => e.event === "session") && (turnSeqs(seen).at(-1) ?? from) === total
          const byHeader = yield* readSse(`${url}/v1/sessions/${id}/events`, done, {
            headers: { "last-event-id": String(from) }
          })
          expect(turnSeqs(byHeader)).toEqual(expected)
          const snapshot = byHeader.find((e) => e.event === "session")?.data as { exitReason?: string }
          expect(snapshot.exitReason).toBe("completed")
          const byQuery = yield* readSse(`${url}/v1/sessions/${id}/events?after=${from}`, done)
          expect(turnSeqs(byQuery)).toEqual(expected)
        }
      }))

    it.effect("sends keep-alive comments on an idle stream and refuses a malformed Last-Event-ID", () =>
      Effect.gen(function*() {
        const url = yield* baseUrl
        const api = yield* client()
        const id = yield* startDemo("incident:SSE-3")
        yield* eventually(
          "the session to land",
          Effect.map(api.sessions.getSession({ path: { id } }), (v) => v.status === "idle" ? v : undefined)
        )
        const text = yield* Effect.promise(async () => {
          const controller = new AbortController()
          const response = await fetch(`${url}/v1/sessions/${id}/events?after=999`, { signal: controller.signal })
          expect(response.headers.get("content-type")).toContain("text/event-stream")
          const reader = response.body!.getReader()
          let seen = ""
          while (!seen.includes(": keep-alive")) {
            const { done, value } = await reader.read()
            if (done) break
            seen += new TextDecoder().decode(value)
          }
          controller.abort()
          return seen
        })
        expect(text).toContain(": keep-alive")
        const bad = yield* Effect.promise(() =>
          fetch(`${url}/v1/sessions/${id}/events`, { headers: { "last-event-id": "abc" } })
        )
        expect(bad.status).toBe(400)
      }))
  }
)
