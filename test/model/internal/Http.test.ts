import { FetchHttpClient, HttpClient } from "@effect/platform"
import type { HttpClientResponse } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Chunk, Deferred, Effect, Either, Exit, Fiber, Layer, Option, Queue } from "effect"
import * as TestClock from "effect/TestClock"
import http from "node:http"
import type { AddressInfo } from "node:net"
import * as Http from "../../../src/model/internal/http.js"
import * as ReadBody from "../../../src/model/internal/readBody.js"

/** Closes a test server and every connection it holds. */
const closeServer = (server: http.Server) =>
  Effect.promise(() =>
    new Promise<void>((done) => {
      server.closeAllConnections()
      server.close(() => done())
    })
  )

/** One request held open by the test: it writes the body when it wants and learns when the client hung up. */
interface Held {
  readonly write: (chunk: string | Uint8Array) => void
  readonly end: () => void
  readonly closed: Promise<void>
  /** The client's port of the connection the request came on (the same port: the same connection). */
  readonly port: number | undefined
}

// A server whose replies send their headers at once and then only what the test writes.
const heldServer = (contentType: string) =>
  Effect.gen(function*() {
    const arrivals = yield* Queue.unbounded<Held>()
    const server = yield* Effect.acquireRelease(
      Effect.promise(() =>
        new Promise<http.Server>((resolve) => {
          const server = http.createServer((req, res) => {
            req.resume()
            req.on("end", () => {
              res.writeHead(200, { "content-type": contentType })
              res.flushHeaders()
              const closed = new Promise<void>((done) => res.on("close", () => done()))
              Queue.unsafeOffer(arrivals, {
                write: (chunk) => res.write(chunk),
                end: () => res.end(),
                closed,
                port: req.socket.remotePort
              })
            })
          })
          server.listen(0, "127.0.0.1", () => resolve(server))
        })
      ),
      closeServer
    )
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
    return { url, arrivals }
  })

const transportFor = (client: HttpClient.HttpClient): Http.Transport => ({
  provider: "fake",
  client,
  firstByteTimeoutMs: 5_000,
  idleTimeoutMs: 1_000,
  maxResponseBytes: 1024 * 1024
})

// Waits until a sleep is queued on the TestClock to end at `instant` (the watchdog's, once it is armed).
const sleepUntil = (instant: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 100_000; i++) {
      if (Chunk.some(yield* TestClock.sleeps(), (end) => end === instant)) return
      yield* Effect.yieldNow()
    }
    return yield* Effect.die(`no sleep was queued to end at ${instant}`)
  })

const clients: ReadonlyArray<readonly [string, Layer.Layer<HttpClient.HttpClient>]> = [
  ["undici", NodeHttpClient.layerUndici],
  ["node:http", NodeHttpClient.layer],
  ["fetch (the Stream path)", FetchHttpClient.layer]
]

