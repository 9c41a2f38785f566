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

/**
 * No session with this id is visible to the caller's org. `message` defaults to a sentence that does not say
 * whether the session exists in another org (it is a 404 either way).
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  sessionId: Schema.String,
  message: Schema.String
}) {
  constructor(
    props: { readonly sessionId: string; readonly message?: string },
    options?: Schema.MakeOptions
  ) {
    super(
      { sessionId: props.sessionId, message: props.message ?? "no session with this id is visible to you" },
      options
    )
  }
}

/** No agent with this id (and version) is published in the caller's org. `message` defaults to saying which. */
export class AgentNotFound extends Schema.TaggedError<AgentNotFound>()("AgentNotFound", {
  agentId: Schema.String,
  version: Schema.optional(Schema.Int),
  message: Schema.String
}) {
  constructor(
    props: { readonly agentId: string; readonly version?: number | undefined; readonly message?: string },
    options?: Schema.MakeOptions
  ) {
    super({
      agentId: props.agentId,
      ...(props.version === undefined ? {} : { version: props.version }),
      message: props.message ??
        (props.version === undefined
          ? "no agent with this id is published in your org"
          : `no version ${props.version} of this agent is published in your org`)
    }, options)
  }
}

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

/**
 * A message was sent to a session that cannot take it now (for example `Approve` with nothing pending). `reason`
 * is a stable code when there is one (a refused approval token: `unknown`, `other_principal`, `not_pending`,
 * `spent`, `expired`, `mismatch`).
 */
export class InvalidSessionState extends Schema.TaggedError<InvalidSessionState>()("InvalidSessionState", {
  sessionId: Schema.String,
  message: Schema.String,
  reason: Schema.optional(Schema.String)
}) {}

/**
 * A decision came with a token whose write was already decided: the first decision stands, and this one did
 * nothing. Names the decision taken, so a client that retried an "approve" learns whether the write ran.
 */
export class AlreadyDecided extends Schema.TaggedError<AlreadyDecided>()("AlreadyDecided", {
  sessionId: Schema.String,
  message: Schema.String,
  reason: Schema.Literal("already_decided"),
  /** The decision that was taken (and stands). */
  decision: Schema.Literal("approve", "reject"),
  /** The tool call it decided. */
  callId: Schema.String
}) {}
