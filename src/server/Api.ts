/**
 * Api — the HTTP contract of Corral (DESIGN §9), as an @effect/platform `HttpApi`: the server's handlers, the
 * OpenAPI document at `/openapi.json`, the docs page and the typed client (`HttpApiClient.make(Api)`) all come
 * from this one value, so they cannot disagree.
 *
 * Status codes live here, and only here: the domain's errors are plain tagged schemas. Bad input is always a 4xx
 * that says where and what: a body that does not match its schema is a 400 `HttpApiDecodeError` listing every
 * problem with its path (bodies are decoded with `errors: "all"` and unknown fields rejected); a well-formed
 * document Corral refuses (an agent spec naming an unknown tool, a loosened limit, an invalid report schema) is a
 * 422 `InvalidRequest` naming each field; another org's session is a 404 like a missing one; a message the session
 * cannot take now (a follow-up while a write awaits approval, an unknown approval token) is a 409, and so is a
 * second decision with a token whose write was already decided (`AlreadyDecided`, naming the decision taken).
 * Ids and query values are bounded here too (`PathId`, the listing's filters): nothing unbounded reaches a store.
 */
import { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { AgentSpec } from "../domain/AgentSpec.js"
import {
  AgentNotFound,
  AlreadyDecided,
  BudgetExhausted,
  InvalidRequest,
  InvalidSessionState,
  ScopeMismatch,
  SessionNotFound
} from "../domain/Errors.js"
import { AgentId } from "../domain/Ids.js"
import { Turn } from "../domain/Message.js"
import { Report } from "../domain/Report.js"
import { Scope } from "../domain/Scope.js"
import { SessionStatus, SessionView } from "../domain/Session.js"
import { Trajectory } from "../domain/Trajectory.js"
import { UsageRow } from "../domain/Usage.js"
import { Authentication } from "./Authentication.js"
import { ElicitationsGroup } from "./ElicitationsApi.js"
import { NotReady, PayloadTooLarge, Unavailable, UnsupportedMediaType } from "./HttpErrors.js"
import * as InputLimits from "./InputLimits.js"
import { OperationsGroup } from "./OperationsApi.js"
import { ToolsGroup } from "./ToolsApi.js"

/** Bodies list every problem, and an unknown field is a problem (a misspelt optional field must not vanish). */
const strict = { parseOptions: { errors: "all", onExcessProperty: "error" } } as const

/** A path id (a session's or an agent's), bounded and URL-safe: see `InputLimits.PathId`. */
export const PathId = InputLimits.PathId

const IdPath = Schema.Struct({ id: PathId })

const Wait = Schema.Struct({
  /** `true`: answer when the burst has landed (200, the landed view) instead of at once (202). */
  wait: Schema.optional(Schema.BooleanFromString)
})

const Seq = Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())

/**
 * An agent spec as submitted: any JSON object; Corral validates it whole and answers 422 naming every field. The
 * document describes it as the `AgentSpec` component (registered by `Api`'s additional schemas) by reference: a
 * standalone JSON Schema pasted here would carry its own `#/$defs/...` references, which resolve nowhere in the
 * OpenAPI document and make client generators refuse it.
 */
export const AgentDocument = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  identifier: "AgentDocument",
  jsonSchema: {
    $ref: "#/components/schemas/AgentSpec",
    description: "An agent spec (see the AgentSpec schema). Every invalid field is reported, with its path, in a 422."
  }
})

/** The agents of the caller's org (latest version of each). */
export const AgentList = Schema.Struct({ agents: Schema.Array(AgentSpec) })

/** Starting a session: which agent, in which scope, with which first prompt. */
export const StartSession = Schema.Struct({
  agentId: Schema.encodedBoundSchema(AgentId),
  version: Schema.optional(Schema.Int.pipe(Schema.positive())),
  scope: Schema.encodedBoundSchema(Scope),
  prompt: Schema.NonEmptyString.pipe(Schema.maxLength(200_000)),
  inheritedArtifacts: Schema.optional(Schema.Array(Schema.String).pipe(Schema.maxItems(20)))
}).annotations({
  ...strict,
  identifier: "StartSession",
  examples: [{ agentId: "demo", scope: "incident:DEMO-1", prompt: "Why are checkout requests failing since 09:00?" }]
})

/** A follow-up message (continue). */
export const SendMessage = Schema.Struct({ text: Schema.NonEmptyString.pipe(Schema.maxLength(200_000)) }).annotations({
  ...strict,
  identifier: "SendMessage"
})

