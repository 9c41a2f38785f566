/**
 * The event store of one MCP HTTP session: what the SDK needs to resume an SSE stream (SEP-1699). Every event sent
 * on a stream gets an id; a host whose stream dropped (a cut connection, a proxy that timed it out) reconnects with
 * `GET /mcp` and `Last-Event-ID`, and gets the events after it — among them the answer of a run that landed
 * meanwhile — instead of losing the call.
 *
 * Bounded: it keeps the latest `maxEvents` events and at most `maxBytes` of them (the oldest are dropped first,
 * but never the newest one). A `Last-Event-ID` older than what is kept is refused by the SDK (400: the host starts
 * over), never answered with a partial replay. Memory: 100 sessions × 2 MiB at most.
 */
import type { EventId, EventStore, StreamId } from "@modelcontextprotocol/sdk/server/streamableHttp.js"
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js"

interface Stored {
  readonly id: number
  readonly streamId: StreamId
  readonly message: JSONRPCMessage
  readonly bytes: number
}

/** Bounds of a store. */
export interface Bounds {
  readonly maxEvents: number
  readonly maxBytes: number
}

/** The default bounds: far more than one run's progress notifications and its answer. */
export const defaults: Bounds = { maxEvents: 1_000, maxBytes: 2 * 1024 * 1024 }

/** A bounded in-memory event store. */
export const make = (bounds: Bounds = defaults): EventStore => {
  const events: Array<Stored> = []
  let next = 1
  let bytes = 0
  const find = (eventId: EventId) => {
    const id = Number(eventId)
    return Number.isSafeInteger(id) ? events.find((e) => e.id === id) : undefined
  }
  return {
    storeEvent: (streamId, message) => {
      const stored = { id: next++, streamId, message, bytes: JSON.stringify(message).length }
      events.push(stored)
      bytes += stored.bytes
      while (events.length > 1 && (events.length > bounds.maxEvents || bytes > bounds.maxBytes)) {
        bytes -= events.shift()!.bytes
      }
      return Promise.resolve(String(stored.id))
    },
    getStreamIdForEventId: (eventId) => Promise.resolve(find(eventId)?.streamId),
    replayEventsAfter: async (lastEventId, { send }) => {
      const last = find(lastEventId)
      if (last === undefined) throw new Error(`event ${lastEventId.slice(0, 40)} is not kept`)
      for (const event of events) {
        // The priming event of a stream carries no message (`{}`): nothing to send again.
        if (event.id > last.id && event.streamId === last.streamId && "jsonrpc" in event.message) {
          await send(String(event.id), event.message)
        }
      }
      return last.streamId
    }
  }
}
