/**
 * Reading a response body chunk by chunk with ONE idle watchdog per body. A `Stream` with `Stream.timeoutFail` costs a
 * race and a timer per chunk — a large share of a provider call's CPU (docs/benchmarks.md) — so the body's
 * Node stream is read from its own events when the HTTP client is one of @effect/platform-node's (undici or
 * node:http), and the idle bound is a single fiber that sleeps on the `Clock` (TestClock moves it) until the last
 * chunk is `idleTimeoutMs` old. Any other client's body is read as its `Stream`, with the same contract.
 */
import type { HttpClientResponse } from "@effect/platform"
import { Duration, Effect, Fiber, FiberId, Stream } from "effect"
import { Readable } from "node:stream"

/** How one body is read: what each chunk and the end do, and the errors for a silent or a broken body. */
export interface Reader<E> {
  /** The body must make progress at least this often (milliseconds between chunks). */
  readonly idleTimeoutMs: number
  /** The error when no chunk arrived for `idleTimeoutMs`. */
  readonly stalled: () => E
  /** The error when the connection broke before the body ended. */
  readonly dropped: (cause: unknown) => E
  /**
   * Runs synchronously for each chunk, in order: `true` reads on, `false` stops (the read ends at once; the rest of
   * the body is read and dropped in the background, at most `drainBytes` within `idleTimeoutMs`, so that its
   * connection goes back to the pool, and closed past either), an error fails the read (the connection is closed).
   * Must not throw (a throw is a defect).
   */
  readonly chunk: (bytes: Uint8Array) => boolean | E
  /** Runs once when the body ended (not after a stop); an error fails the read. */
  readonly end: () => E | undefined
}

/**
 * How much of a body is read and dropped after a reader stopped (an SSE stream's `[DONE]` or `message_stop`): what
 * follows an end marker is a blank line or nothing, so this is generous; a body that goes on for more is not a reply
 * worth keeping the connection for. Closing a body before its end costs its connection — the next call opens a new
 * one (a TLS handshake against a real provider). Measured, 40 streamed calls through the OpenAI-compatible adapter
 * over undici against a server that ends each body 1 ms after `[DONE]`: 70 connections before this drain (a closed
 * one is also retried as stale), 1 after.
 */
export const drainBytes = 64 * 1024

/**
 * Reads `response`'s body through `reader`. Fails with `reader`'s errors; an interrupted read closes the body's
 * connection and leaves no timer behind.
 */
export const read = <E>(response: HttpClientResponse.HttpClientResponse, reader: Reader<E>): Effect.Effect<void, E> => {
  const node = nodeBody(response)
  return node === undefined ? readStream(response, reader) : readNode(node, reader)
}

/** A body readable from its Node stream, and how to abort its request. */
export interface NodeBody {
  readonly readable: Readable
  /** Aborts the request the body belongs to (the client's own controller), if it has one. */
  readonly abort: () => void
}

/**
 * The Node stream behind a response of @effect/platform-node's clients, or `undefined` for any other client.
 * @effect/platform wraps each response of a client built with `HttpClient.make` (its `InterruptibleResponse`, not
 * exported) around the driver's: `original.source` is undici's `ResponseData` (its `body` a Readable) or node:http's
 * `IncomingMessage`. Exported for the test that notices when an upgrade moves them (reads would fall back to the
 * slower `Stream`).
 */
export const nodeBody = (response: HttpClientResponse.HttpClientResponse): NodeBody | undefined => {
  const outer = response as unknown as { readonly original?: unknown; readonly controller?: unknown }
  const inner = (outer.original ?? response) as { readonly source?: unknown }
  const source = inner.source as { readonly body?: unknown } | undefined
  const readable = source instanceof Readable ? source : source?.body instanceof Readable ? source.body : undefined
  if (readable === undefined) return undefined
  const controller = outer.controller instanceof AbortController ? outer.controller : undefined
  return { readable, abort: () => controller?.abort() }
}

