/**
 * The event store of an MCP HTTP session (resumable streams): replays a stream's events after an id, only that
 * stream's, and stays within its bounds by dropping the oldest events; an id no longer kept is refused, never
 * answered with a partial replay.
 */
import { expect, it } from "@effect/vitest"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import * as EventStore from "../../src/server/mcp/internal/eventStore.js"

const note = (n: number): JSONRPCMessage => ({
  jsonrpc: "2.0",
  method: "notifications/progress",
  params: { progressToken: 1, progress: n }
})

const replay = (store: ReturnType<typeof EventStore.make>, after: string) =>
  Effect.promise(async () => {
    const sent: Array<[string, JSONRPCMessage]> = []
    const stream = await store.replayEventsAfter(after, { send: async (id, message) => void sent.push([id, message]) })
    return { stream, sent }
  })

it.effect("replays the events of one stream after an id, and not the other streams'", () =>
  Effect.gen(function*() {
    const store = EventStore.make()
    const priming = yield* Effect.promise(() => store.storeEvent("a", {} as JSONRPCMessage))
    yield* Effect.promise(() => store.storeEvent("a", note(1)))
    yield* Effect.promise(() => store.storeEvent("b", note(99)))
    yield* Effect.promise(() => store.storeEvent("a", note(2)))
    const { sent, stream } = yield* replay(store, priming)
    expect(stream).toBe("a")
    expect(sent.map(([, m]) => ("params" in m ? m.params?.["progress"] : undefined))).toEqual([1, 2])
    expect(yield* Effect.promise(() => store.getStreamIdForEventId!(priming))).toBe("a")
  }))

it.effect("keeps at most its bounds (oldest dropped first, the newest always kept) and refuses an id it dropped", () =>
  Effect.gen(function*() {
    const store = EventStore.make({ maxEvents: 3, maxBytes: 10_000 })
    const ids: Array<string> = []
    for (let n = 1; n <= 5; n++) ids.push(yield* Effect.promise(() => store.storeEvent("a", note(n))))
    expect(yield* Effect.promise(() => store.getStreamIdForEventId!(ids[0]!))).toBeUndefined()
    const failed = yield* Effect.exit(replay(store, ids[0]!))
    expect(failed._tag).toBe("Failure")
    const { sent } = yield* replay(store, ids[2]!)
    expect(sent.map(([id]) => id)).toEqual([ids[3], ids[4]])
    const tiny = EventStore.make({ maxEvents: 100, maxBytes: 10 })
    const big = yield* Effect.promise(() => tiny.storeEvent("a", note(1)))
    expect(yield* Effect.promise(() => tiny.getStreamIdForEventId!(big))).toBe("a")
  }))
