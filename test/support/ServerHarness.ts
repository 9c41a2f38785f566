/**
 * The server under test: real `Server.layer` listening on 127.0.0.1 port 0, a typed client generated from `Api`,
 * raw fetch helpers for what the typed client cannot express (malformed bodies, SSE), and child-process helpers for
 * the CLI. Waiting is always a bounded poll on a real condition, never a fixed sleep.
 */
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest, HttpServer } from "@effect/platform"
import { Duration, Effect, Schedule } from "effect"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import { fileURLToPath } from "node:url"
import * as Config from "../../src/config/Config.js"
import { Api } from "../../src/server/Api.js"

/** Test settings: memory store, any free port, a quick demo model. */
export const settings = (overrides: Partial<Config.Settings> = {}): Config.Settings => ({
  ...Config.defaults,
  database: { _tag: "Memory" },
  demo: { enabled: true, delayMs: 20 },
  ...overrides,
  server: { ...Config.defaults.server, port: 0, keepAliveMs: 500, ...overrides.server }
})

/** The base URL of the server in context. */
export const baseUrl = Effect.map(HttpServer.HttpServer, (server) => {
  const address = server.address
  if (address._tag !== "TcpAddress") throw new Error("expected a TCP address")
  return `http://127.0.0.1:${address.port}`
})

/** A typed client of the server in context, optionally sending `key` as a bearer token. */
export const client = (key?: string) =>
  Effect.flatMap(baseUrl, (url) =>
    HttpApiClient.make(Api, {
      baseUrl: url,
      ...(key === undefined ? {} : { transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(key)) })
    })).pipe(Effect.provide(FetchHttpClient.layer))

/** A raw response: status, headers and body text. */
export interface Raw {
  readonly status: number
  readonly contentType: string
  readonly text: string
  /** The response headers, lowercase names. */
  readonly headers: Readonly<Record<string, string>>
  /** Milliseconds from sending to the whole body read (headers only, for an event stream). */
  readonly elapsedMs: number
}

/** Options of `raw`. */
export interface RawInit {
  readonly method?: string
  readonly body?: string
  readonly headers?: Record<string, string>
  /** Dies when no complete answer came within this bound (default 10 s): "every request gets an answer". */
  readonly timeoutMs?: number
}

/**
 * A raw request with fetch (any body, any header). Never fails with an HTTP status; network errors and answers
 * later than `timeoutMs` die. An event stream is read up to its headers only, then closed.
 */
export const raw = (url: string, init: RawInit = {}): Effect.Effect<Raw> =>
  Effect.promise(async () => {
    const started = performance.now()
    const timeoutMs = init.timeoutMs ?? 10_000
    const signal = AbortSignal.timeout(timeoutMs)
    const method = init.method ?? "GET"
    try {
      const response = await fetch(url, {
        method,
        ...(init.body === undefined ? {} : { body: init.body }),
        headers: init.headers ?? {},
        signal
      })
      const contentType = response.headers.get("content-type") ?? ""
      let text = ""
      if (contentType.startsWith("text/event-stream")) await response.body?.cancel()
      else text = await response.text()
      return {
        status: response.status,
        contentType,
        text,
        headers: Object.fromEntries(response.headers.entries()),
        elapsedMs: performance.now() - started
      }
    } catch (error) {
      if (signal.aborted) throw new Error(`no answer within ${timeoutMs} ms: ${method} ${url.slice(0, 200)}`)
      throw error
    }
  })

/** One parsed SSE event. */
export interface SseEvent {
  readonly id: number | undefined
  readonly event: string
  readonly data: unknown
}

/**
 * Reads the SSE stream at `url` until `stop` says so (or the stream ends), then disconnects. Times out (dies)
 * after `timeout`.
 */