describe.each(clients)("internal/http body reading over %s", (name, clientLayer) => {
  const setup = (contentType: string) =>
    Effect.gen(function*() {
      const server = yield* heldServer(contentType)
      const transport = transportFor(yield* HttpClient.HttpClient)
      const response = yield* Http.post(transport, server.url, {}, {})
      const held = yield* Queue.take(server.arrivals)
      return { transport, response, held }
    })
  // The client's layer spans the whole test: closing it (undici's dispatcher) would abort the bodies being read.
  const test = (title: string, body: () => Effect.Effect<void, unknown, HttpClient.HttpClient | Scope.Scope>) =>
    it.scoped(title, () => Effect.provide(body(), clientLayer))

  test("a body silent for idleTimeoutMs fails timeout (stalled), and its connection is closed", () =>
    Effect.gen(function*() {
      const { held, response, transport } = yield* setup("application/json")
      const reading = yield* Effect.fork(Http.text(transport, response))
      yield* sleepUntil(1_000)
      yield* TestClock.adjust(1_000)
      const error = yield* Effect.flip(Fiber.join(reading))
      expect({ kind: error.kind, message: error.message, status: error.status }).toEqual({
        kind: "timeout",
        message: "the reply stalled: no data for 1000 ms",
        status: 200
      })
      yield* Effect.promise(() => held.closed)
    }))

  test("the idle bound counts from the last chunk, not from the start of the body", () =>
    Effect.gen(function*() {
      const { held, response, transport } = yield* setup("text/event-stream")
      const seen = yield* Queue.unbounded<string>()
      const reading = yield* Effect.fork(Http.events(transport, response, (event) => {
        Queue.unsafeOffer(seen, event.data)
        return true
      }))
      held.write("data: one\n\n")
      expect(yield* Queue.take(seen)).toBe("one")
      yield* TestClock.adjust(600)
      held.write("data: two\n\n")
      expect(yield* Queue.take(seen)).toBe("two")
      yield* TestClock.adjust(600)
      // 1.2 s since the body began, 0.6 s since its last chunk: still reading, the bound now ends at 1.6 s.
      yield* sleepUntil(1_600)
      expect(Option.isNone(yield* Fiber.poll(reading))).toBe(true)
      yield* TestClock.adjust(400)
      const error = yield* Effect.flip(Fiber.join(reading))
      expect(error.message).toBe("the reply stalled: no data for 1000 ms")
    }))

  test("an interrupted read closes the connection", () =>
    Effect.gen(function*() {
      const { held, response, transport } = yield* setup("text/event-stream")
      const seen = yield* Queue.unbounded<string>()
      const reading = yield* Effect.fork(Http.events(transport, response, (event) => {
        Queue.unsafeOffer(seen, event.data)
        return true
      }))
      held.write("data: one\n\n")
      yield* Queue.take(seen)
      yield* Fiber.interrupt(reading)
      yield* Effect.promise(() => held.closed)
    }))

  test("a handler that stops the read ends it at once, before the body ends; a handler's error fails it", () =>
    Effect.gen(function*() {
      const { held, response, transport } = yield* setup("text/event-stream")
      held.write("data: one\n\ndata: two\n\n")
      const seen: Array<string> = []
      yield* Http.events(transport, response, (event) => {
        seen.push(event.data)
        return false
      })
      expect(seen).toEqual(["one"])
      held.end()

      const next = yield* setup("text/event-stream")
      next.held.write("data: one\n\n")
      const failed = yield* Effect.either(
        Http.events(next.transport, next.response, () => Http.fail(next.transport, "server", "no thanks"))
      )
      expect(Either.isLeft(failed) && failed.left.message).toBe("no thanks")
      yield* Effect.promise(() => next.held.closed)
    }))

  test("an event left without its blank line, split inside a UTF-8 character, is read at the end", () =>
    Effect.gen(function*() {
      const { held, response, transport } = yield* setup("text/event-stream")
      const seen: Array<string> = []
      const reading = yield* Effect.fork(Http.events(transport, response, (event) => seen.push(event.data) > 0))
      const bytes = Buffer.from("data: ünï ✓", "utf8")
      held.write(bytes.subarray(0, 7))
      held.write(bytes.subarray(7))
      held.end()
      yield* Fiber.join(reading)
      expect(seen).toEqual(["ünï ✓"])
    }))

  if (!name.startsWith("fetch")) {
    // After an end marker the rest of the body is read and dropped, bounded, so the connection is not thrown away.
    const stopAtFirst = (transport: Http.Transport, response: HttpClientResponse.HttpClientResponse) =>
      Http.events(transport, response, () => false)

    test("after a stop, a body that goes on past the idle bound is closed (TestClock)", () =>
      Effect.gen(function*() {
        const { held, response, transport } = yield* setup("text/event-stream")
        held.write("data: [DONE]\n\n")
        yield* stopAtFirst(transport, response)
        yield* sleepUntil(transport.idleTimeoutMs)
        yield* TestClock.adjust(transport.idleTimeoutMs)
        yield* Effect.promise(() => held.closed)
      }))

    test(`after a stop, a body that goes on for more than ${ReadBody.drainBytes} bytes is closed`, () =>
      Effect.gen(function*() {
        const { held, response, transport } = yield* setup("text/event-stream")
        held.write("data: [DONE]\n\n")
        yield* stopAtFirst(transport, response)
        held.write(Buffer.alloc(ReadBody.drainBytes + 1, 0x20))
        yield* Effect.promise(() => held.closed)
      }))

    test("reads platform-node's body from its Node stream (no Stream per chunk)", () =>
      Effect.gen(function*() {
        const { held, response } = yield* setup("application/json")
        expect(ReadBody.nodeBody(response)).toBeDefined()
        held.end()
      }))
  }
})

// A server that takes requests and never answers them: each arrival resolves once the client hangs up.
const silentServer = Effect.gen(function*() {
  const arrivals = yield* Queue.unbounded<Promise<void>>()
  const server = yield* Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<http.Server>((resolve) => {
        const server = http.createServer((req, res) => {
          req.resume()
          Queue.unsafeOffer(arrivals, new Promise<void>((done) => res.on("close", () => done())))
        })
        server.listen(0, "127.0.0.1", () => resolve(server))
      })
    ),
    closeServer
  )
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, arrivals }
})