const readNode = <E>(body: NodeBody, reader: Reader<E>): Effect.Effect<void, E> =>
  Effect.flatMap(Effect.clock, (clock) => {
    const readable = body.readable
    let last = clock.unsafeCurrentTimeMillis()
    let settle: ((outcome: Effect.Effect<void, E>) => void) | undefined
    let stalled = false

    // Sleeps until the last chunk is `idleTimeoutMs` old: one timer per idle period, none per chunk.
    const watchdog = Effect.suspend(function check(): Effect.Effect<void> {
      const wait = reader.idleTimeoutMs - (clock.unsafeCurrentTimeMillis() - last)
      if (wait > 0) return Effect.flatMap(clock.sleep(Duration.millis(wait)), check)
      return Effect.sync(() => {
        stalled = true
        settle?.(Effect.fail(reader.stalled()))
      })
    })

    const reading = Effect.async<void, E>((resume) => {
      const detach = () => {
        readable.off("data", onData)
        readable.off("end", onEnd)
        readable.off("error", onError)
        readable.off("close", onClose)
        settle = undefined
      }
      // Destroying an unfinished body aborts its request: the connection is closed, not returned to the pool.
      const close = () => {
        if (readable.readableEnded) return
        body.abort()
        readable.destroy()
      }
      const finish = (outcome: Effect.Effect<void, E>, closeBody: boolean) => {
        if (settle === undefined) return
        detach()
        if (closeBody) close()
        resume(outcome)
      }
      const onData = (bytes: Uint8Array) => {
        last = clock.unsafeCurrentTimeMillis()
        let verdict: boolean | E
        try {
          verdict = reader.chunk(bytes)
        } catch (defect) {
          return finish(Effect.die(defect), true)
        }
        if (verdict === true) return
        if (verdict === false) return stop()
        finish(Effect.fail(verdict), true)
      }
      // The reader has what it wanted: the read ends now, and the rest of the body is dropped as it arrives.
      const stop = () => {
        if (settle === undefined) return
        detach()
        if (readable.readableEnded) return resume(Effect.void)
        let drained = 0
        let timer: Fiber.RuntimeFiber<void> | undefined
        let quitted = false
        const quit = () => {
          quitted = true
          timer?.unsafeInterruptAsFork(FiberId.none)
          readable.off("data", onRest)
          readable.off("end", quit)
          readable.off("error", quit)
          readable.off("close", quit)
          close()
        }
        const onRest = (bytes: Uint8Array) => {
          drained += bytes.length
          if (drained > drainBytes) quit()
        }
        readable.on("data", onRest)
        readable.on("end", quit)
        readable.on("error", quit)
        readable.on("close", quit)
        // The drain's time bound: one sleep on the Clock, interrupted as soon as the body ends.
        const bound = Effect.zipRight(clock.sleep(Duration.millis(reader.idleTimeoutMs)), Effect.sync(quit))
        resume(Effect.suspend(() => {
          if (quitted) return Effect.void
          return Effect.map(Effect.forkDaemon(bound), (fiber) => {
            timer = fiber
          })
        }))
      }
      const onEnd = () => {
        let error: E | undefined
        try {
          error = reader.end()
        } catch (defect) {
          return finish(Effect.die(defect), false)
        }
        finish(error === undefined ? Effect.void : Effect.fail(error), false)
      }
      const onError = (cause: unknown) => finish(Effect.fail(reader.dropped(cause)), true)
      const onClose = () => finish(Effect.fail(reader.dropped(new Error("the connection closed early"))), false)

      settle = (outcome) => finish(outcome, true)
      if (stalled) {
        settle(Effect.fail(reader.stalled()))
        return
      }
      if (readable.errored !== null) return onError(readable.errored)
      if (readable.destroyed) return onClose()
      readable.on("data", onData)
      readable.on("end", onEnd)
      readable.on("error", onError)
      readable.on("close", onClose)
      return Effect.sync(() => {
        detach()
        close()
      })
    })

    return Effect.acquireUseRelease(
      Effect.fork(Effect.interruptible(watchdog)),
      () => reading,
      (fiber) => Fiber.interruptFork(fiber)
    )
  })

// Clients other than platform-node's: the body's `Stream`, with the idle bound per chunk.
const readStream = <E>(response: HttpClientResponse.HttpClientResponse, reader: Reader<E>): Effect.Effect<void, E> =>
  Effect.suspend(() => {
    let stopped = false
    return response.stream.pipe(
      Stream.mapError((error) => reader.dropped(error.cause)),
      Stream.timeoutFail(reader.stalled, Duration.millis(reader.idleTimeoutMs)),
      Stream.runForEachWhile((bytes) =>
        Effect.suspend(() => {
          const verdict = reader.chunk(bytes)
          if (verdict === false) stopped = true
          return typeof verdict === "boolean" ? Effect.succeed(verdict) : Effect.fail(verdict)
        })
      ),
      Effect.flatMap(() => {
        if (stopped) return Effect.void
        const error = reader.end()
        return error === undefined ? Effect.void : Effect.fail(error)
      })
    )
  })
