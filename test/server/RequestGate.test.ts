/**
 * The request gate (`server/RequestGate`), on a real Node server with real sockets: at most `maxInFlight` requests
 * are handed to the handler at once and the rest go in, in arrival order, as places free; an event stream frees
 * its place when its answer starts, and so does a request whose client leaves before its answer starts; a client that
 * gives up while waiting is never handed over; a place freed in the same tick a newcomer arrives goes to the request
 * already waiting; a full line and a wait past its bound are answered 503 with `Retry-After` and a message naming
 * the setting; probes, `/mcp` and `?wait=true` are never held. Through the whole server: a client that trickles its body holds the only place, a
 * second request waits for it, `/readyz` does not.
 */
import { describe, expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { EventEmitter } from "node:events"
import { createServer } from "node:http"
import type { IncomingMessage, Server, ServerResponse } from "node:http"
import * as net from "node:net"
import * as Config from "../../src/config/Config.js"
import * as RequestGate from "../../src/server/RequestGate.js"
import * as ServerLayer from "../../src/server/Server.js"
import { baseUrl, eventually, raw, settings } from "../support/ServerHarness.js"

interface Arrival {
  readonly url: string
  readonly response: ServerResponse
}

/** A manual timer: `fire()` runs every wait bound set so far that was not cancelled. */
const manualTimer = () => {
  const pending = new Set<() => void>()
  return {
    timer: (_ms: number, f: () => void) => {
      pending.add(f)
      return () => pending.delete(f)
    },
    fire: () => {
      for (const f of [...pending]) {
        pending.delete(f)
        f()
      }
    }
  }
}

/** A server whose handler records what it was handed and answers only when told; the gate in front of it. */
const gated = (options: RequestGate.Options) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ server: Server; port: number; handed: Array<Arrival>; gate: RequestGate.Gate }>((resolve) => {
        const handed: Array<Arrival> = []
        const gate = RequestGate.make(options)
        const handler = (request: IncomingMessage, response: ServerResponse) => {
          handed.push({ url: request.url ?? "", response })
        }
        const server = createServer((request, response) => gate.admit(request, response, handler))
        server.listen(0, "127.0.0.1", () =>
          resolve({ server, port: (server.address() as net.AddressInfo).port, handed, gate }))
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() =>
            resolve()
          )
        })
      )
  )

