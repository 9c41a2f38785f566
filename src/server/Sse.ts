/**
 * Sse — a session's events as Server-Sent Events, resumable with `Last-Event-ID` or `?after=`.
 *
 * Each event's `id:` is its sequence (for a turn its own, for live-only events the last persisted turn's), so a
 * client that reconnects with the last id it saw is replayed every persisted turn after it and then follows live:
 * no gap, no repeated turn (the guarantee of `Corral.events`). Persisted notices travel as `event: notice`, other
 * turns as `event: turn`; `tool_start`, `tool_progress`, `tool_log`, `delta`, `error` (the store stopped the burst),
 * `exit` and `report` keep their names.
 *
 * `exit` and `report` are live-only, so a client connecting right after a landing would miss them. Hence the
 * `session` event (no `id:`, so it never moves the resume point): a snapshot of the session taken right after the
 * subscription is known to be live — which is why the replay starts one turn early, so that the first item proves
 * the subscription exists. Keep-alive comments every `keepAliveMs` keep proxies from closing an idle stream; the
 * stream ends when the server drains.
 */
import { Chunk, Effect, Schedule, Schema, Stream } from "effect"
import type { Service as CorralService } from "../Corral.js"
import type { Principal } from "../domain/Principal.js"
import type { SessionView } from "../domain/Session.js"
import { SessionEvent } from "../domain/SessionEvent.js"

const encodeEvent = Schema.encodeSync(SessionEvent)

/** The SSE name of an event. */
export const eventName = (event: SessionEvent): string =>
  event._tag === "turn" && event.turn.entry.kind === "notice" ? "notice" : event._tag

const data = (value: unknown): string =>
  // JSON never contains a raw newline, so one `data:` line carries the whole event.
  `data: ${JSON.stringify(value)}\n\n`

/** One event, framed. */
export const frame = (event: SessionEvent): string => {
  let encoded: unknown
  try {
    encoded = encodeEvent(event)
  } catch {
    encoded = event
  }
  return `id: ${event.seq}\nevent: ${eventName(event)}\n${data(encoded)}`
}

/** A snapshot of the session, framed (no id: it must not move the client's resume point). */
export const snapshot = (view: SessionView): string => `event: session\n${data(view)}`

/** What `stream` needs. */
export interface Options {
  readonly corral: CorralService
  readonly principal: Principal
  readonly sessionId: string
  /** The session as it stands (for the snapshot). */
  readonly current: Effect.Effect<SessionView, unknown>
  /** Resume point: replay persisted turns with a sequence above it. */
  readonly after: number
  readonly keepAliveMs: number
  /** Ends the stream when it completes (the server drains). */
  readonly until: Effect.Effect<void>
}

/**
 * The framed event stream of one session, as UTF-8. Never fails: a store error mid-stream is sent as an `error`
 * event and ends the stream (the client reconnects with its last id).
 */
export const stream = (options: Options): Stream.Stream<Uint8Array> => {
  const { after, corral, principal, sessionId } = options
  let subscribed = false
  // A chunk of events (what was ready when pulled) becomes ONE string, so ONE write: a followed turn's events
  // often arrive together (its turn, a tool start, deltas), and each write is a system call.
  const framed = (events: Chunk.Chunk<SessionEvent>, first: string): Chunk.Chunk<string> => {
    let out = first
    for (const event of events) if (!(event._tag === "turn" && event.seq <= after)) out += frame(event)
    return out === "" ? Chunk.empty() : Chunk.of(out)
  }
  const events = corral.events(principal, sessionId, Math.max(0, after - 1)).pipe(
    Stream.mapChunksEffect((chunk) => {
      if (subscribed) return Effect.succeed(framed(chunk, ""))
      subscribed = true
      return Effect.map(
        Effect.option(options.current),
        (view) => framed(chunk, view._tag === "Some" ? snapshot(view.value) : "")
      )
    }),
    Stream.catchAll((error) =>
      Stream.make(`event: error\n${data({ _tag: error._tag, message: "stream interrupted" })}`)
    )
  )
  const keepAlive = Stream.fromSchedule(Schedule.spaced(options.keepAliveMs)).pipe(Stream.as(": keep-alive\n\n"))
  return Stream.make("retry: 2000\n\n: connected\n\n").pipe(
    Stream.concat(Stream.merge(events, keepAlive, { haltStrategy: "left" })),
    Stream.interruptWhen(options.until),
    Stream.encodeText
  )
}