export const readSse = (
  url: string,
  stop: (events: ReadonlyArray<SseEvent>) => boolean,
  options: { readonly headers?: Record<string, string>; readonly timeout?: Duration.DurationInput } = {}
): Effect.Effect<ReadonlyArray<SseEvent>> =>
  Effect.promise(async (signal) => {
    const controller = new AbortController()
    signal.addEventListener("abort", () => controller.abort())
    const timer = setTimeout(() => controller.abort(), Duration.toMillis(options.timeout ?? "20 seconds"))
    const events: Array<SseEvent> = []
    try {
      const response = await fetch(url, { headers: options.headers ?? {}, signal: controller.signal })
      if (response.body === null) return events
      const reader = response.body.getReader()
      const decoder = new TextDecoder()
      let buffer = ""
      while (!stop(events)) {
        const { done, value } = await reader.read()
        if (done) break
        buffer += decoder.decode(value, { stream: true })
        let cut: number
        while ((cut = buffer.indexOf("\n\n")) >= 0 && !stop(events)) {
          const block = buffer.slice(0, cut)
          buffer = buffer.slice(cut + 2)
          let id: number | undefined
          let event = "message"
          const data: Array<string> = []
          for (const line of block.split("\n")) {
            if (line.startsWith("id: ")) id = Number(line.slice(4))
            else if (line.startsWith("event: ")) event = line.slice(7)
            else if (line.startsWith("data: ")) data.push(line.slice(6))
          }
          if (data.length > 0) events.push({ id, event, data: JSON.parse(data.join("\n")) })
        }
      }
      return events
    } catch (error) {
      if (controller.signal.aborted && !signal.aborted) throw new Error(`SSE read timed out: ${String(error)}`)
      return events
    } finally {
      clearTimeout(timer)
      controller.abort()
    }
  })

/** Polls `check` every 20 ms until it returns a value, for at most `timeout` (then dies naming `what`). */
export const eventually = <A, E, R>(
  what: string,
  check: Effect.Effect<A | undefined, E, R>,
  timeout: Duration.DurationInput = "20 seconds"
): Effect.Effect<A, E, R> =>
  check.pipe(
    Effect.flatMap((value) => value === undefined ? Effect.fail("pending" as const) : Effect.succeed(value)),
    Effect.retry({ while: (e) => e === "pending", schedule: Schedule.spaced("20 millis") }),
    Effect.timeoutFail({ duration: timeout, onTimeout: () => "timeout" as const }),
    Effect.catchIf(
      (e): e is "pending" | "timeout" => e === "pending" || e === "timeout",
      () => Effect.dieMessage(`timed out waiting for ${what}`)
    )
  ) as Effect.Effect<A, E, R>

/** The repository's `bin/corral.js`. */
export const bin = fileURLToPath(new URL("../../bin/corral.js", import.meta.url))

/** A `corral` child process with its output collected. */
export interface Child {
  readonly process: ChildProcess
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves with the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>
}

/** Spawns `corral ...args` with `env` added to the environment. */
export const corral = (args: ReadonlyArray<string>, env: Record<string, string> = {}, cwd?: string): Child => {
  const child = spawn(process.execPath, [bin, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    ...(cwd === undefined ? {} : { cwd })
  })
  let out = ""
  let err = ""
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString("utf8")))
  child.stderr.on("data", (chunk: Buffer) => (err += chunk.toString("utf8")))
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  return { process: child, stdout: () => out, stderr: () => err, exited }
}

/** Runs `corral ...args` to completion (at most `timeoutMs`, then kills it and dies). */
export const corralRun = (
  args: ReadonlyArray<string>,
  env: Record<string, string> = {},
  timeoutMs = 90_000
): Effect.Effect<{ readonly code: number | null; readonly stdout: string; readonly stderr: string }> =>
  Effect.promise(async () => {
    const child = corral(args, env)
    const timer = setTimeout(() => child.process.kill("SIGKILL"), timeoutMs)
    const code = await child.exited
    clearTimeout(timer)
    return { code, stdout: child.stdout(), stderr: child.stderr() }
  })