/** A person's decision on a pending write. */
export const Decide = Schema.Struct({
  token: Schema.NonEmptyString.pipe(Schema.maxLength(256)),
  decision: Schema.Literal("approve", "reject")
}).annotations({ ...strict, identifier: "Decide" })

/** The answer to an accepted (not awaited) request: where to follow the session. */
export const Accepted = Schema.Struct({
  sessionId: Schema.String,
  status: SessionStatus,
  /** The SSE stream of the session. */
  events: Schema.String,
  /** The live viewer page of the session. */
  viewer: Schema.String
}).annotations({ identifier: "Accepted" })
export type Accepted = typeof Accepted.Type

/** A page of sessions, newest first; `nextCursor` continues the listing. */
export const SessionPage = Schema.Struct({
  sessions: Schema.Array(SessionView),
  nextCursor: Schema.optional(Schema.String)
}).annotations({ identifier: "SessionPage" })

/** Filters and paging of the session listing. */
export const ListSessionsParams = Schema.Struct({
  scope: Schema.optional(
    Schema.String.pipe(Schema.maxLength(200, { message: () => "a scope of at most 200 characters" }))
  ),
  status: Schema.optional(SessionStatus),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 100))),
  cursor: Schema.optional(Schema.String.pipe(Schema.maxLength(2048)))
})

const Day = Schema.String.pipe(
  Schema.pattern(/^\d{4}-\d{2}-\d{2}$/, { message: () => "a UTC day, YYYY-MM-DD" }),
  Schema.filter((day) => !Number.isNaN(Date.parse(`${day}T00:00:00Z`)) || "not a calendar day")
)

/** The days of the usage ledger: from and to, both included (UTC); default the last 30 days, at most 366. */
export const UsageParams = Schema.Struct({
  from: Schema.optional(Day),
  to: Schema.optional(Day)
})

/** The org's usage ledger over a range of days: a row per day, agent, provider and model, and the total. */
export const UsageReport = Schema.Struct({
  from: Schema.String,
  to: Schema.String,
  rows: Schema.Array(UsageRow),
  total: Schema.Struct({
    attempts: Schema.Int,
    inputTokens: Schema.Int,
    outputTokens: Schema.Int,
    cacheReadTokens: Schema.Int,
    cacheWriteTokens: Schema.Int,
    reasoningTokens: Schema.Int,
    costMicros: Schema.Int
  })
}).annotations({ identifier: "UsageReport" })
export type UsageReport = typeof UsageReport.Type

/** What the POSTs that create sessions or messages say about retries (the header is read by the handlers). */
const idempotencyNote = "The message is stored before the answer: a 202 survives a crash of the server. Send an " +
  "`Idempotency-Key` header (1–255 printable ASCII characters, e.g. a UUID) to make the request safe to retry: a " +
  "retry with the same key creates nothing and answers the session as it stands now: 202 while it runs, 200 with " +
  "its view once it has landed; the same key with a different request is " +
  "refused (422)."

/** The persisted transcript after a sequence number. */
export const TurnList = Schema.Struct({ turns: Schema.Array(Turn) })

/** The run records of a session's bursts, oldest first. */
export const TrajectoryList = Schema.Struct({ trajectories: Schema.Array(Trajectory) })

/** The Server-Sent Events stream (documented shape; the server writes it incrementally). */
export const EventStream = Schema.String.pipe(
  HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/event-stream" })
).annotations({
  description:
    "Server-Sent Events. `event:` is turn | notice | tool_start | tool_progress | tool_log | delta | exit | " +
    "report | session; " +
    "`id:` is the sequence of the last persisted turn; `data:` is the JSON event. Resume with `Last-Event-ID` " +
    "or `?after=SEQ`: every persisted turn after it is replayed, then live events follow, with no gap and no repeat."
})

/** Health and readiness. */
export const Health = Schema.Struct({ status: Schema.Literal("ok") })
export const Ready = Schema.Struct({
  status: Schema.Literal("ready"),
  checks: Schema.Record({ key: Schema.String, value: Schema.String })
})

