/**
 * RequestGate — a bound on how many requests the server works on at once. Up to `maxInFlight` requests are handed
 * to the handler; each one after waits, untouched, in arrival order, and goes in when a request in flight has
 * started its answer (its status line is written: an ordinary answer is then done or nearly, an event stream is
 * then only streaming) or its client has gone.
 *
 * Prevents a storm of requests from being worked on all at once. Started together, 5,000 session starts each held a
 * fiber about sixty frames deep, a decoded body and a store call waiting for a pool connection, all of them at once
 * for the ten seconds it took to accept them (they queue for the same ten connections and the same cores anyway).
 * A request waiting here holds only what Node made for it (its socket and parsed headers; its body stays in the
 * socket): no fiber, no store call, so a burst of starts costs the process far less memory at the same CPU
 * (docs/benchmarks.md, "Notes moved from the code").
 *
 * What is never held: the probes (`/healthz`, `/readyz`, `/metrics` must answer under load: that is what they are
 * for), the MCP endpoint (`/mcp`, bounded by its own `server.mcp.maxSessions`), and a request that waits for a
 * landing (`?wait=true`: it would hold a place for a whole burst, and the follow-ups and approvals that burst may
 * need would queue behind it).
 *
 * Why the bounds sit where they do:
 * - `maxInFlight` (`server.maxRequestsInFlight`, default 256): fewer held less memory but accepted a storm too slowly
 *   (64: 1.46 GB, but a start waited 19 s at the median, and 510 of 5,000 gave up after 30 refusals of a 30 s wait);
 *   more held more (1,024: 2.34 GB) for a faster accept (p99 13 s against 19–24 s at 256). 0 turns the gate off.
 * - `maxQueued` (64 × `maxInFlight`, at least 4,096): a waiting request costs a few KB; beyond this many the client
 *   gets a 503 at once, with `Retry-After`, rather than a wait it could not tell from a hang.
 * - `queueTimeoutMs` (60 s): every wait has a bound. A request still waiting then is answered 503 with `Retry-After`.
 *   It is the store's own ceiling for a call behind a busy database (six persistence timeouts, store/internal/
 *   overload.ts): a request waiting here is not given up on sooner than one already waiting for a connection.
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import * as Metrics from "../telemetry/Metrics.js"

/** A Node request listener. */
export type Handler = (request: IncomingMessage, response: ServerResponse) => void

/** Bounds of `make`. */
export interface Options {
  /** Requests handed to the handler at once; 0 = no bound (every request goes straight in). */
  readonly maxInFlight: number
  /** Requests that may wait; one more is answered 503 at once (default 64 × `maxInFlight`, at least 4,096). */
  readonly maxQueued?: number
  /** How long a request may wait before it is answered 503 (default 60 s). */
  readonly queueTimeoutMs?: number
  /** The timer a wait is bounded with (tests pass their own; default `setTimeout`). */
  readonly timer?: (ms: number, f: () => void) => () => void
}

/** The gate over a handler: `admit` is the server's request listener. */
export interface Gate {
  /** Hands `request` to `handler` now, or when a place frees, or answers 503 (full, waited too long, closing). */
  readonly admit: (request: IncomingMessage, response: ServerResponse, handler: Handler) => void
  /** Requests handed to the handler whose answer has not started. */
  readonly inFlight: () => number
  /** Requests waiting. */
  readonly queued: () => number
  /** Answers every waiting request 503 and every later one too (the server is closing). */
  readonly close: () => void
}

/** How long a request may wait for a place (see the module header). */
export const queueTimeoutMs = 60_000

const realTimer = (ms: number, f: () => void): () => void => {
  const handle = setTimeout(f, ms)
  return () => clearTimeout(handle)
}

/** The paths a request is never held on (see the module header). */
const neverHeld = new Set(["/healthz", "/readyz", "/metrics"])

/** Whether `url` (a request target) is one the gate lets straight in. */
export const bypasses = (url: string): boolean => {
  const query = url.indexOf("?")
  const path = query === -1 ? url : url.slice(0, query)
  if (neverHeld.has(path) || path === "/mcp" || path.startsWith("/mcp/")) return true
  return query !== -1 && new URLSearchParams(url.slice(query + 1)).get("wait") === "true"
}

type Reason = "line_full" | "waited_too_long" | "shutting_down"

