import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { SessionId } from "../../src/domain/Ids.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import { sessionStoreContract } from "./SessionStoreContract.js"

sessionStoreContract("memory", MemoryStore.layerMemory)

describe("MemoryStore", () => {
  it.effect("starts empty on every build of the layer", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      expect(yield* store.listRunning()).toEqual([])
      expect(yield* store.listAgents("org_a")).toEqual([])
      expect(yield* store.turns("org_a", SessionId.make("ses_1"))).toEqual([])
    }).pipe(Effect.provide(MemoryStore.layerMemory)))
})