interface Answer {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

/** A request on its own socket: the answer, and `abort` to give up while it waits. */
const send = (port: number, path: string) => {
  const socket = net.connect({ host: "127.0.0.1", port })
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
  const answer = new Promise<Answer>((resolve, reject) => {
    let text = ""
    socket.on("data", (chunk) => (text += chunk.toString()))
    socket.on("error", reject)
    socket.on("close", () => {
      const [head = "", body = ""] = text.split("\r\n\r\n")
      const [status = "", ...lines] = head.split("\r\n")
      resolve({
        status: Number(status.split(" ")[1] ?? 0),
        headers: Object.fromEntries(lines.map((l) => {
          const at = l.indexOf(":")
          return [l.slice(0, at).toLowerCase(), l.slice(at + 1).trim()]
        })),
        body
      })
    })
  })
  return { answer, abort: () => socket.destroy() }
}

/** Node's request and response as far as the gate and a handler that answers at once use them. */
const fakeExchange = (url: string) => {
  const response = Object.assign(new EventEmitter(), {
    headersSent: false,
    destroyed: false,
    writeHead(this: { headersSent: boolean }) {
      this.headersSent = true
      return this
    },
    end() {}
  }) as unknown as ServerResponse
  return [{ url } as IncomingMessage, response] as const
}

/** Waits (polling the real clock, at most 5 s) until `check` holds. */
const until = (check: () => boolean) =>
  Effect.promise(async () => {
    for (const deadline = Date.now() + 5_000; Date.now() < deadline;) {
      if (check()) return
      await new Promise((r) => setTimeout(r, 5))
    }
    throw new Error("the condition did not hold within 5 s")
  })

describe("RequestGate", () => {
  it.scoped("hands over at most maxInFlight requests at once, the rest in arrival order as places free", () =>
    Effect.gen(function*() {
      const { gate, handed, port } = yield* gated({ maxInFlight: 2 })
      const answers = ["/a", "/b", "/c", "/d"].map((path) => send(port, path).answer)
      yield* until(() => handed.length === 2 && gate.queued() === 2)
      expect(handed.map((h) => h.url).sort()).toEqual(["/a", "/b"])
      handed[0]!.response.end("first")
      yield* until(() => handed.length === 3)
      expect(handed[2]!.url).toBe("/c")
      expect(gate.inFlight()).toBe(2)
      for (const h of handed.slice(1)) h.response.end("ok")
      yield* until(() => handed.length === 4)
      expect(handed[3]!.url).toBe("/d")
      handed[3]!.response.end("ok")
      const statuses = (yield* Effect.promise(() => Promise.all(answers))).map((a) => a.status)
      expect(statuses).toEqual([200, 200, 200, 200])
      expect(gate.inFlight()).toBe(0)
    }))

  it.scoped("frees a place when an answer starts, so an open event stream does not hold it", () =>
    Effect.gen(function*() {
      const { gate, handed, port } = yield* gated({ maxInFlight: 1 })
      const stream = send(port, "/v1/sessions/s/events")
      yield* until(() => handed.length === 1)
      const next = send(port, "/v1/agents")
      yield* until(() => gate.queued() === 1)
      expect(handed).toHaveLength(1)
      handed[0]!.response.writeHead(200, { "content-type": "text/event-stream" })
      handed[0]!.response.write(": open\n\n")
      yield* until(() => handed.length === 2)
      expect(handed[1]!.url).toBe("/v1/agents")
      handed[1]!.response.end("ok")
      expect((yield* Effect.promise(() => next.answer)).status).toBe(200)
      stream.abort()
    }))

  it.scoped("never hands over a request whose client gave up while it waited", () =>
    Effect.gen(function*() {
      const { gate, handed, port } = yield* gated({ maxInFlight: 1 })
      send(port, "/first")
      yield* until(() => handed.length === 1)
      const gone = send(port, "/gone")
      const kept = send(port, "/kept")
      yield* until(() => gate.queued() === 2)
      gone.abort()
      yield* until(() => gate.queued() === 1)
      handed[0]!.response.end("ok")
      yield* until(() => handed.length === 2)
      expect(handed.map((h) => h.url)).toEqual(["/first", "/kept"])
      handed[1]!.response.end("ok")
      expect((yield* Effect.promise(() => kept.answer)).status).toBe(200)
    }))

  it.scoped("frees the place of an admitted request whose client leaves before its answer starts", () =>
    Effect.gen(function*() {
      const { gate, handed, port } = yield* gated({ maxInFlight: 1 })
      const leaving = send(port, "/leaving")
      yield* until(() => handed.length === 1)
      const next = send(port, "/next")
      yield* until(() => gate.queued() === 1)
      // The handler has not answered: only the client's leaving can free the place.
      leaving.abort()
      yield* until(() => handed.length === 2)
      expect(handed.map((h) => h.url)).toEqual(["/leaving", "/next"])
      expect([gate.inFlight(), gate.queued()]).toEqual([1, 0])
      handed[1]!.response.end("ok")
      expect((yield* Effect.promise(() => next.answer)).status).toBe(200)
      expect(gate.inFlight()).toBe(0)
    }))

  it.scoped("answers 503 with Retry-After at once when the line is full, naming the setting", () =>
    Effect.gen(function*() {
      const { gate, handed, port } = yield* gated({ maxInFlight: 1, maxQueued: 1 })
      send(port, "/first")
      yield* until(() => handed.length === 1)
      send(port, "/waits")
      yield* until(() => gate.queued() === 1)
      const refused = yield* Effect.promise(() => send(port, "/refused").answer)
      expect(refused.status).toBe(503)
      expect(refused.headers["retry-after"]).toBe("1")
      const body = JSON.parse(refused.body) as { _tag: string; message: string }
      expect(body._tag).toBe("Unavailable")
      expect(body.message).toContain("server.maxRequestsInFlight")
      expect(handed.map((h) => h.url)).toEqual(["/first"])
      handed[0]!.response.end("ok")
    }))

  it.scoped("answers 503 with Retry-After a request that waited past its bound, and hands over the next", () =>
    Effect.gen(function*() {
      const clock = manualTimer()
      const { gate, handed, port } = yield* gated({ maxInFlight: 1, queueTimeoutMs: 30_000, timer: clock.timer })
      send(port, "/first")
      yield* until(() => handed.length === 1)
      const late = send(port, "/late")
      yield* until(() => gate.queued() === 1)
      clock.fire()
      const answer = yield* Effect.promise(() => late.answer)
      expect(answer.status).toBe(503)
      expect(answer.headers["retry-after"]).toBe("1")
      expect(JSON.parse(answer.body).message).toContain("waited 30000 ms")
      expect(gate.queued()).toBe(0)
      const after = send(port, "/after")
      yield* until(() => gate.queued() === 1)
      handed[0]!.response.end("ok")
      yield* until(() => handed.length === 2)
      expect(handed.map((h) => h.url)).toEqual(["/first", "/after"])
      handed[1]!.response.end("ok")
      expect((yield* Effect.promise(() => after.answer)).status).toBe(200)
    }))

  it.scoped("never holds the probes, /mcp or a request that waits for a landing", () =>
    Effect.gen(function*() {
      const { gate, handed, port } = yield* gated({ maxInFlight: 1 })
      send(port, "/v1/sessions")
      yield* until(() => handed.length === 1)
      send(port, "/v1/agents?wait=false")
      yield* until(() => gate.queued() === 1)
      for (const path of ["/healthz", "/readyz", "/metrics", "/mcp", "/v1/sessions?wait=true"]) send(port, path)
      yield* until(() => handed.length === 6)
      expect(gate.queued()).toBe(1)
      expect(handed.map((h) => h.url).slice(1)).toEqual([
        "/healthz",
        "/readyz",
        "/metrics",
        "/mcp",
        "/v1/sessions?wait=true"
      ])
      expect(RequestGate.bypasses("/v1/sessions?wait=false")).toBe(false)
      expect(RequestGate.bypasses("/mcpx")).toBe(false)
      // A copy: ending the first lets the waiting request in, which joins `handed` at once.
      for (const h of handed.slice(0, 6)) h.response.end("ok")
      yield* until(() => handed.length === 7)
      expect(handed[6]!.url).toBe("/v1/agents?wait=false")
      handed[6]!.response.end("ok")
    }))

  it.effect("lets a long line of requests answered at once go in without running out of stack", () =>
    Effect.gen(function*() {
      const fake = () => fakeExchange("/v1/agents")
      const gate = RequestGate.make({ maxInFlight: 1, maxQueued: 50_000 })
      let answered = 0
      const atOnce: RequestGate.Handler = (_request, response) => {
        answered++
        response.writeHead(200)
      }
      const [firstRequest, firstResponse] = fake()
      gate.admit(firstRequest, firstResponse, () => {})
      for (let i = 0; i < 20_000; i++) {
        const [request, response] = fake()
        gate.admit(request, response, atOnce)
      }
      expect(gate.queued()).toBe(20_000)
      // Before the change, the first answer let the next in from inside its own writeHead, each one deeper.
      firstResponse.writeHead(200)
      yield* until(() => answered === 20_000)
      expect([gate.inFlight(), gate.queued()]).toEqual([0, 0])
    }))

  it.effect("a place freed in the same tick a newcomer arrives goes to the one already waiting", () =>
    Effect.gen(function*() {
      const gate = RequestGate.make({ maxInFlight: 1 })
      const handed: Array<string> = []
      const record: RequestGate.Handler = (request) => {
        handed.push(request.url ?? "")
      }
      const [first, waiting, newcomer] = ["/first", "/waiting", "/newcomer"].map(fakeExchange)
      gate.admit(...first!, record)
      gate.admit(...waiting!, record)
      expect([handed, gate.queued()]).toEqual([["/first"], 1])
      // The answer starts and a newcomer arrives before the gate's next turn: it joins the line behind the waiter.
      first![1].writeHead(200)
      gate.admit(...newcomer!, record)
      yield* Effect.promise(() => Promise.resolve())
      expect(handed).toEqual(["/first", "/waiting"])
      expect([gate.inFlight(), gate.queued()]).toEqual([1, 1])
      waiting![1].writeHead(200)
      yield* Effect.promise(() => Promise.resolve())
      expect(handed).toEqual(["/first", "/waiting", "/newcomer"])
    }))

  it.scoped("lets every request straight in with maxInFlight 0", () =>
    Effect.gen(function*() {
      const { gate, handed, port } = yield* gated({ maxInFlight: 0 })
      for (const path of ["/a", "/b", "/c"]) send(port, path)
      yield* until(() => handed.length === 3)
      expect(gate.queued()).toBe(0)
      for (const h of handed) h.response.end("ok")
    }))
})

/** Headers of a POST that declares a body of `length` bytes, and `first` of them. */
const trickle = (port: number, length: number, first: string) => {
  const socket = net.connect({ host: "127.0.0.1", port })
  socket.write(
    `POST /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${length}\r\nConnection: close\r\n\r\n${first}`
  )
  let text = ""
  socket.on("data", (chunk) => (text += chunk.toString()))
  const answered = new Promise<string>((resolve) => socket.on("close", () => resolve(text)))
  return { rest: (s: string) => socket.write(s), answered }
}

/** The gate's gauges as `GET /metrics` (never held by the gate) shows them. */
const gauges = (url: string) =>
  Effect.map(raw(`${url}/metrics`), (metrics) => {
    const read = (name: string) => Number(new RegExp(`^${name} (\\d+)`, "m").exec(metrics.text)?.[1] ?? -1)
    return { inFlight: read("corral_http_requests_in_flight"), waiting: read("corral_http_requests_waiting") }
  })

layer(ServerLayer.layer(settings({ server: { ...Config.defaults.server, maxRequestsInFlight: 1 } })), {
  excludeTestServices: true,
  timeout: "30 seconds"
})("the server's gate (server.maxRequestsInFlight = 1)", (it) => {
  it.effect("a request waits while a slow body holds the only place; the probes do not", () =>
    Effect.gen(function*() {
      const url = yield* baseUrl
      const port = Number(new URL(url).port)
      const body = JSON.stringify({ id: "gate", version: 1, name: "x", instructions: "y", tier: "default" })
      const slow = trickle(port, Buffer.byteLength(body), body.slice(0, 5))
      yield* eventually("the slow POST in flight", Effect.map(gauges(url), (g) => g.inFlight === 1 || undefined))
      const waiting = yield* Effect.fork(raw(`${url}/v1/agents`))
      yield* eventually("the GET waiting", Effect.map(gauges(url), (g) => g.waiting === 1 || undefined))
      expect((yield* raw(`${url}/readyz`)).status).toBe(200)
      expect(waiting.unsafePoll()).toBeNull()
      slow.rest(body.slice(5))
      const listed = yield* Effect.flatten(waiting.await)
      expect(listed.status).toBe(200)
      expect(yield* Effect.promise(() => slow.answered)).toMatch(/^HTTP\/1\.1 \d{3} /)
      expect(yield* gauges(url)).toEqual({ inFlight: 0, waiting: 0 })
    }))
})