/** Agents: publish, list, read. */
export class AgentsGroup extends HttpApiGroup.make("agents")
  .add(
    HttpApiEndpoint.post("publishAgent", "/v1/agents")
      .setPayload(AgentDocument)
      .addSuccess(AgentSpec, { status: 201 })
      .addError(InvalidRequest, { status: 422 })
      .annotate(OpenApi.Summary, "Publish an agent spec (a new version of it)")
  )
  .add(
    HttpApiEndpoint.get("listAgents", "/v1/agents")
      .addSuccess(AgentList)
      .annotate(OpenApi.Summary, "The latest version of every agent of your org")
  )
  .add(
    HttpApiEndpoint.get("getAgent", "/v1/agents/:id")
      .setPath(IdPath)
      .setUrlParams(Schema.Struct({ version: Schema.optional(Schema.NumberFromString.pipe(Schema.int())) }))
      .addSuccess(AgentSpec)
      .addError(AgentNotFound, { status: 404 })
      .annotate(OpenApi.Summary, "An agent spec (latest, or ?version=N)")
  )
  .middleware(Authentication)
  .addError(Unavailable)
  .annotate(OpenApi.Description, "Agent specs: published as versioned data, read back by id and version")
{}

/** Sessions: start, follow, continue, approve, cancel, read. */
export class SessionsGroup extends HttpApiGroup.make("sessions")
  .add(
    HttpApiEndpoint.post("startSession", "/v1/sessions")
      .setUrlParams(Wait)
      .setPayload(StartSession)
      .addSuccess(SessionView, { status: 200 })
      .addSuccess(Accepted, { status: 202 })
      .addError(InvalidRequest, { status: 422 })
      .addError(ScopeMismatch, { status: 422 })
      .addError(AgentNotFound, { status: 404 })
      .addError(SessionNotFound, { status: 404 })
      .addError(InvalidSessionState, { status: 409 })
      .addError(BudgetExhausted, { status: 429 })
      .annotate(OpenApi.Summary, "Start a session (202 once it is stored; ?wait=true answers with the landed view)")
      .annotate(OpenApi.Description, idempotencyNote)
  )
  .add(
    HttpApiEndpoint.get("listSessions", "/v1/sessions")
      .setUrlParams(ListSessionsParams)
      .addSuccess(SessionPage)
      .annotate(OpenApi.Summary, "Your org's sessions, newest first, by scope and status (paginated)")
  )
  .add(
    HttpApiEndpoint.get("usage", "/v1/usage")
      .setUrlParams(UsageParams)
      .addSuccess(UsageReport)
      .annotate(OpenApi.Summary, "Your org's usage and cost by UTC day, agent, provider and model (?from=&to=)")
      .annotate(
        OpenApi.Description,
        "Every model attempt counts, failed and retried ones included (they were billed). Money in integer " +
          "micro-dollars (0 for a provider without prices). Summed from the stored run records: it survives restarts " +
          "and is the same on every node."
      )
  )
  .add(
    HttpApiEndpoint.get("getSession", "/v1/sessions/:id")
      .setPath(IdPath)
      .addSuccess(SessionView)
      .addError(SessionNotFound, { status: 404 })
      .annotate(OpenApi.Summary, "A session as it stands")
  )
  .add(
    HttpApiEndpoint.post("sendMessage", "/v1/sessions/:id/messages")
      .setPath(IdPath)
      .setUrlParams(Wait)
      .setPayload(SendMessage)
      .addSuccess(SessionView, { status: 200 })
      .addSuccess(Accepted, { status: 202 })
      .addError(InvalidRequest, { status: 422 })
      .addError(ScopeMismatch, { status: 422 })
      .addError(SessionNotFound, { status: 404 })
      .addError(InvalidSessionState, { status: 409 })
      .addError(BudgetExhausted, { status: 429 })
      .annotate(OpenApi.Summary, "Send a follow-up (continue the session; 202 once it is stored)")
      .annotate(OpenApi.Description, idempotencyNote)
  )
  .add(
    HttpApiEndpoint.post("decide", "/v1/sessions/:id/approvals")
      .setPath(IdPath)
      .setUrlParams(Wait)
      .setPayload(Decide)
      .addSuccess(SessionView, { status: 200 })
      .addSuccess(Accepted, { status: 202 })
      .addError(ScopeMismatch, { status: 422 })
      .addError(SessionNotFound, { status: 404 })
      .addError(InvalidSessionState, { status: 409 })
      .addError(AlreadyDecided, { status: 409 })
      .annotate(OpenApi.Summary, "Approve or reject a pending write by its token")
  )
  .add(
    HttpApiEndpoint.post("renewApprovals", "/v1/sessions/:id/approvals/tokens")
      .setPath(IdPath)
      .addSuccess(SessionView)
      .addError(ScopeMismatch, { status: 422 })
      .addError(SessionNotFound, { status: 404 })
      .addError(InvalidSessionState, { status: 409 })
      .annotate(
        OpenApi.Summary,
        "Issue fresh approval tokens for the writes that wait (the session's own user; old tokens are revoked)"
      )
  )
  .add(
    HttpApiEndpoint.post("cancel", "/v1/sessions/:id/cancel")
      .setPath(IdPath)
      .addSuccess(SessionView)
      .addError(ScopeMismatch, { status: 422 })
      .addError(SessionNotFound, { status: 404 })
      .addError(InvalidSessionState, { status: 409 })
      .annotate(OpenApi.Summary, "Cancel the running burst (it lands `cancelled`, transcript kept)")
  )
  .add(
    HttpApiEndpoint.get("turns", "/v1/sessions/:id/turns")
      .setPath(IdPath)
      .setUrlParams(Schema.Struct({ after: Schema.optional(Seq) }))
      .addSuccess(TurnList)
      .addError(SessionNotFound, { status: 404 })
      .annotate(OpenApi.Summary, "The persisted transcript after ?after=SEQ")
  )
  .add(
    HttpApiEndpoint.get("trajectory", "/v1/sessions/:id/trajectory")
      .setPath(IdPath)
      .addSuccess(TrajectoryList)
      .addError(SessionNotFound, { status: 404 })
      .annotate(OpenApi.Summary, "The run records of the session's bursts")
  )
  .add(
    HttpApiEndpoint.get("report", "/v1/sessions/:id/report")
      .setPath(IdPath)
      .addSuccess(Report)
      .addError(SessionNotFound, { status: 404 })
      .addError(InvalidSessionState, { status: 409 })
      .annotate(OpenApi.Summary, "The last landed report (409 before the first landing)")
  )
  .add(
    HttpApiEndpoint.get("events", "/v1/sessions/:id/events")
      .setPath(IdPath)
      .setUrlParams(Schema.Struct({ after: Schema.optional(Seq) }))
      .setHeaders(Schema.Struct({ "last-event-id": Schema.optional(Seq) }))
      .addSuccess(EventStream)
      .addError(SessionNotFound, { status: 404 })
      .annotate(OpenApi.Summary, "Live events (SSE), resumable with Last-Event-ID or ?after=SEQ")
  )
  .middleware(Authentication)
  .addError(Unavailable)
  .annotate(OpenApi.Description, "Bounded sessions of an agent: start, follow, continue, approve, cancel, read")
{}

