/**
 * `corral` — an actor-model runtime for bounded LLM agent sessions. Start at `Corral`; its methods fail only with
 * `CorralError` (one union of tagged errors, recognised by `isCorralError`).
 */
export { Corral } from "./Corral.js"
/** The one-call path to a tool-using agent on a real model: `Agent.run({ prompt, tools })` (see README). */
export * as Agent from "./Agent.js"
export type { MemoryOptions, Service as CorralService, StartRequest } from "./Corral.js"
export type { EventsOptions, SendOptions } from "./Corral.js"
export { defineAgent } from "./domain/AgentSpec.js"
export type { AgentSpecInput } from "./domain/AgentSpec.js"
export { CorralError, isCorralError } from "./domain/Errors.js"
export type { CorralErrorOf } from "./domain/Errors.js"
/** An agent: its prompt, tools, tier, limits and report schema (`publishAgent` validates one). */
export { AgentSpec, JsonSchema } from "./domain/AgentSpec.js"
/** A stored decision on a write tool call, and the token that approves one. */
export { ApprovalRecord, type IssuedToken } from "./domain/Approval.js"
/** How a provider failure is classified (`rate_limit`, `auth`, `context_overflow`…). */
export { ErrorKind } from "./domain/ErrorKind.js"
/** Every error the service fails with (each a `Schema.TaggedError`, for `Effect.catchTag`), and the helpers. */
export {
  AgentNotFound,
  AlreadyDecided,
  BudgetExhausted,
  FieldIssue,
  InvalidRequest,
  InvalidSessionState,
  PersistenceFailed,
  ProviderError,
  ProviderExhausted,
  ScopeMismatch,
  type SendError,
  SessionNotFound
} from "./domain/Errors.js"
/** The spec's exit checks: thresholds on metrics at exit points, and why they halt a burst. */
export { ExitPoint, ExitPolicySpec, HaltReason, Metric, ThresholdCheck } from "./domain/ExitChecks.js"
/** Why a burst ended (`completed`, `turn_cap`, `provider_failed`…): stable snake_case strings. */
export { ExitReason } from "./domain/ExitReason.js"
/** The branded ids. */
export { AgentId, RunId, SessionId, ToolCallId } from "./domain/Ids.js"
/** A message waiting in a session's inbox. */
export { InboxMessage } from "./domain/Inbox.js"
/**
 * The ceilings: `Limits` is the schema and the type of the full set, `LimitsOverride` a partial one (tighten only).
 * The rails module (`defaults`, `layer`, `tighten`, `effective`, the `Limits` reference) is `LimitsRails`.
 */
export { Limits, LimitsOverride } from "./domain/Limits.js"
/** The transcript: turns and their entries, tool calls and results, a model's reply. */
export {
  AssistantEntry,
  FinishReason,
  ModelReply,
  NoticeEntry,
  ReasoningPart,
  ToolCall,
  ToolResult,
  ToolResultsEntry,
  ToolResultStatus,
  Turn,
  TurnEntry,
  type TurnKind,
  UserEntry
} from "./domain/Message.js"
/** Who calls: an org and a subject. Every call carries one. */
export { Principal } from "./domain/Principal.js"
/** A landed burst's report, and the schema used when the agent gives none. */
export { defaultReportSchema, Report } from "./domain/Report.js"
/** The scope a session is bound to. */
export { Scope } from "./domain/Scope.js"
/** A session, its state and the view the service answers with. */
export { PendingConfirmation, Resolution, Session, SessionState, SessionStatus, SessionView } from "./domain/Session.js"
/** What `events` streams: turns, tool progress and logs, text deltas, exits, reports, errors. */
export {
  DeltaEvent,
  ErrorEvent,
  ExitEvent,
  ReportEvent,
  SessionEvent,
  ToolLogEvent,
  ToolProgressEvent,
  ToolStartEvent,
  TurnEvent
} from "./domain/SessionEvent.js"
/** The per-burst record of what happened and why (model attempts, tool calls, rail decisions, budget). */
export {
  BudgetSnapshot,
  ModelAttempt,
  RailDecision,
  ReplayRecord,
  RouteEntry,
  ToolCallRecord,
  ToolFailure,
  Trajectory
} from "./domain/Trajectory.js"
/** Token usage, summed per attempt; a row of the usage ledger (`GET /v1/usage`) and its UTC day. */
export { Usage, UsageRow, utcDay } from "./domain/Usage.js"
/** The `SessionEvents` port over a listener set per watched session, with replay from the store: `make`, `layer`. */
export * as LiveEvents from "./events/LiveEvents.js"
export { SessionEvents } from "./events/SessionEvents.js"
export type { SubscribeOptions, Subscription } from "./events/SessionEvents.js"
export { Providers } from "./model/ModelProvider.js"
export type { ModelProvider, ModelRequest, ToolSpec } from "./model/ModelProvider.js"
/** Which reasoning parts a provider may be sent back: `ownParts`, `foreignParts`, `openToolCycle`. */
export * as Reasoning from "./model/Reasoning.js"
/** One model call across a route of providers with sticky failover: `callModel`, its state and options. */
export * as ProviderChain from "./model/ProviderChain.js"
/** The one ordered list of checks that can end a burst: the built-in checks, `threshold`, `add`, `reorder`, `decide`. */
export * as ExitPolicy from "./rails/ExitPolicy.js"
/** Money: prices (`fromUsd`), an attempt's cost in integer micro-dollars (`micros`), the cost budgets' `fit`. */
export * as Cost from "./rails/Cost.js"
/** The ceilings rails: `defaults`, `layer(override)` (tighten only), `tighten`, `effective`, the `Limits` reference. */
export * as LimitsRails from "./rails/Limits.js"
/** Daily budgets per org (`OrgBudgets`, a reference: provide `{ "<orgId>": { perDay }, "*": { perDay } }`). */
export * as OrgBudget from "./rails/OrgBudget.js"
/** What one model reply means for the loop (cut tool calls dropped, empty replies nudged): `classify`. */
export * as ReplyPolicy from "./rails/ReplyPolicy.js"
/** Consecutive bad tool use, counted per turn (`observeTurn`); the exit policy halts at three strikes. */
export * as Strikes from "./rails/Strikes.js"
export { Ids } from "./session/Ids.js"
export { AuthorPhase } from "./session/Landing.js"
/** Re-runs a stored burst against what was recorded and says where it diverges: `verifyBurst`, `verifySession`. */
export * as Replay from "./session/Replay.js"
export { Supervisor } from "./session/Supervisor.js"
/**
 * Whether Corral makes spans: off unless turned on (`Tracing.layer(true)`), so spans cost nothing by default. The
 * OTLP exporter is `Telemetry` in `corral/telemetry` (its OpenTelemetry packages are optional peers).
 */
export * as Tracing from "./telemetry/Tracing.js"
/** The `SessionStore` port over plain Maps (tests, the demo, the all-in-memory runtime): `layerMemory`, `makeMemory`. */
export * as MemoryStore from "./store/MemoryStore.js"
export { SessionStore } from "./store/SessionStore.js"
export { ToolExecutor } from "./tools/ToolExecutor.js"
export type {
  SampleMessage,
  Sampler,
  SampleReply,
  SampleRequest,
  ToolContext,
  ToolDef,
  ToolOutcome
} from "./tools/ToolExecutor.js"
/** Why a tool server's sample (`ToolContext.sample`) was not served. */
export { SampleRefused } from "./domain/Errors.js"
/** In-process tools behind the `ToolExecutor` port: `define`, `make`, `layer`, `layered`. */
export * as ToolRegistry from "./tools/ToolRegistry.js"