const refuse = (response: ServerResponse, reason: Reason, message: string): void => {
  Metrics.add(Metrics.requestsRefused, 1, "reason", reason)
  if (response.headersSent || response.destroyed) return
  const body = JSON.stringify({ _tag: "Unavailable", message })
  response.writeHead(503, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    "retry-after": "1"
  }).end(body)
}

interface Waiting {
  readonly request: IncomingMessage
  readonly response: ServerResponse
  readonly handler: Handler
  cancelTimer: () => void
  done: boolean
}

/** A gate with `options`' bounds. */
export const make = (options: Options): Gate => {
  const max = options.maxInFlight
  const maxQueued = options.maxQueued ?? Math.max(4096, 64 * max)
  const waitMs = options.queueTimeoutMs ?? queueTimeoutMs
  const timer = options.timer ?? realTimer
  let inFlight = 0
  let closed = false
  // A FIFO with a moving head: `shift` on a long array copies it.
  let queue: Array<Waiting> = []
  let head = 0
  let waiting = 0

  const noLabels: ReadonlyArray<never> = []
  /** The gauges follow the counts (`corral.http.requests.in_flight`, `.waiting`). */
  const changed = () => {
    Metrics.requestsInFlight.unsafeUpdate(inFlight, noLabels)
    Metrics.requestsWaiting.unsafeUpdate(waiting, noLabels)
  }

  const full = `the server is working on ${max} requests and ${maxQueued} more wait ` +
    `(server.maxRequestsInFlight): retry shortly`

  const next = (): void => {
    while (inFlight < max && head < queue.length) {
      const w = queue[head++]!
      if (w.done) continue
      w.done = true
      w.cancelTimer()
      waiting--
      run(w.request, w.response, w.handler)
    }
    if (head === queue.length) {
      queue = []
      head = 0
    } else if (head > 1024 && head * 2 > queue.length) {
      queue = queue.slice(head)
      head = 0
    }
    changed()
  }

  // The next requests go in from a microtask, never from inside `free`: a handler that answers at once (Effect runs a
  // request's fiber synchronously as it is forked) would otherwise let the next one in from inside its own
  // `writeHead`, and that one the next — a line of such requests one stack frame deeper each, until the stack ran
  // out (found at 5,000 at once: event streams whose session was known without a store read).
  let scheduled = false
  const later = (): void => {
    if (scheduled) return
    scheduled = true
    queueMicrotask(() => {
      scheduled = false
      next()
    })
  }

  const run = (request: IncomingMessage, response: ServerResponse, handler: Handler): void => {
    inFlight++
    let freed = false
    const free = () => {
      if (freed) return
      freed = true
      inFlight--
      if (head < queue.length) later()
      else changed()
    }
    // The answer has started (explicitly or through Node's implicit header): the place is free.
    const writeHead = response.writeHead
    response.writeHead = function(this: ServerResponse, ...args: Parameters<ServerResponse["writeHead"]>) {
      free()
      return writeHead.apply(this, args)
    } as ServerResponse["writeHead"]
    response.once("close", free)
    changed()
    handler(request, response)
  }

  const admit = (request: IncomingMessage, response: ServerResponse, handler: Handler): void => {
    if (max <= 0 || bypasses(request.url ?? "/")) return handler(request, response)
    if (closed) return refuse(response, "shutting_down", "the server is shutting down")
    if (inFlight < max && waiting === 0) return run(request, response, handler)
    if (waiting >= maxQueued) return refuse(response, "line_full", full)
    const w: Waiting = { request, response, handler, cancelTimer: () => {}, done: false }
    const leave = () => {
      if (w.done) return
      w.done = true
      w.cancelTimer()
      waiting--
      changed()
    }
    w.cancelTimer = timer(waitMs, () => {
      if (w.done) return
      leave()
      refuse(
        response,
        "waited_too_long",
        `the request waited ${waitMs} ms for one of the server's ${max} places (server.maxRequestsInFlight): ` +
          "retry shortly"
      )
    })
    // A client that gives up while waiting takes its place in the line with it.
    response.once("close", leave)
    queue.push(w)
    waiting++
    changed()
  }

  return {
    admit,
    inFlight: () => inFlight,
    queued: () => waiting,
    close: () => {
      closed = true
      for (let i = head; i < queue.length; i++) {
        const w = queue[i]!
        if (w.done) continue
        w.done = true
        w.cancelTimer()
        waiting--
        refuse(w.response, "shutting_down", "the server is shutting down")
      }
      queue = []
      head = 0
      changed()
    }
  }
}
