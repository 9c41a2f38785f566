/**
 * A request that arrives while the server starts is answered: `corral serve` (a child process on the embedded
 * default) is probed every few milliseconds from before it listens until after it says so. A probe is refused (not
 * listening yet) or answered; a connection the server accepted and then never answered is the failure. The socket
 * listens a moment before the request handler is attached, so probes landing in that window are what this is about.
 */
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { corral } from "../support/ServerHarness.js"

type Outcome = "refused" | "answered" | "unanswered" | "error"

/** A port that was free a moment ago. */
const freePort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

/** One raw HTTP request to `/healthz`: refused, answered (a status line came back), or not answered in `waitMs`. */
const probe = (port: number, waitMs: number) =>
  new Promise<Outcome>((resolve) => {
    let connected = false
    let received = ""
    const socket = net.connect({ host: "127.0.0.1", port })
    const done = (outcome: Outcome) => {
      clearTimeout(timer)
      socket.destroy()
      resolve(outcome)
    }
    const timer = setTimeout(() => done("unanswered"), waitMs)
    socket.on("connect", () => {
      connected = true
      socket.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    })
    socket.on("data", (chunk) => {
      received += chunk.toString()
      if (received.startsWith("HTTP/1.1 ")) done("answered")
    })
    socket.on("error", (error: NodeJS.ErrnoException) =>
      done(!connected && error.code === "ECONNREFUSED" ? "refused" : "error"))
    socket.on("close", () =>
      done(received.startsWith("HTTP/1.1 ") ? "answered" : connected ? "error" : "refused"))
  })

it.live("answers every connection it accepts while it starts", () =>
  Effect.gen(function*() {
    const dir = mkdtempSync(join(tmpdir(), "corral-startup-"))
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
    const port = yield* Effect.promise(freePort)
    const child = corral(["serve", "--port", String(port)], { CORRAL_DATA_DIR: join(dir, "data") }, dir)
    yield* Effect.addFinalizer(() => Effect.sync(() => child.process.kill("SIGKILL")))

    // Probe every 3 ms (each probe on its own connection, without waiting for the previous one) until the server
    // has said it listens and a few more probes went through.
    const probes: Array<Promise<Outcome>> = []
    let afterListening = 0
    const started = Date.now()
    while (afterListening < 20 && Date.now() - started < 90_000) {
      probes.push(probe(port, 10_000))
      if (/listening on/.test(child.stdout() + child.stderr())) afterListening++
      yield* Effect.sleep("3 millis")
    }
    const outcomes = yield* Effect.promise(() => Promise.all(probes))
    const count = (outcome: Outcome) => outcomes.filter((o) => o === outcome).length
    const log = child.stdout() + child.stderr()
    expect(afterListening, log).toBe(20)
    expect(count("unanswered"), `accepted but never answered (of ${outcomes.length} probes)`).toBe(0)
    expect(count("error"), "connections that failed after being accepted").toBe(0)
    expect(count("answered")).toBeGreaterThanOrEqual(20)
  }).pipe(Effect.scoped), 120_000)