/** Probes: no authentication. */
export class SystemGroup extends HttpApiGroup.make("system")
  .add(
    HttpApiEndpoint.get("healthz", "/healthz").addSuccess(Health).annotate(OpenApi.Summary, "The process is up")
  )
  .add(
    HttpApiEndpoint.get("readyz", "/readyz")
      .addSuccess(Ready)
      .addError(NotReady)
      .annotate(OpenApi.Summary, "Ready to serve: database reachable, migrations applied, not shutting down")
  )
  .annotate(OpenApi.Description, "Liveness and readiness probes (no authentication)")
{}

/** The whole API. Body-level failures (413, 415, malformed JSON) are answered before routing; see `BodyGuard`. */
export class Api extends HttpApi.make("corral")
  .add(AgentsGroup)
  .add(SessionsGroup)
  .add(ToolsGroup)
  .add(OperationsGroup)
  .add(ElicitationsGroup)
  .add(SystemGroup)
  .addError(PayloadTooLarge)
  .addError(UnsupportedMediaType)
  // Named explicitly so `AgentDocument`'s reference resolves whatever the endpoints happen to return.
  .annotate(HttpApi.AdditionalSchemas, [AgentSpec])
  .annotateContext(OpenApi.annotations({
    title: "Corral",
    version: "0.1.0",
    license: { name: "Apache-2.0", url: "https://www.apache.org/licenses/LICENSE-2.0" },
    // Relative: the API is wherever this document was fetched from (`/openapi.json` on the same origin).
    servers: [{ url: "/" }],
    description: "Bounded LLM agent sessions. Without configured API keys the server is local-only and needs no " +
      "Authorization header; with keys, send `Authorization: Bearer <key>`. Try the built-in `demo` agent: " +
      "POST /v1/sessions with the example body, then open the `viewer` link of the answer."
  }))
{}
