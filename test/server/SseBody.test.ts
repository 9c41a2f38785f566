/**
 * The SSE response body (`Sse.body`): a Node `Readable` fed by one fiber. What a follower and an operator would
 * notice: the client going away stops the session's subscription (nothing keeps following a closed socket), the
 * server's drain ends the body, a client that does not read holds the events back instead of buffering them all,
 * and a store failure mid-stream is sent as an `error` event that ends the stream. And the stream handed to the
 * socket (`Sse.response`, on a real Node server): the request's own fiber ends once the stream is open while the
 * client still follows, and a HEAD gets its head and leaves no subscription behind.
 */
import { HttpMiddleware, HttpServer } from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Deferred, Effect, Layer, Option, Queue, Stream } from "effect"
import { createServer, get, request } from "node:http"
import type { IncomingMessage } from "node:http"
import type { AddressInfo } from "node:net"
import type { Readable } from "node:stream"
import type { Service as CorralService } from "../../src/Corral.js"
import { PersistenceFailed } from "../../src/domain/Errors.js"
import type { SessionEvent } from "../../src/domain/SessionEvent.js"
import type { Subscription } from "../../src/events/SessionEvents.js"
import * as Shutdown from "../../src/server/Shutdown.js"
import * as Sse from "../../src/server/Sse.js"

const principal = { orgId: "org", userId: "u" }
const delta = (seq: number, text = "x".repeat(1000)): SessionEvent => ({ _tag: "delta", sessionId: "s", seq, text })

/** A stream as the subscription `Corral.openEvents` gives: a batch per pull, an empty one at its end. */
const subscriptionOf = (events: Stream.Stream<SessionEvent, PersistenceFailed>) =>
  Effect.map(Stream.toPull(events), (pull): Subscription => {
    const next: Subscription["next"] = Effect.matchEffect(pull, {
      onFailure: (end) => Option.isNone(end) ? Effect.succeed([]) : Effect.fail(end.value),
      onSuccess: (chunk) => Chunk.isEmpty(chunk) ? next : Effect.succeed(Chunk.toReadonlyArray(chunk))
    })
    return { next }
  })

const bodyOf = (
  events: Stream.Stream<SessionEvent, PersistenceFailed>,
  onDrain: (end: () => void) => () => void = () => () => {}
) =>
  Sse.body({
    corral: { openEvents: () => subscriptionOf(events) } as unknown as CorralService,
    principal,
    sessionId: "s",
    current: Effect.fail("no snapshot in this test"),
    after: 0,
    keepAliveMs: 60_000,
    onDrain
  })

/** Everything the body sends until it ends. */
const readAll = (body: Readable) =>
  Effect.promise(async () => {
    let text = ""
    for await (const chunk of body) text += String(chunk)
    return text
  })

/** What the body sends until `text` arrived (read without switching it to flowing mode). */
const readUntil = (body: Readable, text: string) =>
  Effect.promise(() =>
    new Promise<string>((resolve) => {
      let seen = ""
      const onReadable = () => {
        for (let chunk = body.read(); chunk !== null; chunk = body.read()) seen += String(chunk)
        if (!seen.includes(text)) return
        body.off("readable", onReadable)
        resolve(seen)
      }
      body.on("readable", onReadable)
      onReadable()
    })
  )

const macrotask = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

describe("Sse.body", () => {
  it.live("stops following when the client goes away", () =>
    Effect.gen(function*() {
      const stopped = yield* Deferred.make<void>()
      const body = yield* bodyOf(
        Stream.concat(Stream.make(delta(1)), Stream.never).pipe(
          Stream.ensuring(Deferred.succeed(stopped, undefined))
        )
      )
      const first = yield* readUntil(body, ": connected")
      expect(first).toContain(": connected")
      body.destroy()
      yield* Deferred.await(stopped).pipe(Effect.timeout("5 seconds"))
    }))

  it.live("ends the body when the server drains", () =>
    Effect.gen(function*() {
      const shutdown = yield* Effect.provide(Shutdown.Shutdown, Shutdown.layer)
      const body = yield* bodyOf(Stream.concat(Stream.make(delta(1)), Stream.never), shutdown.onDrain)
      expect(yield* readUntil(body, "event: delta")).toContain(": connected")
      yield* shutdown.begin
      // The body ends: reading it to its end returns.
      yield* readAll(body).pipe(Effect.timeout("5 seconds"))
    }))

  it.live("holds the events back while the client does not read", () =>
    Effect.gen(function*() {
      let pulled = 0
      const events = Stream.iterate(1, (n) => n + 1).pipe(
        Stream.map((seq) => {
          pulled = seq
          return delta(seq)
        })
      )
      const body = yield* bodyOf(events)
      // ~1 KB per event and a 16 KB buffer: once the buffer is full the pump waits for the client.
      while (body.readableLength < body.readableHighWaterMark) yield* macrotask
      const atFull = pulled
      for (let i = 0; i < 20; i++) yield* macrotask
      expect(atFull).toBeLessThan(100)
      expect(pulled - atFull).toBeLessThanOrEqual(1)
      body.destroy()
    }))

  it.live("sends a store failure as an error event and ends the stream", () =>
    Effect.gen(function*() {
      const failing = Stream.concat(
        Stream.make(delta(1)),
        Stream.fail(new PersistenceFailed({ operation: "turns", message: "down" }))
      )
      const sent = yield* bodyOf(failing).pipe(Effect.flatMap(readAll), Effect.timeout("5 seconds"))
      expect(sent).toMatch(
        /event: delta[\s\S]*event: error\ndata: \{"_tag":"PersistenceFailed","message":"stream interrupted"\}/
      )
    }))
})

