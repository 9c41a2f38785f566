/**
 * A database outage during active sessions, for real (issue 12): Corral over Postgres through a test-owned TCP proxy
 * (test/support/TcpProxy.ts), ten sessions mid-burst, then the network between Corral and Postgres hangs (a partition)
 * or resets. Every in-flight session must end visibly — an `error` event on its stream within the persistence timeout
 * and a margin — and once the network is back: read `interrupted` with exit `crashed` and a report, keep a gap-free
 * transcript, continue to a landing with a follow-up, and new sessions must work, all without a restart.
 *
 * Wall time because the sockets are real; the persistence timeout is 1 s here so the test stays short, and every wait
 * has a generous bound. Skipped without CORRAL_TEST_DATABASE_URL (the embedded database has no network to cut).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { Corral } from "../../src/Corral.js"
import type { ModelReply, Turn } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import { Usage } from "../../src/domain/Usage.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import * as Partition from "../support/Partition.js"
import { eventually } from "../support/ServerHarness.js"

const TIMEOUT_MS = 1_000
/** When every in-flight session must have said so: the timeout, the pool's own bound, and a loaded machine. */
const VISIBLE_WITHIN_MS = TIMEOUT_MS + 4_000
const SESSIONS = 10
const TOOL_TURNS = 6

const principal = new Principal({ orgId: "org_outage", userId: "ops" })

const slow = ToolRegistry.define<{ q: string }>({
  name: "slow",
  description: "Takes 300 ms of real time.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  run: (args) => Effect.as(Effect.sleep("300 millis"), `slow:${args.q}`)
})

const usage = new Usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 })
const reply = (fields: Partial<ModelReply>): ModelReply => ({
  text: "",
  toolCalls: [],
  finishReason: "stop",
  usage,
  model: "outage-model",
  ...fields
})

/** Stateless: tool turns until the transcript holds TOOL_TURNS results since the last user message, then an answer. */
const model = Scripted.fromFunction({
  name: "outage",
  model: "outage-model",
  reply: (request: ModelRequest) => {
    let lastUser = request.messages.length - 1
    while (lastUser > 0 && request.messages[lastUser]!.kind !== "user") lastUser--
    const done = request.messages.slice(lastUser).filter((m) => m.kind === "tool_results").length
    if (done >= TOOL_TURNS) return reply({ text: `answered after ${done} tool turns` })
    const tag = `${lastUser}_${done}`
    return reply({
      finishReason: "tool_calls",
      toolCalls: [{ id: `c_${tag}`, name: "slow", arguments: JSON.stringify({ q: tag }) }]
    })
  }
})

const agent = {
  id: "outage",
  version: 1,
  name: "Outage",
  instructions: "Call slow, then answer.",
  tools: ["slow"],
  finalize: "transcript" as const
}

/** Pairing and numbering of a stored transcript: 1..n, and every assistant turn's calls answered by the next turn. */
const wellFormed = (turns: ReadonlyArray<Turn>) => {
  expect(turns.map((t) => t.seq)).toEqual(turns.map((_, i) => i + 1))
  turns.forEach((turn, i) => {
    if (turn.entry.kind !== "assistant" || turn.entry.toolCalls.length === 0) return
    const next = turns[i + 1]?.entry
    expect(next?.kind, `turn ${turn.seq} is answered`).toBe("tool_results")
    if (next?.kind === "tool_results") {
      expect(next.results.map((r) => r.callId)).toEqual(turn.entry.toolCalls.map((c) => c.id))
    }
  })
}

