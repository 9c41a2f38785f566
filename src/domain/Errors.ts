/**
 * Expected boundary errors. Tagged schemas, so they serialise to the store, to HTTP and over RPC.
 * A tripped rail is never one of these: it is an exit reason.
 */
import { Schema } from "effect"
import { ErrorKind } from "./ErrorKind.js"
import { Usage } from "./Usage.js"

/** A provider call failed; `kind` decides retry / fail over / fail now. `usage` is what the provider still charged. */
export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  kind: ErrorKind,
  message: Schema.String,
  provider: Schema.optional(Schema.String),
  status: Schema.optional(Schema.Int),
  /** Retry-After as the provider stated it, in milliseconds (uncapped: the chain applies the cap). */
  retryAfterMs: Schema.optional(Schema.NonNegativeInt),
  usage: Schema.optional(Usage)
}) {}

/** Every provider of the route is spent. Sticky: the session's next burst exits `provider_failed` at once. */
export class ProviderExhausted extends Schema.TaggedError<ProviderExhausted>()("ProviderExhausted", {
  message: Schema.String,
  last: Schema.optional(ProviderError)
}) {}

/** A transcript write (or another store operation) failed or timed out: infrastructure, not an exit reason. */
export class PersistenceFailed extends Schema.TaggedError<PersistenceFailed>()("PersistenceFailed", {
  operation: Schema.String,
  message: Schema.String
}) {}

/** No session with this id is visible to the caller's org. */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  sessionId: Schema.String
}) {}

/** No agent with this id (and version) is published in the caller's org. */
export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()("AgentNotFound", {
  agentId: Schema.String,
  version: Schema.optional(Schema.Int)
}) {}

/** One problem with a submitted document: where (a dotted path) and what was expected. */
export class FieldIssue extends Schema.Class<FieldIssue>("FieldIssue")({
  path: Schema.String,
  message: Schema.String
}) {}

/** An agent spec (or another request) is invalid; every problem is listed with its field. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", {
  message: Schema.String,
  issues: Schema.Array(FieldIssue)
}) {}

/** A request crossed a scope boundary (another scope's session or artifact). */
export class ScopeMismatch extends Schema.TaggedError<ScopeMismatch>()("ScopeMismatch", {
  message: Schema.String,
  expected: Schema.String,
  actual: Schema.String
}) {}

/** A message was sent to a session that cannot take it now (for example `Approve` with nothing pending). */
export class InvalidSessionState extends Schema.TaggedError<InvalidSessionState>()("InvalidSessionState", {
  sessionId: Schema.String,
  message: Schema.String
}) {}
