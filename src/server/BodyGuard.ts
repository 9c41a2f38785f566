/**
 * BodyGuard — the server's front door: every request gets an answer, and what must never reach a handler is
 * answered here, before routing: a server that drains (503), a wrong method on a known path (405 with `Allow`), a
 * request target with a malformed escape, a control character or an overlong query value (400), a body over the
 * size limit (413), a body that does not arrive in time (408), a body not declared as JSON (415), a body that is
 * not JSON or breaks an `InputLimits` bound (400 naming the limit). On the way out every error answer is put in normal form (`ErrorBodies`): JSON with a
 * `_tag`, a `message`, and excerpts only; a path nobody serves is a 404 with such a body, and a defect a 500 with
 * one (logged in full, never shown).
 *
 * Why the guard hands the router a request whose body is already read: the guard must read the body to bound it,
 * and a Node request body is a stream that can be read once. The platform request caches only its `text`; its
 * `arrayBuffer`, `stream` and `multipart` read the stream again. HttpApiBuilder decodes a payload as JSON only when
 * the content type contains `application/json`, and reads any other type — `application/vnd.api+json`,
 * `application/merge-patch+json` — with `arrayBuffer`: from a stream already drained, a read that never ends. Each
 * such request hung until the client gave up, holding its fiber, socket and buffers. So the router gets a request
 * whose every body accessor answers from the text read once, declared as `application/json`; no accessor can
 * wait on a drained stream, whatever the content type.
 */
import { HttpApp, HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Fiber, Option, Stream } from "effect"
import * as ErrorBodies from "./ErrorBodies.js"
import * as InputLimits from "./InputLimits.js"
import * as Routes from "./Routes.js"

/** Options of `middleware`. */
export interface Options {
  readonly limitBytes: number
  /** Whether the server is draining (then everything but the probes gets 503). */
  readonly draining: () => boolean
  /** How long a body may take to arrive (default `bodyReadTimeoutMs`); then 408 and the connection is closed. */
  readonly readTimeoutMs?: number
}

/**
 * How long a request body may take to arrive. A client that declares a body and sends it a byte at a time holds a
 * fiber, a socket and a buffer for as long as it likes; 30 s is far beyond any real upload of at most
 * `server.bodyLimitBytes` (1 MiB by default), and far short of Node's own 5-minute request timeout.
 */
export const bodyReadTimeoutMs = 30_000

const withBody = new Set(["POST", "PUT", "PATCH", "DELETE"])