describe.skipIf(testDatabaseUrl === undefined)(
  `a database outage during active sessions (${testDatabaseUrl === undefined ? skipReason : "Postgres via TcpProxy"})`,
  () => {
    for (const fault of ["blackhole", "reset"] as const) {
      it.live(
        `${fault}: every in-flight session ends visibly, lands once the database is back, and resumes`,
        () =>
          Effect.gen(function*() {
            const { proxy, runtime } = yield* Partition.throughProxy(testDatabaseUrl!, {
              tools: [slow],
              model,
              timeoutMs: TIMEOUT_MS,
              maxConnections: 6
            })
            yield* Effect.gen(function*() {
              const c = yield* Corral
              yield* c.publishAgent(principal, agent)
              const seen = new Map<string, Array<SessionEvent>>()
              const ids: Array<string> = []
              for (let i = 0; i < SESSIONS; i++) {
                const v = yield* c.start(principal, { agentId: "outage", scope: `svc:${i}`, prompt: `check ${i}` })
                ids.push(v.id)
                seen.set(v.id, [])
                yield* Effect.forkScoped(
                  c.events(principal, v.id).pipe(
                    Stream.runForEach((e) => Effect.sync(() => seen.get(v.id)!.push(e))),
                    Effect.ignore
                  )
                )
              }
              // Mid-burst: every session has its user turn, an assistant turn and at least one result.
              yield* eventually(
                "every session to be mid-burst",
                Effect.sync(() =>
                  ids.every((id) => seen.get(id)!.filter((e) => e._tag === "turn").length >= 3) ? true : undefined
                ),
                "30 seconds"
              )
              const cut = Date.now()
              yield* proxy.set(fault === "blackhole" ? "blackhole" : "reset")
              if (fault === "reset") yield* proxy.set("refuse")
              const visible = yield* eventually(
                "every in-flight session to get an error event",
                Effect.sync(() =>
                  ids.every((id) =>
                      seen.get(id)!.some((e) => e._tag === "error") ||
                      seen.get(id)!.some((e) => e._tag === "exit")
                    )
                    ? Date.now() - cut
                    : undefined
                ),
                "30 seconds"
              )
              expect(visible, "ms from the cut until every session said so").toBeLessThan(VISIBLE_WITHIN_MS)
              const stopped = ids.filter((id) => seen.get(id)!.some((e) => e._tag === "error"))
              expect(stopped.length, "sessions whose burst the outage stopped").toBeGreaterThan(0)
              for (const id of stopped) {
                expect(seen.get(id)!.find((e) => e._tag === "error")).toMatchObject({ code: "store_unavailable" })
              }

              // The outage lasts a few seconds more, then the network heals (connections held during a partition are
              // stranded for good, as after a failover).
              yield* Effect.sleep("2 seconds")
              yield* proxy.set("pass", { strand: true })
              for (const id of stopped) {
                const landed = yield* eventually(
                  `session ${id} to land once the database is back`,
                  Effect.map(Effect.either(c.get(principal, id)), (v) =>
                    v._tag === "Right" && v.right.status !== "running" ? v.right : undefined),
                  "20 seconds"
                )
                expect(landed.status).toBe("interrupted")
                expect(landed.exitReason).toBe("crashed")
                expect(landed.report?.exitReason).toBe("crashed")
                yield* eventually(
                  `session ${id}'s exit and report events`,
                  Effect.sync(() =>
                    seen.get(id)!.some((e) => e._tag === "report") ? true : undefined
                  ),
                  "10 seconds"
                )
              }
              // Every session resumes with a follow-up; every transcript is gap-free and paired afterwards.
              for (const id of ids) {
                const next = yield* c.continue(principal, id, "the database is back; carry on")
                expect(next.exitReason).toBe("completed")
                wellFormed(yield* c.turns(principal, id))
                const trajectories = yield* c.trajectories(principal, id)
                expect(trajectories.every((t) => t.open === undefined)).toBe(true)
              }
              // New sessions work without a restart.
              const fresh = yield* c.run(principal, { agentId: "outage", scope: "svc:new", prompt: "new one" })
              expect(fresh.exitReason).toBe("completed")
            }).pipe(Effect.provide(runtime))
          }).pipe(Effect.scoped),
        { timeout: 180_000 }
      )
    }
  }
)