/**
 * An event stream served by a real Node server; `ended` completes when the request's own fiber has ended, and
 * `subscriptions` counts the subscriptions opened and released.
 */
const served = (events: Stream.Stream<SessionEvent, PersistenceFailed>) =>
  Effect.gen(function*() {
    const ended = yield* Deferred.make<void>()
    const subscriptions = { opened: 0, released: 0 }
    const corral = {
      openEvents: () =>
        Effect.acquireRelease(
          Effect.tap(subscriptionOf(events), () => {
            subscriptions.opened += 1
          }),
          () =>
            Effect.sync(() => {
              subscriptions.released += 1
            })
        )
    } as unknown as CorralService
    const app = Sse.response({
      corral,
      principal,
      sessionId: "s",
      current: Effect.fail("no snapshot in this test"),
      after: 0,
      keepAliveMs: 60_000,
      onDrain: () => () => {}
    }, {})
    // A middleware wraps the platform's writing of the response too: it ends when the request's fiber is done.
    const tracked = HttpMiddleware.make((inner) => Effect.ensuring(inner, Deferred.succeed(ended, undefined)))
    const server = createServer()
    yield* Layer.buildWithScope(
      Layer.provide(
        HttpServer.serve(app, tracked),
        NodeHttpServer.layer(() => server, { port: 0, host: "127.0.0.1" })
      ),
      yield* Effect.scope
    )
    return { port: (server.address() as AddressInfo).port, ended, subscriptions }
  })

/** Waits (real time, turns of the event loop) until `done()`, at most 5 s. */
const until = (what: string, done: () => boolean) =>
  Effect.gen(function*() {
    const deadline = Date.now() + 5_000
    while (!done()) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* macrotask
    }
  })

/** Opens `GET /` and resolves with the response once `text` has arrived (the socket left open). */
const follow = (port: number, text: string) =>
  Effect.promise(() =>
    new Promise<{ response: IncomingMessage; seen: () => string }>((resolve) => {
      get({ host: "127.0.0.1", port, path: "/" }, (response) => {
        let seen = ""
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => {
          seen += chunk
          if (seen.includes(text)) resolve({ response, seen: () => seen })
        })
      })
    })
  )

describe("Sse.response (the stream handed to the socket)", () => {
  it.live("ends the request's own fiber once the stream is open, and the client still follows", () =>
    Effect.scoped(Effect.gen(function*() {
      const events = yield* Queue.unbounded<SessionEvent>()
      const { ended, port, subscriptions } = yield* served(Stream.fromQueue(events))
      yield* events.offer(delta(1))
      const client = yield* follow(port, "event: delta")
      expect(client.response.headers["content-type"]).toBe("text/event-stream")
      // The request's fiber (middleware, context, span) is gone while the stream is open...
      yield* Deferred.await(ended).pipe(
        Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "the request fiber did not end" })
      )
      // ...and the events still reach the client.
      yield* events.offer(delta(2, "second"))
      while (!client.seen().includes("second")) yield* macrotask
      expect(subscriptions).toEqual({ opened: 1, released: 0 })
      // The client goes away: the subscription is released (nothing follows a closed socket).
      client.response.destroy()
      yield* until("the subscription to be released", () => subscriptions.released === 1)
    })))
})

describe("Sse.response to a HEAD", () => {
  it.live("answers the head and follows nothing", () =>
    Effect.scoped(Effect.gen(function*() {
      const { port, subscriptions } = yield* served(Stream.never)
      const answer = yield* Effect.promise(() =>
        new Promise<IncomingMessage>((resolve) => {
          const head = request({ host: "127.0.0.1", port, path: "/", method: "HEAD" }, (response) => {
            response.resume()
            response.once("end", () => resolve(response))
          })
          head.end()
        })
      )
      expect(answer.statusCode).toBe(200)
      expect(answer.headers["content-type"]).toBe("text/event-stream")
      // A probe leaves no follower behind: whatever subscription it opened is released.
      for (let i = 0; i < 20; i++) yield* macrotask
      expect(subscriptions.opened - subscriptions.released).toBe(0)
    })))
})

describe("Shutdown.onDrain (how an event stream learns of the drain without a fiber of its own)", () => {
  it.effect("calls what is registered once when draining begins, not what was taken back, and late ones at once", () =>
    Effect.gen(function*() {
      const shutdown = yield* Effect.provide(Shutdown.Shutdown, Shutdown.layer)
      const called: Array<string> = []
      shutdown.onDrain(() => called.push("a"))
      const forgetB = shutdown.onDrain(() => called.push("b"))
      shutdown.onDrain(() => called.push("c"))
      forgetB()
      expect(called).toEqual([])
      yield* shutdown.begin
      yield* shutdown.begin
      expect(called).toEqual(["a", "c"])
      shutdown.onDrain(() => called.push("late"))
      expect(called).toEqual(["a", "c", "late"])
      expect(shutdown.draining()).toBe(true)
    }))
})
