/**
 * The fault-injection proxy itself, against a real echo server: each mode does to real sockets what the store tests
 * rely on it to do.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Scope } from "effect"
import * as net from "node:net"
import * as TcpProxy from "./TcpProxy.js"

/** An echo server on 127.0.0.1, closed with the scope. */
const echoServer: Effect.Effect<number, never, Scope.Scope> = Effect.acquireRelease(
  Effect.async<net.Server>((resume) => {
    const server = net.createServer((socket) => {
      socket.on("error", () => {})
      socket.pipe(socket)
    })
    server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
  }),
  (server) => Effect.sync(() => server.close())
).pipe(Effect.map((server) => (server.address() as net.AddressInfo).port))

/** A client connection that records what it received and how it ended. */
const dial = (port: number) =>
  Effect.acquireRelease(
    Effect.async<{ socket: net.Socket; received: () => string; ended: () => string | undefined }, Error>(
      (resume) => {
        let received = ""
        let ended: string | undefined
        const socket = net.connect({ host: "127.0.0.1", port })
        socket.on("data", (chunk) => (received += chunk.toString()))
        socket.on("error", (error: NodeJS.ErrnoException) => {
          ended = error.code ?? error.message
          resume(Effect.fail(error))
        })
        socket.on("close", () => (ended ??= "closed"))
        socket.on("connect", () => resume(Effect.succeed({ socket, received: () => received, ended: () => ended })))
      }
    ),
    ({ socket }) => Effect.sync(() => socket.destroy())
  )

/** Polls `check` (real time) until it holds, for at most `ms`. */
const until = (check: () => boolean, ms = 2_000) =>
  Effect.gen(function*() {
    const start = Date.now()
    while (!check()) {
      if (Date.now() - start > ms) return false
      yield* Effect.sleep("10 millis")
    }
    return true
  })

it.live("forwards, holds during a blackhole and delivers when it heals, resets, refuses, recovers, and strands", () =>
  Effect.gen(function*() {
    const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: yield* echoServer })

    const a = yield* dial(proxy.port)
    a.socket.write("one")
    expect(yield* until(() => a.received() === "one")).toBe(true)

    // A partition: nothing comes back, nothing is closed, and new connections are accepted but silent.
    yield* proxy.set("blackhole")
    a.socket.write("two")
    const b = yield* dial(proxy.port)
    b.socket.write("hello")
    expect(yield* until(() => a.received() !== "one" || b.received() !== "", 300)).toBe(false)
    expect(a.ended()).toBeUndefined()
    expect(b.ended()).toBeUndefined()

    // Healed: what was held is delivered, in order, on both connections.
    yield* proxy.set("pass")
    expect(yield* until(() => a.received() === "onetwo" && b.received() === "hello")).toBe(true)

    // Reset: open connections see ECONNRESET, a new one is reset as soon as it is accepted.
    yield* proxy.set("reset")
    expect(yield* until(() => a.ended() === "ECONNRESET" && b.ended() === "ECONNRESET")).toBe(true)
    const c = yield* Effect.either(
      Effect.scoped(Effect.flatMap(dial(proxy.port), (c) =>
        Effect.flatMap(
          until(() => c.ended() !== undefined),
          () => Effect.succeed(c.ended())
        )))
    )
    expect(c._tag === "Left" ? (c.left as NodeJS.ErrnoException).code : c.right).toBe("ECONNRESET")

    // Refuse: the port is closed.
    yield* proxy.set("refuse")
    const refused = yield* Effect.flip(Effect.scoped(dial(proxy.port)))
    expect((refused as NodeJS.ErrnoException).code).toBe("ECONNREFUSED")

    // Back to pass on the same port: new connections work.
    yield* proxy.set("pass")
    const d = yield* dial(proxy.port)
    d.socket.write("again")
    expect(yield* until(() => d.received() === "again")).toBe(true)
    expect(proxy.open()).toBe(1)

    // A partition that heals without the connections it held: they stay silent, new ones pass.
    yield* proxy.set("blackhole")
    d.socket.write("lost")
    yield* proxy.set("pass", { strand: true })
    const e = yield* dial(proxy.port)
    e.socket.write("fresh")
    expect(yield* until(() => e.received() === "fresh")).toBe(true)
    expect(yield* until(() => d.received() !== "again", 300)).toBe(false)
    expect(d.ended()).toBeUndefined()
  }).pipe(Effect.scoped))
