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
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import { Effect, FiberId, Schema } from "effect"
import { Readable } from "node:stream"
import type { Service as CorralService } from "../Corral.js"
import type { PersistenceFailed } from "../domain/Errors.js"
import type { Principal } from "../domain/Principal.js"
import type { SessionView } from "../domain/Session.js"
import { SessionEvent } from "../domain/SessionEvent.js"
import type { Subscription } from "../events/SessionEvents.js"

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
  /** Registers a call that ends the stream (the server drains); returns how to take it back (`Shutdown.onDrain`). */
  readonly onDrain: (end: () => void) => () => void
}

/**
 * The framed event stream of one session, handed to the client's socket. Never fails: a store error mid-stream is
 * sent as an `error` event and ends the stream (the client reconnects with its last id).
 *
 * The body is a Node `Readable` piped to the socket, fed by ONE fiber that pulls the session's events
 * (`Corral.openEvents`): no Stream stages between the events and the socket (a merge with a keep-alive stream, a
 * race with the drain, text encoding, the HTTP layer's own sink, the events' own stages), which cost a followed
 * session about as much server CPU as running it
 * (docs/benchmarks.md at 09f4c1e, "Following a session costs as much as running it"). Keep-alive comments come from a timer;
 * the drain interrupts the fiber (through a callback, `Shutdown.onDrain`), which then ends the body. A client that
 * goes away closes the socket, which destroys the body, which interrupts the fiber. A slow client holds the fiber at
 * its next write until the socket takes more (the session's events wait in its hub, as before).
 *
 * Handed over, not returned: the stream is written to the socket here (`handOver`) and the request's own fiber ends
 * at once, so an open stream holds the feeding fiber and the socket, not also the platform's request fiber with its
 * middleware frames, context and span for the stream's whole life — a large share of the heap with a follower per
 * session (docs/benchmarks.md, "Notes moved from the code"). The feeding
 * fiber is therefore a daemon: it ends with the body (the socket closed, the events ended) or on the drain.
 */
export const response = (
  options: Options,
  headers: Readonly<Record<string, string>>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest> =>
  // Uninterruptible: a body made is always handed over (or destroyed), never left fed by a fiber nobody ends.
  Effect.uninterruptible(Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (request) => Effect.map(body(options), (readable) => handOver(request, readable, headers))
  ))

/** The event stream's body: a `Readable` fed by a daemon fiber (see `response`), ended as described there. */
export const body = (options: Options): Effect.Effect<Readable> =>
  Effect.gen(function*() {
    const { after, corral, principal, sessionId } = options
    // Open while the socket takes more; closed by a write it refused, opened again when it asks for more (`read`).
    const writable = Effect.unsafeMakeLatch(true)
    let ended = false
    const readable = new Readable({ read: () => writable.unsafeOpen() })
    const write = (text: string): Effect.Effect<void> => {
      if (ended || text === "" || readable.push(text)) return Effect.void
      writable.unsafeClose()
      return writable.await
    }
    // A batch of events (what was ready when pulled) becomes ONE string, so ONE write: a followed turn's events
    // often arrive together (its turn, a tool start, deltas), and each write is a system call.
    const framed = (events: ReadonlyArray<SessionEvent>, first: string): string => {
      let out = first
      for (const event of events) if (!(event._tag === "turn" && event.seq <= after)) out += frame(event)
      return out
    }
    const pump = (subscription: Subscription): Effect.Effect<void, PersistenceFailed> => {
      const loop: Effect.Effect<void, PersistenceFailed> = Effect.flatMap(
        subscription.next,
        (events) => events.length === 0 ? Effect.void : Effect.zipRight(write(framed(events, "")), loop)
      )
      // The first batch proves the subscription is live: the snapshot goes with it.
      return Effect.flatMap(subscription.next, (events) =>
        events.length === 0
          ? Effect.void
          : Effect.flatMap(
            Effect.option(options.current),
            (view) => Effect.zipRight(write(framed(events, view._tag === "Some" ? snapshot(view.value) : "")), loop)
          ))
    }
    const run = Effect.scoped(Effect.flatMap(corral.openEvents(principal, sessionId, Math.max(0, after - 1)), pump))
      .pipe(
        Effect.catchAll((error) => write(`event: error\n${data({ _tag: error._tag, message: "stream interrupted" })}`))
      )
    const keepAlive = setInterval(() => {
      if (!ended) readable.push(": keep-alive\n\n")
    }, options.keepAliveMs)
    const end = () => {
      if (ended) return
      ended = true
      clearInterval(keepAlive)
      writable.unsafeOpen()
      readable.push(null)
    }
    readable.push("retry: 2000\n\n: connected\n\n")
    // Interruptible whatever region it was forked from (`response` forks it uninterruptibly): it ends by interruption.
    const pumping = yield* Effect.forkDaemon(Effect.interruptible(Effect.ensuring(run, Effect.sync(end))))
    // The drain interrupts the pump (which then ends the body) through a callback, not a fiber waiting for it.
    const forget = options.onDrain(() => pumping.unsafeInterruptAsFork(FiberId.none))
    pumping.addObserver(forget)
    // Destroyed: the client went away (or the server stopped writing); ended: the events ran out.
    readable.once("close", () => {
      end()
      pumping.unsafeInterruptAsFork(FiberId.none)
    })
    return readable
  })

/**
 * Writes the head and pipes `readable` to the request's socket, then answers the platform with a response it must
 * not write: the socket is marked ended for it (`writableEnded`, the one thing @effect/platform-node reads before
 * writing a response, and before interrupting a request whose socket closed), so the request's fiber ends now
 * instead of awaiting the pipe. Only the platform reads that mark: Node's `pipe` and `end` do not. A socket that
 * closes destroys the body (which ends its fiber).
 */
const handOver = (
  request: HttpServerRequest.HttpServerRequest,
  readable: Readable,
  headers: Readonly<Record<string, string>>
): HttpServerResponse.HttpServerResponse => {
  const socket = NodeHttpServerRequest.toServerResponse(request)
  // A HEAD (routed here as a GET) gets the head from the platform and no stream; a socket already gone, nothing.
  if (request.method === "HEAD" || socket.destroyed || socket.writableEnded) {
    readable.destroy()
    return HttpServerResponse.empty({ status: 200, headers: { ...headers, "content-type": "text/event-stream" } })
  }
  socket.writeHead(200, { ...headers, "content-type": "text/event-stream" })
  socket.once("close", () => readable.destroy())
  readable.pipe(socket)
  Object.defineProperty(socket, "writableEnded", { configurable: true, value: true })
  return HttpServerResponse.empty({ status: 200 })
}
