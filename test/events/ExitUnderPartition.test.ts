/**
 * A follower waiting for `exit` while the database is partitioned away (issue 42, item 5): Corral over Postgres
 * through a test-owned TCP proxy (test/support/TcpProxy.ts), sessions mid-burst, then the proxy blackholes every
 * connection (a partition: nothing answered, nothing closed) and stays that way. Each stopped session's followers
 * must hear how the burst ended — `error` (`store_unavailable`), then `exit` (`crashed`) and `report` — while the
 * partition still holds, and a follower that asked to end at the landing (`until: "landed"`) must end. Before, the
 * `exit` went out only once the store took the landing, so a follower waited as long as the partition lasted.
 *
 * Wall time because the sockets are real; the persistence timeout is 1 s so the test stays short, and every wait has
 * a bound. Skipped without CORRAL_TEST_DATABASE_URL (the embedded database has no network to cut).
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Stream } from "effect"
import { Corral } from "../../src/Corral.js"
import type { ModelReply } from "../../src/domain/Message.js"
import { Principal } from "../../src/domain/Principal.js"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import { Usage } from "../../src/domain/Usage.js"
import { toStream } from "../../src/events/SessionEvents.js"
import type { ModelRequest } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import { skipReason, testDatabaseUrl } from "../store/PostgresFixture.js"
import * as Partition from "../support/Partition.js"
import { eventually } from "../support/ServerHarness.js"

const TIMEOUT_MS = 1_000
/** The persistence timeout, the landing, the pool's own bound, a loaded machine. */
const EXIT_WITHIN_MS = TIMEOUT_MS + 6_000
const SESSIONS = 4

const principal = new Principal({ orgId: "org_partition", userId: "ops" })

const slow = ToolRegistry.define<{ q: string }>({
  name: "slow",
  description: "Takes 200 ms of real time.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  run: (args) => Effect.as(Effect.sleep("200 millis"), `slow:${args.q}`)
})

const usage = new Usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 })

/** Calls `slow` for ever (the burst is still running when the partition starts). */
const model = Scripted.fromFunction({
  name: "partition",
  model: "partition-model",
  reply: (request: ModelRequest): ModelReply => {
    const n = request.messages.length
    return {
      text: "",
      toolCalls: [{ id: `c_${n}`, name: "slow", arguments: JSON.stringify({ q: String(n) }) }],
      finishReason: "tool_calls",
      usage,
      model: "partition-model"
    }
  }
})

const agent = {
  id: "partition",
  version: 1,
  name: "Partition",
  instructions: "Call slow.",
  tools: ["slow"],
  finalize: "transcript" as const
}

describe.skipIf(testDatabaseUrl === undefined)(
  `a follower under a database partition (${testDatabaseUrl === undefined ? skipReason : "Postgres via TcpProxy"})`,
  () => {
    it.live(
      "hears exit (crashed) and the report while the partition holds, and an until-landed follower ends",
      () =>
        Effect.gen(function*() {
          const { proxy, runtime } = yield* Partition.throughProxy(testDatabaseUrl!, {
            tools: [slow],
            model,
            timeoutMs: TIMEOUT_MS,
            maxConnections: 4
          })
          yield* Effect.gen(function*() {
            const c = yield* Corral
            yield* c.publishAgent(principal, agent)
            const seen = new Map<string, Array<SessionEvent>>()
            const untilLanded: Array<Fiber.RuntimeFiber<Chunk.Chunk<SessionEvent>, unknown>> = []
            const ids: Array<string> = []
            for (let i = 0; i < SESSIONS; i++) {
              const v = yield* c.start(principal, { agentId: "partition", scope: `svc:${i}`, prompt: `check ${i}` })
              ids.push(v.id)
              seen.set(v.id, [])
              yield* Effect.forkScoped(
                c.events(principal, v.id).pipe(
                  Stream.runForEach((e) => Effect.sync(() => seen.get(v.id)!.push(e))),
                  Effect.ignore
                )
              )
            }
            yield* eventually(
              "every session to be mid-burst",
              Effect.sync(() =>
                ids.every((id) => seen.get(id)!.filter((e) => e._tag === "turn").length >= 3) ? true : undefined
              ),
              "30 seconds"
            )
            // Followers that end at the landing, subscribed before the cut (opening a subscription reads the store).
            for (const id of ids) {
              const subscription = yield* c.openEvents(principal, id, { until: "landed" })
              untilLanded.push(yield* Effect.forkScoped(Stream.runCollect(toStream(Effect.succeed(subscription)))))
            }
            const cut = Date.now()
            yield* proxy.set("blackhole")
            const heard = yield* eventually(
              "every session's follower to hear exit",
              Effect.sync(() =>
                ids.every((id) => seen.get(id)!.some((e) => e._tag === "exit")) ? Date.now() - cut : undefined
              ),
              "30 seconds"
            )
            expect(heard, "ms from the cut until every follower heard exit").toBeLessThan(EXIT_WITHIN_MS)
            // Heard while the partition still holds: nothing of it came from the store.
            expect(proxy.mode()).toBe("blackhole")
            for (const id of ids) {
              const events = seen.get(id)!
              const tags = events.map((e) => e._tag).filter((t) => t === "error" || t === "exit" || t === "report")
              expect(tags, `session ${id}: error, then exit and report once`).toEqual(["error", "exit", "report"])
              expect(events.find((e) => e._tag === "error")).toMatchObject({ code: "store_unavailable" })
              expect(events.find((e) => e._tag === "exit")).toMatchObject({ reason: "crashed" })
              expect(events.find((e) => e._tag === "report")).toMatchObject({ report: { exitReason: "crashed" } })
            }
            // The followers that asked to end at the landing have ended, with it.
            for (const fiber of untilLanded) {
              const events = Chunk.toReadonlyArray(
                yield* Fiber.join(fiber).pipe(Effect.timeoutFail({
                  duration: "10 seconds",
                  onTimeout: () => new Error("an until-landed follower did not end under the partition")
                }))
              )
              expect(events.at(-1)).toMatchObject({ _tag: "report", report: { exitReason: "crashed" } })
            }

            // The partition heals: the landing is saved, and the live followers are not told a second time.
            yield* proxy.set("pass", { strand: true })
            for (const id of ids) {
              const landed = yield* eventually(
                `session ${id} to read interrupted once the database is back`,
                Effect.map(
                  Effect.either(c.get(principal, id)),
                  (v) => v._tag === "Right" && v.right.status !== "running" ? v.right : undefined
                ),
                "30 seconds"
              )
              expect(landed).toMatchObject({ status: "interrupted", exitReason: "crashed" })
              expect(seen.get(id)!.filter((e) => e._tag === "exit")).toHaveLength(1)
            }
            // A late follower is replayed the landing from the store.
            const late = yield* Stream.runCollect(c.events(principal, ids[0]!, { until: "landed" }))
            expect(Chunk.toReadonlyArray(late).filter((e) => e._tag === "exit")).toMatchObject([{ reason: "crashed" }])
          }).pipe(Effect.provide(runtime))
        }).pipe(Effect.scoped),
      { timeout: 180_000 }
    )
  }
)
