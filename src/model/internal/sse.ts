/**
 * Server-sent events, parsed incrementally from a byte stream: both provider wire formats stream over SSE, and a
 * reply can split anywhere (inside a line, inside a UTF-8 character), so the parser keeps state across chunks.
 * Follows the WHATWG event-stream rules that matter to model APIs: `\n`, `\r\n` or `\r` line ends, `:` comments,
 * one optional space after the colon, multi-line `data` joined with `\n`, an event dispatched on a blank line.
 */
import { Stream } from "effect"

/** One dispatched event: its `event` name (default `message`) and its `data` lines joined with `\n`. */
export interface SseEvent {
  readonly event: string
  readonly data: string
}

/** An incremental parser: feed text as it arrives, collect the events each chunk completed. */
export interface SseParser {
  /** Parses `text` (any fragment of the stream); returns the events it completed, in order. */
  readonly feed: (text: string) => ReadonlyArray<SseEvent>
  /** Ends the stream: returns the last event if the stream ended without its blank line. */
  readonly end: () => ReadonlyArray<SseEvent>
}

/** A fresh parser. Never throws. */
export const makeParser = (): SseParser => {
  let buffer = ""
  let event = ""
  let data: Array<string> = []
  // A chunk ending in `\r` may be the first half of `\r\n`: the `\n` must not become an extra blank line.
  let skipLeadingNewline = false

  const dispatch = (out: Array<SseEvent>) => {
    if (data.length > 0) out.push({ event: event === "" ? "message" : event, data: data.join("\n") })
    event = ""
    data = []
  }

  const line = (text: string, out: Array<SseEvent>) => {
    if (text === "") return dispatch(out)
    if (text.startsWith(":")) return
    const colon = text.indexOf(":")
    const field = colon === -1 ? text : text.slice(0, colon)
    let value = colon === -1 ? "" : text.slice(colon + 1)
    if (value.startsWith(" ")) value = value.slice(1)
    if (field === "data") data.push(value)
    else if (field === "event") event = value
  }

  return {
    feed: (text) => {
      const out: Array<SseEvent> = []
      buffer += text
      if (skipLeadingNewline && buffer.startsWith("\n")) buffer = buffer.slice(1)
      skipLeadingNewline = false
      let start = 0
      for (let i = 0; i < buffer.length; i++) {
        const char = buffer[i]
        if (char !== "\n" && char !== "\r") continue
        line(buffer.slice(start, i), out)
        if (char === "\r") {
          if (i + 1 === buffer.length) skipLeadingNewline = true
          else if (buffer[i + 1] === "\n") i++
        }
        start = i + 1
      }
      buffer = buffer.slice(start)
      return out
    },
    end: () => {
      const out: Array<SseEvent> = []
      if (buffer !== "") line(buffer, out)
      buffer = ""
      dispatch(out)
      return out
    }
  }
}

/** The events of an SSE byte stream, decoded as UTF-8 across chunk boundaries. Fails as `bytes` fails. */
export const events = <E, R>(bytes: Stream.Stream<Uint8Array, E, R>): Stream.Stream<SseEvent, E, R> =>
  Stream.suspend(() => {
    const parser = makeParser()
    return bytes.pipe(
      Stream.decodeText(),
      Stream.mapConcat((text) => parser.feed(text)),
      Stream.concat(Stream.suspend(() => Stream.fromIterable(parser.end())))
    )
  })
