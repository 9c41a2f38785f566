/**
 * How a provider failure is classified, once, at the adapter boundary. The kind alone decides what the
 * provider chain does next (see `model/ProviderChain`): retry, fail over, or fail the call now.
 */
import { Schema } from "effect"

/** Every kind of provider failure Corral distinguishes. */
export const ErrorKind = Schema.Literal(
  "auth",
  "quota",
  "rate_limit",
  "overloaded",
  "server",
  "timeout",
  "context_overflow",
  "bad_request",
  "refused",
  "filtered"
)
export type ErrorKind = typeof ErrorKind.Type

/** What the chain does with a failure of a given kind. */
export type Disposition = "retry" | "fail_over" | "fail_now"

/**
 * The classification rules of DESIGN §3 step 3: overflow and malformed requests fail now (another provider would
 * get the same request); auth and quota fail over at once (retrying cannot fix a key or a bill); transient kinds
 * retry with backoff. A refusal or a filter is the model's answer, not a transport fault: fail now, the loop exits.
 */
export const disposition = (kind: ErrorKind): Disposition => {
  switch (kind) {
    case "context_overflow":
    case "bad_request":
    case "refused":
    case "filtered":
      return "fail_now"
    case "auth":
    case "quota":
      return "fail_over"
    case "rate_limit":
    case "overloaded":
    case "server":
    case "timeout":
      return "retry"
  }
}
