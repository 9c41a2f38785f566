import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Stream } from "effect"
import * as Sse from "../../../src/model/internal/sse.js"

const encoder = new TextEncoder()

describe("internal/sse", () => {
  it("parses events split anywhere: inside lines, between \\r and \\n, comments, multi-line data", () => {
    const text =
      ": keep-alive\r\nevent: ping\r\ndata: {}\r\n\r\ndata: line one\ndata:line two\n\nevent: done\rdata: [DONE]\r\r"
    for (let size = 1; size <= text.length; size++) {
      const parser = Sse.makeParser()
      const events: Array<Sse.SseEvent> = []
      for (let i = 0; i < text.length; i += size) events.push(...parser.feed(text.slice(i, i + size)))
      events.push(...parser.end())
      expect(events).toEqual([
        { event: "ping", data: "{}" },
        { event: "message", data: "line one\nline two" },
        { event: "done", data: "[DONE]" }
      ])
    }
  })

  it("dispatches a last event that lacks its blank line when the stream ends", () => {
    const parser = Sse.makeParser()
    expect(parser.feed("data: tail")).toEqual([])
    expect(parser.end()).toEqual([{ event: "message", data: "tail" }])
  })

  it.effect("decodes UTF-8 characters split across byte chunks", () =>
    Effect.gen(function*() {
      const bytes = encoder.encode("data: ünïcødé 日本 ✓\n\n")
      const chunks = Array.from(bytes, (byte) => new Uint8Array([byte]))
      const events = yield* Stream.runCollect(Sse.events(Stream.fromIterable(chunks)))
      expect(Chunk.toReadonlyArray(events)).toEqual([{ event: "message", data: "ünïcødé 日本 ✓" }])
    }))
})
