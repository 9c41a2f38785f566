/**
 * Expected boundary errors. Tagged schemas, so they serialise to the store, to HTTP and over RPC.
 * A tripped rail is never one of these: it is an exit reason.
 */
import { ParseResult, Schema } from "effect"
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

/** No agent with this id (and version) is published in the caller's org. `message` defaults to naming both. */
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
          ? `no agent ${JSON.stringify(props.agentId)} is published in your org`
          : `no version ${props.version} of agent ${JSON.stringify(props.agentId)} is published in your org`)
    }, options)
  }
}

/** One problem with a submitted document: where (a dotted path) and what was expected. */
export class FieldIssue extends Schema.Class<FieldIssue>("FieldIssue")({
  path: Schema.String,
  message: Schema.String
}) {}

/** How `fieldIssues` renders a path (default: dotted keys, `(root)` for none). */
export interface FieldIssuesOptions {
  readonly prefix?: ReadonlyArray<PropertyKey>
  readonly render?: (path: ReadonlyArray<PropertyKey>) => string
  /** The message for a key the schema does not know (default: Effect's own, "is unexpected"). */
  readonly unexpected?: string
}

const dotted = (path: ReadonlyArray<PropertyKey>): string =>
  path.map(String).filter((key) => key.length > 0).join(".") || "(root)"

const expectedActual = /^Expected ([\s\S]*), actual ([\s\S]*)$/

/**
 * A parse error as one `FieldIssue` per field. Effect reports a union member by member (a bad exit reason was eight
 * "Expected "burst_limit", actual …" lines, an optional field two, the second "Expected undefined"); a person
 * reading the error wants one line for one bad value: the alternatives are merged ("Expected one of …, actual …"),
 * and the "Expected undefined" echo of an optional field is dropped when the field has a better line, or when the
 * problem is reported deeper inside it.
 */
export const fieldIssues = (error: ParseResult.ParseError, options: FieldIssuesOptions = {}): Array<FieldIssue> => {
  const render = options.render ?? dotted
  const byPath = new Map<string, Array<ParseResult.ArrayFormatterIssue>>()
  for (const issue of ParseResult.ArrayFormatter.formatErrorSync(error)) {
    const path = render([...(options.prefix ?? []), ...issue.path])
    byPath.set(path, [...(byPath.get(path) ?? []), issue])
  }
  const paths = [...byPath.keys()]
  const deeper = (path: string) =>
    paths.some((other) => other !== path && (other.startsWith(`${path}.`) || other.startsWith(`${path}[`)))
  return paths.flatMap((path) => {
    const all = byPath.get(path)!
    const echo = (issue: ParseResult.ArrayFormatterIssue) => issue.message.startsWith("Expected undefined, actual")
    const useful = all.filter((issue) => !echo(issue))
    if (useful.length === 0 && deeper(path)) return []
    const kept = useful.length === 0 ? all.slice(0, 1) : useful
    const expected: Array<string> = []
    let actual: string | undefined
    const others: Array<string> = []
    for (const issue of kept) {
      const match = issue._tag === "Unexpected" ? null : expectedActual.exec(issue.message)
      if (match !== null && (actual === undefined || actual === match[2])) {
        if (!expected.includes(match[1]!)) expected.push(match[1]!)
        actual = match[2]
      } else {
        const message = issue._tag === "Unexpected" && options.unexpected !== undefined
          ? options.unexpected
          : issue.message
        if (!others.includes(message)) others.push(message)
      }
    }
    const merged = expected.length === 0 ? [] : [
      `Expected ${expected.length === 1 ? expected[0] : `one of ${expected.join(", ")}`}, actual ${actual}`
    ]
    return [new FieldIssue({ path, message: [...merged, ...others].join("; ") })]
  })
}

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

/**
 * The org's daily budget is spent (`rails/OrgBudget`): a new burst of its sessions does not start until the budget
 * resets (`resetsAt`, the next UTC midnight). Nothing was stored or sent. HTTP 429 with `Retry-After`.
 */
export class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>()("BudgetExhausted", {
  message: Schema.String,
  orgId: Schema.String,
  /** The daily budget, micro-dollars. */
  perDayMicros: Schema.Int,
  /** What the org spent today (UTC), micro-dollars. */
  spentMicros: Schema.Int,
  /** When the budget resets: ISO 8601, UTC midnight. */
  resetsAt: Schema.String
}) {}

/**
 * Every failure a `Corral` service method can fail with — the one union the narrower ones below derive from. A host
 * that handles these eight tags (`Effect.catchTags`) has handled every typed failure of the embedding surface; a rail
 * that trips is an exit reason on the session, never one of these.
 *
 * As a schema it decodes an error body from the wire (`{ _tag, message, ... }`) into the matching class.
 */
export const CorralError = Schema.Union(
  InvalidRequest,
  AgentNotFound,
  SessionNotFound,
  ScopeMismatch,
  InvalidSessionState,
  AlreadyDecided,
  BudgetExhausted,
  PersistenceFailed
)
export type CorralError = typeof CorralError.Type

/** The members of `CorralError` with the given tags: how a narrower failure type is spelled. */
export type CorralErrorOf<Tag extends CorralError["_tag"]> = Extract<CorralError, { readonly _tag: Tag }>

/** Why a session's actor could not process a message (a store failure, or a message the session cannot take). */
export type ActorFailure = CorralErrorOf<"PersistenceFailed" | "InvalidSessionState" | "AlreadyDecided">

/** What delivering a message to a session can fail with: the actor's failures, or no such session. */
export type SendError = CorralErrorOf<ActorFailure["_tag"] | "SessionNotFound">

const corralErrorTags: ReadonlySet<unknown> = new Set(CorralError.members.map((member) => member._tag))
const isCorralErrorShape = Schema.is(CorralError)

/**
 * Whether `u` is one of the `CorralError` failures. Checks, in order: `u` is an object whose `_tag` is one of the
 * eight tags; then the member's schema: `u` carries that error class's identity (an `instanceof`, or the class
 * marker `Symbol.for("effect/Schema/TaggedError/<tag>")` that every copy of the class shares) and every field has
 * its schema's shape. So an error built by another copy of this package (two versions installed side by side) is
 * recognised, while a plain object that borrows a tag, an `Error` without a tag, a string or another tagged error is
 * not. A plain JSON body of the right shape is not an error yet: decode it with the `CorralError` schema.
 */
export const isCorralError = (u: unknown): u is CorralError =>
  typeof u === "object" && u !== null && corralErrorTags.has(Reflect.get(u, "_tag")) && isCorralErrorShape(u)

/**
 * A tool server's request for a model completion (MCP sampling) that the session's model did not serve: `reason`
 * says why — `gate` (a model-call check of the exit policy fired: a ceiling, the token budget, the deadline, spent
 * providers; `check` names it, and no model call was made), `provider` (the session's provider chain failed) or
 * `ended` (the tool call it was asked for has ended: the burst stopped it). `message` is the sentence the server
 * receives.
 */
export class SampleRefused extends Schema.TaggedError<SampleRefused>()("SampleRefused", {
  reason: Schema.Literal("gate", "provider", "ended"),
  check: Schema.optional(Schema.String),
  message: Schema.String
}) {}
