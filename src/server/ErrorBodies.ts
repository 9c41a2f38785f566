/**
 * ErrorBodies — the one shape every error answer leaves the server in: a JSON object with a `_tag`, a `message`,
 * and no string longer than an excerpt.
 *
 * Prevents: an error body that echoes the request back (a decode error used to quote the whole offending value,
 * up to the 1 MiB body limit, in its message and again in each issue) and an error without a body (the router's
 * 404, a defect's 500), which a client cannot tell from a proxy's. The schema errors' texts are composed by
 * @effect/platform and Effect's formatters, which quote what they were given; rather than trust every producer,
 * each error response is checked here on its way out, once, with a cost bounded by its size.
 *
 * Why 64 characters of a value and 300 of a message: enough to recognise what was sent and what was expected,
 * too little to reflect a payload (or a secret pasted into the wrong field) back into logs and browsers. At most 20
 * issues are kept: a body with a thousand wrong fields needs the first few, and the count.
 */
import { HttpBody, HttpServerResponse } from "@effect/platform"
import { excerpt, excerptChars } from "./InputLimits.js"

/** The longest `message` an error body carries. */
export const maxMessageChars = 300

/** The most `issues` an error body lists. */
export const maxIssues = 20

const statusTags: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  405: "MethodNotAllowed",
  406: "NotAcceptable",
  408: "RequestTimeout",
  409: "Conflict",
  413: "PayloadTooLarge",
  415: "UnsupportedMediaType",
  422: "InvalidRequest",
  429: "TooManyRequests",
  500: "InternalError",
  503: "Unavailable"
}

/** The `_tag` of an error body that has none of its own, by status. */
export const tagOf = (status: number): string => statusTags[status] ?? (status >= 500 ? "InternalError" : "BadRequest")

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** Every string of `value` cut to an excerpt, arrays cut to `maxIssues` items (depth-bounded: bodies are ours). */
const bounded = (value: unknown, depth = 0): unknown => {
  if (typeof value === "string") return excerpt(value, excerptChars * 2)
  if (depth > 8) return null
  if (Array.isArray(value)) return value.slice(0, maxIssues).map((item) => bounded(item, depth + 1))
  if (isRecord(value)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [excerpt(k, excerptChars), bounded(v, depth + 1)]))
  }
  return value
}

const issueText = (issue: unknown): string | undefined => {
  if (!isRecord(issue) || typeof issue.message !== "string") return undefined
  const path = Array.isArray(issue.path) && issue.path.length > 0
    ? issue.path.map((p) => excerpt(String(p), 32)).join(".")
    : "body"
  return `${path}: ${excerpt(issue.message, 120)}`
}

/**
 * The normal form of an error body: `_tag` and `message` always present, a decode error's message rebuilt from its
 * (bounded) issues instead of the formatter's echo of the whole value, every other string cut to an excerpt.
 */
export const normalize = (status: number, body: unknown): Record<string, unknown> => {
  const record = isRecord(body) ? body : {}
  const tag = typeof record._tag === "string" ? excerpt(record._tag, excerptChars) : tagOf(status)
  const issues = Array.isArray(record.issues) ? record.issues : undefined
  const fromIssues = issues?.map(issueText).filter((t): t is string => t !== undefined) ?? []
  const message = tag === "HttpApiDecodeError" && fromIssues.length > 0
    ? `${fromIssues.slice(0, 5).join("; ")}${fromIssues.length > 5 ? `; and ${fromIssues.length - 5} more` : ""}`
    : typeof record.message === "string" && record.message.length > 0
    ? record.message
    : `${tagOf(status)} (HTTP ${status})`
  const rest = bounded(Object.fromEntries(Object.entries(record).filter(([k]) => k !== "_tag" && k !== "message")))
  return {
    _tag: tag,
    message: excerpt(message, maxMessageChars),
    ...(isRecord(rest) ? rest : {}),
    ...(issues !== undefined && issues.length > maxIssues ? { issuesOmitted: issues.length - maxIssues } : {})
  }
}

const decoder = new TextDecoder()

/**
 * `response` with its body in normal form when it is an error (status ≥ 400); anything else untouched. A streamed
 * error body (none exists today) is replaced by a JSON one rather than read.
 */
export const response = (self: HttpServerResponse.HttpServerResponse): HttpServerResponse.HttpServerResponse => {
  if (self.status < 400) return self
  let parsed: unknown = undefined
  if (self.body._tag === "Uint8Array" && (self.body.contentType.includes("json"))) {
    try {
      parsed = JSON.parse(decoder.decode(self.body.body))
    } catch {
      parsed = undefined
    }
  } else if (self.body._tag === "Raw" && typeof self.body.body === "string") {
    try {
      parsed = JSON.parse(self.body.body)
    } catch {
      parsed = undefined
    }
  }
  const answered = HttpServerResponse.setBody(
    self,
    HttpBody.text(JSON.stringify(normalize(self.status, parsed)), "application/json")
  )
  return self.status === 429 ? withRetryAfter(answered, parsed) : answered
}

/**
 * A 429 that says when its limit resets (`resetsAt`: `BudgetExhausted`) says it in `Retry-After` too, in whole
 * seconds from now, so a client's standard back-off waits for the reset rather than hammering until midnight.
 */
const withRetryAfter = (
  self: HttpServerResponse.HttpServerResponse,
  body: unknown
): HttpServerResponse.HttpServerResponse => {
  if (typeof body !== "object" || body === null || !("resetsAt" in body) || typeof body.resetsAt !== "string") {
    return self
  }
  const at = Date.parse(body.resetsAt)
  if (!Number.isFinite(at)) return self
  return HttpServerResponse.setHeader(self, "retry-after", String(Math.max(1, Math.ceil((at - Date.now()) / 1000))))
}