const error = (status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  HttpServerResponse.unsafeJson(body, { status, headers })

const close = { connection: "close" }

const causeMessage = (error: unknown): string | undefined => {
  const cause: unknown = typeof error === "object" && error !== null ? Reflect.get(error, "cause") : undefined
  return cause instanceof Error ? cause.message : undefined
}

const tooLarge = (limit: number) =>
  error(413, {
    _tag: "PayloadTooLarge",
    message: `the request body exceeds ${limit} bytes (server.bodyLimitBytes)`,
    limitBytes: limit
  }, close)

/** A 400 in the router's decode-error shape, so clients handle one format for every bad input. */
const badInput = (violation: InputLimits.Violation) =>
  error(400, {
    _tag: "HttpApiDecodeError",
    message: violation.message,
    limit: violation.limit,
    issues: [{ _tag: "Type", path: violation.path, message: violation.message }]
  })

/**
 * The media type of a body, if Corral reads it: `application/json` or any `application/*+json`, with no charset
 * or a UTF-8 one (JSON is UTF-8 on the wire; another charset would be decoded wrongly, not refused).
 */
export const jsonMediaType = (header: string): boolean => {
  const [type = "", ...params] = header.toLowerCase().split(";").map((part) => part.trim())
  if (type !== "application/json" && !/^application\/[a-z0-9!#$&^_.-]+(\+[a-z0-9!#$&^_.-]+)*\+json$/.test(type)) {
    return false
  }
  return params.every((param) => {
    const [name = "", value = ""] = param.split("=").map((s) => s.trim())
    return name !== "charset" || /^"?utf-?8"?$/.test(value)
  })
}

const encoder = new TextEncoder()

/**
 * Makes every body accessor of `request` answer from `text` (already read) and its content type say
 * `application/json` (see the module header for why both matter). The request object itself is changed, not
 * wrapped: the server marks the object it answered, and a wrapper's mark would not be seen on the original, which
 * would then be answered twice.
 */
const readOnce = (request: HttpServerRequest.HttpServerRequest, text: string, value: unknown): void => {
  const bytes = encoder.encode(text)
  const headers = { ...request.headers, "content-type": "application/json" }
  Object.defineProperties(request, {
    headers: { value: headers },
    text: { value: Effect.succeed(text) },
    json: { value: Effect.succeed(value) },
    arrayBuffer: { value: Effect.succeed(bytes.buffer) },
    stream: { value: Stream.succeed(bytes) },
    urlParamsBody: { value: Effect.die("the body is JSON") },
    multipart: { value: Effect.die("the body is JSON") },
    multipartStream: { value: Stream.die("the body is JSON") }
  })
}

/** What reaches no route: 405 with `Allow` when the path is served with other methods, else 404. */
const unrouted = (method: string, path: string) => {
  const allow = Routes.allowed(path)
  if (allow.length > 0 && !allow.includes(method)) {
    return error(405, {
      _tag: "MethodNotAllowed",
      message: `${InputLimits.excerpt(method, 16)} is not allowed here; use ${allow.join(", ")}`,
      allow
    }, { allow: allow.join(", ") })
  }
  return error(404, { _tag: "NotFound", message: "no route serves this path (see /openapi.json)" })
}

const isRouteNotFound = (cause: Cause.Cause<unknown>) =>
  Option.exists(
    Cause.failureOption(cause),
    (e) => typeof e === "object" && e !== null && "_tag" in e && e._tag === "RouteNotFound"
  )

/**
 * The last look at an answer before it is written: the server's bodiless 404 (no route) and 500 (a defect) get
 * JSON bodies, and every error body is put in normal form. It runs as a pre-response handler because the server
 * writes the app's answer before a serve middleware sees it.
 */
const finish = (request: HttpServerRequest.HttpServerRequest, response: HttpServerResponse.HttpServerResponse) =>
  Effect.sync(() => {
    if (response.body._tag === "Empty" && response.status === 404) {
      return unrouted(request.method, request.url.split("?")[0] ?? "")
    }
    if (response.body._tag === "Empty" && response.status >= 500) {
      return error(response.status, {
        _tag: ErrorBodies.tagOf(response.status),
        message: "the server failed to answer; the failure is logged"
      })
    }
    return ErrorBodies.response(response)
  })

/** Runs `app` with `finish` on its answer; a defect is logged in full (the client sees only that it happened). */
const answered = <E, R>(app: HttpApp.Default<E, R>, method: string, path: string): HttpApp.Default<E, R> =>
  HttpApp.withPreResponseHandler(
    Effect.tapErrorCause(app, (cause) =>
      isRouteNotFound(cause) || Cause.isInterruptedOnly(cause)
        ? Effect.void
        : Effect.logError(`unanswered ${method} ${InputLimits.excerpt(path, 200)}`, cause)),
    finish
  )

/** The guard as an HttpApp middleware. Adds no failure; every refusal is a JSON response. */
export const middleware = (options: Options) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.map(guarded(options, app), ErrorBodies.response)

const guarded = <E, R>(options: Options, app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const path = request.url.split("?")[0] ?? ""
    const method = request.method
    if (options.draining() && path !== "/healthz" && path !== "/readyz") {
      return error(
        503,
        { _tag: "Unavailable", message: "the server is shutting down; retry on another instance" },
        close
      )
    }
    const allow = Routes.allowed(path)
    if (allow.length > 0 && !allow.includes(method)) return unrouted(method, path)
    const target = InputLimits.checkTarget(request.url)
    if (Option.isSome(target)) return badInput(target.value)
    if (!withBody.has(method)) return yield* answered(app, method, path)
    const contentType = request.headers["content-type"] ?? ""
    if (contentType !== "" && !jsonMediaType(contentType)) {
      return error(415, {
        _tag: "UnsupportedMediaType",
        message: `request bodies must be application/json (or application/*+json, UTF-8), not "${
          InputLimits.excerpt(contentType, 64)
        }"`
      })
    }
    const declared = Number(request.headers["content-length"] ?? "0")
    if (Number.isFinite(declared) && declared > options.limitBytes) return tooLarge(options.limitBytes)
    // The read runs on its own fiber and is never interrupted: interrupting it destroys the Node request, and with
    // it the socket the 408 must be written to. On timeout only the wait ends (interruptibly: the server runs each
    // request uninterruptibly); the 408 closes the connection.
    const reading = yield* Effect.forkDaemon(request.text.pipe(
      HttpIncomingMessage.withMaxBodySize(Option.some(options.limitBytes)),
      Effect.either
    ))
    const read = yield* Fiber.join(reading).pipe(
      Effect.timeoutOption(options.readTimeoutMs ?? bodyReadTimeoutMs),
      Effect.interruptible
    )
    if (Option.isNone(read)) {
      // The read ends when the connection does; if the client keeps it open, it is ended a second after the 408.
      yield* Effect.forkDaemon(Effect.delay(Fiber.interrupt(reading), "1 second"))
      return error(408, {
        _tag: "RequestTimeout",
        message: `the request body did not arrive within ${options.readTimeoutMs ?? bodyReadTimeoutMs} ms`
      }, close)
    }
    const text = read.value
    if (text._tag === "Left") {
      return causeMessage(text.left) === "maxBytes exceeded"
        ? tooLarge(options.limitBytes)
        : error(400, { _tag: "BadRequest", message: "the request body could not be read" }, close)
    }
    const scanned = InputLimits.scanJson(text.right)
    if (Option.isSome(scanned)) return badInput(scanned.value)
    let value: unknown = null
    if (text.right.length > 0) {
      try {
        value = JSON.parse(text.right)
      } catch (cause) {
        const detail = cause instanceof Error ? InputLimits.excerpt(cause.message, 120) : "unparseable"
        return badInput({ limit: "json", path: [], message: `the body is not valid JSON: ${detail}` })
      }
    }
    const checked = InputLimits.checkValue(value)
    if (Option.isSome(checked)) return badInput(checked.value)
    readOnce(request, text.right, value)
    return yield* answered(app, method, path)
  })
