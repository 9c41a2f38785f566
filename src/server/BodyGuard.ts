/**
 * BodyGuard — answers what must never reach a handler, before routing: a body over the size limit (413), a body
 * not declared as JSON (415), a body that is not JSON at all (400), and any request while the server drains (503).
 *
 * Why here and not in the handlers: the HttpApi router reads JSON bodies with `orDie`, so a malformed or oversized
 * body would surface as a 500 — a client's mistake reported as the server's. The guard reads the body once, within
 * the limit (the read is cached, so the router parses the same text), and answers bad input itself. The 400 for
 * malformed JSON has the same shape as the router's `HttpApiDecodeError`, so clients handle one error format.
 */
import { HttpIncomingMessage, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import type { HttpApp } from "@effect/platform"
import { Effect, Option } from "effect"

/** Options of `middleware`. */
export interface Options {
  readonly limitBytes: number
  /** Whether the server is draining (then everything but the probes gets 503). */
  readonly draining: () => boolean
}

const withBody = new Set(["POST", "PUT", "PATCH"])

const error = (status: number, body: Record<string, unknown>, close = false) =>
  HttpServerResponse.unsafeJson(body, { status, ...(close ? { headers: { connection: "close" } } : {}) })

const causeMessage = (error: unknown): string | undefined => {
  const cause: unknown = typeof error === "object" && error !== null ? Reflect.get(error, "cause") : undefined
  return cause instanceof Error ? cause.message : undefined
}

const tooLarge = (limit: number) =>
  error(413, {
    _tag: "PayloadTooLarge",
    message: `the request body exceeds ${limit} bytes (server.bodyLimitBytes)`,
    limitBytes: limit
  }, true)

/** The guard as an HttpApp middleware. Adds no failure; every refusal is a JSON response. */
export const middleware = (options: Options) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const path = request.url.split("?")[0] ?? ""
    if (options.draining() && path !== "/healthz" && path !== "/readyz") {
      return error(
        503,
        { _tag: "Unavailable", message: "the server is shutting down; retry on another instance" },
        true
      )
    }
    if (!withBody.has(request.method)) return yield* app
    const contentType = (request.headers["content-type"] ?? "").toLowerCase()
    if (contentType !== "" && !/^application\/([a-z0-9.+-]*\+)?json\b/.test(contentType)) {
      return error(415, {
        _tag: "UnsupportedMediaType",
        message: `request bodies must be application/json, not "${contentType.slice(0, 100)}"`
      })
    }
    const declared = Number(request.headers["content-length"] ?? "0")
    if (Number.isFinite(declared) && declared > options.limitBytes) return tooLarge(options.limitBytes)
    const text = yield* request.text.pipe(
      HttpIncomingMessage.withMaxBodySize(Option.some(options.limitBytes)),
      Effect.either
    )
    if (text._tag === "Left") {
      return causeMessage(text.left) === "maxBytes exceeded"
        ? tooLarge(options.limitBytes)
        : error(400, { _tag: "BadRequest", message: "the request body could not be read" }, true)
    }
    if (text.right.length > 0) {
      try {
        JSON.parse(text.right)
      } catch (cause) {
        const message = `the body is not valid JSON: ${cause instanceof Error ? cause.message : String(cause)}`
        return error(400, {
          _tag: "HttpApiDecodeError",
          message,
          issues: [{ _tag: "Type", path: [], message }]
        })
      }
    }
    return yield* app
  })
