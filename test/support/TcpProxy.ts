/**
 * TcpProxy — a test-owned TCP proxy on 127.0.0.1 that can cut, refuse or silence the connections it forwards, so a
 * test puts a real network fault between Corral and its database (or any TCP server) instead of mocking one.
 *
 * Modes, switched at run time:
 * - `pass`: bytes flow both ways. Connections held by a partition resume with what was buffered meanwhile, as TCP
 *   does when a partition heals, unless the switch `strand`s them: then they stay silent for good (the peer's or a
 *   middlebox's state for them is gone: a failover, a NAT that forgot them) and only new connections pass.
 * - `reset`: every open connection is reset (RST on the client side, the upstream side destroyed) and every new one
 *   is accepted and reset at once: a database that crashed or a middlebox that dropped its state.
 * - `refuse`: the listener is closed, so new connections get ECONNREFUSED; open ones are left as they are (combine
 *   with `reset` first for a database that is down).
 * - `blackhole`: a partition. Open connections stop forwarding in both directions (each side's bytes stay in the
 *   kernel buffers), new ones are accepted (the kernel completes the handshake) but never reach the target. Nothing is
 *   answered and nothing is closed. Loopback keepalive probes are answered by the kernel on both sides, so TCP
 *   keepalive cannot notice this partition: only the client's own timeouts can.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import * as net from "node:net"

/** What the proxy does with traffic. */
export type Mode = "pass" | "reset" | "refuse" | "blackhole"

/** A running proxy. */
export interface TcpProxy {
  /** The port it listens on (stable across `refuse` and back). */
  readonly port: number
  /** `url` with its host and port replaced by the proxy's (e.g. a `postgres://` URL). */
  readonly url: (url: string) => string
  /** The current mode. */
  readonly mode: () => Mode
  /**
   * Switches the mode; `reset` resets open connections before it returns. `strand` (leaving `blackhole` for `pass`):
   * the connections the partition held stay silent.
   */
  readonly set: (mode: Mode, options?: { readonly strand?: boolean }) => Effect.Effect<void, Error>
  /** Connections accepted and not yet closed. */
  readonly open: () => number
}

interface Pair {
  readonly client: net.Socket
  upstream: net.Socket | undefined
  /** Held by a partition that healed without it: never forwards again. */
  stranded: boolean
}

/**
 * Listens on 127.0.0.1 (an ephemeral port) and forwards to `target` in `pass` mode; closes the listener and destroys
 * every connection when the scope closes. Fails when it cannot listen.
 */
export const make = (target: { readonly host: string; readonly port: number }): Effect.Effect<
  TcpProxy,
  Error,
  Scope.Scope
> =>
  Effect.gen(function*() {
    let mode: Mode = "pass"
    const pairs = new Set<Pair>()
    let server: net.Server | undefined
    let port = 0

    const drop = (pair: Pair) => {
      pairs.delete(pair)
      pair.client.destroy()
      pair.upstream?.destroy()
    }
    const reset = (pair: Pair) => {
      pairs.delete(pair)
      if (!pair.client.destroyed) pair.client.resetAndDestroy()
      pair.upstream?.destroy()
    }

    /** Forwards `from` to `to`, honouring backpressure; stops while the proxy is not in `pass`. */
    const forward = (pair: Pair, from: net.Socket, to: net.Socket) => {
      from.on("data", (chunk: Buffer) => {
        if (!to.write(chunk)) {
          from.pause()
          to.once("drain", () => mode !== "blackhole" && !pair.stranded && from.resume())
        }
      })
      from.on("end", () => to.end())
      from.on("close", () => drop(pair))
      from.on("error", () => drop(pair))
    }

    /** Connects a pair's upstream (once) and starts forwarding both ways. */
    const connect = (pair: Pair) => {
      const upstream = net.connect({ host: target.host, port: target.port })
      pair.upstream = upstream
      upstream.setNoDelay(true)
      forward(pair, pair.client, upstream)
      forward(pair, upstream, pair.client)
      pair.client.resume()
    }

    const accept = (client: net.Socket) => {
      client.setNoDelay(true)
      const pair: Pair = { client, upstream: undefined, stranded: false }
      if (mode === "reset") {
        client.on("error", () => {})
        client.resetAndDestroy()
        return
      }
      pairs.add(pair)
      client.on("error", () => drop(pair))
      client.on("close", () => drop(pair))
      // `blackhole`: accepted (paused: pauseOnConnect) and held; connected upstream only when the partition heals.
      if (mode === "pass") connect(pair)
    }

    const listen = (at: number) =>
      Effect.async<void, Error>((resume) => {
        const next = net.createServer({ pauseOnConnect: true }, accept)
        next.once("error", (error) => resume(Effect.fail(error)))
        next.listen(at, "127.0.0.1", () => {
          server = next
          port = (next.address() as net.AddressInfo).port
          resume(Effect.void)
        })
      })

    const unlisten = Effect.sync(() => {
      server?.close()
      server = undefined
    })

    yield* Effect.acquireRelease(listen(0), () =>
      Effect.zipRight(
        unlisten,
        Effect.sync(() => {
          for (const pair of [...pairs]) drop(pair)
        })
      ))

    const set = (next: Mode, options: { readonly strand?: boolean } = {}): Effect.Effect<void, Error> =>
      Effect.suspend(() => {
        const previous = mode
        mode = next
        const listening = next === "refuse"
          ? unlisten
          : server === undefined
          ? listen(port)
          : Effect.void
        return Effect.zipRight(
          listening,
          Effect.sync(() => {
            if (next === "reset") { for (const pair of [...pairs]) reset(pair) }
            if (next === "blackhole") {
              for (const pair of pairs) {
                pair.client.pause()
                pair.upstream?.pause()
              }
            }
            if (next === "pass" && previous !== "pass") {
              for (const pair of pairs) {
                if (pair.stranded) continue
                if (previous === "blackhole" && options.strand === true) pair.stranded = true
                else if (pair.upstream === undefined) connect(pair)
                else {
                  pair.client.resume()
                  pair.upstream.resume()
                }
              }
            }
          })
        )
      })

    return {
      get port() {
        return port
      },
      url: (url: string) => {
        const parsed = new URL(url)
        parsed.hostname = "127.0.0.1"
        parsed.port = String(port)
        return parsed.toString()
      },
      mode: () => mode,
      set,
      open: () => pairs.size
    }
  })
