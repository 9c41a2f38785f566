/**
 * The sweep's watch for gained shards (cluster/Sweep `watch`, issue 46): a message accepted for a session whose
 * owner stopped — refused by the stopping owner, every wake sent to it lost — runs on the next owner as soon as that
 * runner holds the shard, whatever the message's age, with the periodic sweep an hour away. Ownership is a function
 * the test changes; time is the TestClock's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Option, TestClock } from "effect"
import * as Sweep from "../../src/cluster/Sweep.js"
import type * as Supervisor from "../../src/session/Supervisor.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import { newOrg, newSession } from "../store/StoreFixtures.js"

describe("the sweep's watch for gained shards", () => {
  it.effect("wakes a session of a shard this runner just took at once, and nothing of the shards it already held", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const org = newOrg()
      const moved = newSession(org)
      const kept = newSession(org)
      for (const session of [moved, kept]) {
        yield* store.accept({
          session,
          message: { id: `msg_${session.id}`, sessionId: session.id, orgId: org, kind: "run", text: "?", acceptedAt: 0 }
        })
      }
      const shardOf = new Map<string, string>([[moved.id, "s2"], [kept.id, "s1"]])
      let owned: ReadonlySet<string> = new Set(["s1"])
      const woken: Array<string> = []
      const local = { peek: () => Option.none() } as unknown as Supervisor.Service
      yield* Effect.forkScoped(Sweep.watch({
        local,
        wake: (sessionId) => Effect.sync(() => void woken.push(sessionId)),
        owns: (sessionId) => owned.has(shardOf.get(sessionId)!),
        every: "1 hour",
        shards: { owned: () => owned, of: (sessionId) => shardOf.get(sessionId)! }
      }))
      // The first look notes what is held; the sweep, an hour away, takes what waited there before.
      yield* TestClock.adjust(Sweep.watchEvery)
      expect(woken).toEqual([])
      // The stopping node hands shard s2 over: its waiting message is woken within one look.
      owned = new Set(["s1", "s2"])
      yield* TestClock.adjust(Sweep.watchEvery)
      expect(woken).toEqual([moved.id])
      yield* TestClock.adjust(Sweep.watchEvery)
      expect(woken).toEqual([moved.id])
    }).pipe(Effect.scoped, Effect.provide(MemoryStore.layerMemory)))
})