describe.each(clients)("internal/http first-byte deadline over %s", (_name, clientLayer) => {
  it.scoped("no headers within firstByteTimeoutMs fails timeout at the deadline, not before, and aborts the request", () =>
    Effect.gen(function*() {
      const server = yield* silentServer
      const transport = transportFor(yield* HttpClient.HttpClient)
      const posting = yield* Effect.fork(Http.post(transport, server.url, {}, {}))
      const closed = yield* Queue.take(server.arrivals)
      yield* sleepUntil(5_000)
      yield* TestClock.adjust(4_999)
      expect(Option.isNone(yield* Fiber.poll(posting))).toBe(true)
      yield* TestClock.adjust(1)
      const error = yield* Effect.flip(Fiber.join(posting))
      expect({ kind: error.kind, message: error.message }).toEqual({
        kind: "timeout",
        message: "no response from fake within 5000 ms"
      })
      yield* Effect.promise(() => closed)
    }).pipe(Effect.provide(clientLayer)))
})

describe("internal/http first-byte deadline and the request's end", () => {
  // A client whose request never answers and, once interrupted, ends only when the test releases it.
  const stuckClient = Effect.gen(function*() {
    const started = yield* Deferred.make<void>()
    const interrupted = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const client = HttpClient.make(() =>
      Deferred.succeed(started, undefined).pipe(
        Effect.zipRight(Effect.never),
        Effect.onInterrupt(() => Effect.zipRight(Deferred.succeed(interrupted, undefined), Deferred.await(release)))
      )
    )
    return { transport: transportFor(client), started, interrupted, release }
  })
  // Whether `fiber` is still running after the scheduler had a number of turns to end it.
  const stillRunning = (fiber: Fiber.RuntimeFiber<unknown, unknown>) =>
    Effect.gen(function*() {
      for (let turn = 0; turn < 50; turn++) yield* Effect.yieldNow()
      return fiber.unsafePoll() === null
    })

  it.effect("at the deadline the caller fails only once the interrupted request has ended", () =>
    Effect.gen(function*() {
      const stuck = yield* stuckClient
      const posting = yield* Effect.fork(Http.post(stuck.transport, "http://127.0.0.1:9/", {}, {}))
      yield* Deferred.await(stuck.started)
      yield* sleepUntil(5_000)
      yield* TestClock.adjust(5_000)
      yield* Deferred.await(stuck.interrupted)
      expect(yield* stillRunning(posting)).toBe(true)
      yield* Deferred.succeed(stuck.release, undefined)
      expect((yield* Effect.flip(Fiber.join(posting))).kind).toBe("timeout")
    }))

  it.effect("an interrupted caller interrupts the request and ends once the request has ended", () =>
    Effect.gen(function*() {
      const stuck = yield* stuckClient
      const posting = yield* Effect.fork(Http.post(stuck.transport, "http://127.0.0.1:9/", {}, {}))
      yield* Deferred.await(stuck.started)
      const stopping = yield* Effect.fork(Fiber.interrupt(posting))
      yield* Deferred.await(stuck.interrupted)
      expect(yield* stillRunning(stopping)).toBe(true)
      yield* Deferred.succeed(stuck.release, undefined)
      expect(Exit.isInterrupted(yield* Fiber.join(stopping))).toBe(true)
    }))
})

describe("internal/http connection reuse over undici", () => {
  it.scoped("a body stopped at its end marker is drained: the next request goes over the same connection", () =>
    Effect.gen(function*() {
      const server = yield* heldServer("text/event-stream")
      const transport = transportFor(yield* HttpClient.HttpClient)
      const first = yield* Http.post(transport, server.url, {}, {})
      const held = yield* Queue.take(server.arrivals)
      held.write("data: [DONE]\n\n")
      yield* Http.events(transport, first, () => false)
      // What a provider sends after its end marker: a blank line, then the end of the body.
      held.write("\n")
      held.end()
      // Waits (a bounded number of event-loop turns) until undici's pool holds the connection as free again.
      const dispatcher = yield* NodeHttpClient.Dispatcher
      const origin = new URL(server.url).origin
      const free = () => (dispatcher as unknown as { stats: Record<string, { free: number }> }).stats[origin]?.free ?? 0
      for (let turn = 0; turn < 1_000 && free() === 0; turn++) {
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      }
      expect(free()).toBe(1)
      const second = yield* Http.post(transport, server.url, {}, {})
      const again = yield* Queue.take(server.arrivals)
      expect(again.port).toBe(held.port)
      again.end()
      yield* Http.text(transport, second)
    }).pipe(
      Effect.provide(Layer.provideMerge(NodeHttpClient.layerUndiciWithoutDispatcher, NodeHttpClient.dispatcherLayer))
    ))
})
