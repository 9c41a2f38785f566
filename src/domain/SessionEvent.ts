/**
 * What subscribers of a session see. `turn` events are persisted turns (their `seq` is the resume point);
 * `tool_start`, `tool_progress`, `tool_log`, `elicitation`, `elicitation_settled`, `delta` and `error` are live-only; `exit` and `report` close a burst.
 */
import { Schema } from "effect"
import { ExitReason } from "./ExitReason.js"
import { Turn } from "./Message.js"
import { Report } from "./Report.js"

/** A persisted turn (published only after it was stored). */
export const TurnEvent = Schema.TaggedStruct("turn", { sessionId: Schema.String, seq: Schema.Int, turn: Turn })
/** A tool call is about to be dispatched (not persisted). */
export const ToolStartEvent = Schema.TaggedStruct("tool_start", {
  sessionId: Schema.String,
  seq: Schema.Int,
  callId: Schema.String,
  name: Schema.String
})
/** A running tool call reported progress (an MCP progress notification; not persisted). */
export const ToolProgressEvent = Schema.TaggedStruct("tool_progress", {
  sessionId: Schema.String,
  seq: Schema.Int,
  callId: Schema.String,
  name: Schema.String,
  progress: Schema.Number,
  total: Schema.optional(Schema.Number),
  message: Schema.optional(Schema.String)
})
/** The tool server of a running call logged a message (an MCP log notification; not persisted). */
export const ToolLogEvent = Schema.TaggedStruct("tool_log", {
  sessionId: Schema.String,
  seq: Schema.Int,
  callId: Schema.String,
  name: Schema.String,
  /** The MCP log level: debug, info, notice, warning, error, critical, alert, emergency. */
  level: Schema.String,
  message: Schema.String
})
/**
 * An MCP server asks the session's person a question while one of its tools runs (`elicitation/create`; not
 * persisted). Answer with `POST /v1/sessions/{id}/elicitations/{elicitationId}` before `answerBy` (epoch ms); then it
 * is declined. `requestedSchema` is the JSON Schema of the values asked for (a flat object of primitives).
 */
export const ElicitationEvent = Schema.TaggedStruct("elicitation", {
  sessionId: Schema.String,
  seq: Schema.Int,
  callId: Schema.String,
  /** The tool whose call asks (its name as offered). */
  name: Schema.String,
  elicitationId: Schema.String,
  /** The MCP server asking. */
  server: Schema.String,
  message: Schema.String,
  requestedSchema: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  answerBy: Schema.Number
})
/** A question of an `elicitation` event was settled: answered by the person, or declined at its bound (not persisted). */
export const ElicitationSettledEvent = Schema.TaggedStruct("elicitation_settled", {
  sessionId: Schema.String,
  seq: Schema.Int,
  callId: Schema.String,
  name: Schema.String,
  elicitationId: Schema.String,
  action: Schema.Literal("accept", "decline", "cancel"),
  /** `answered`: the person's answer; `timed_out`: nobody answered before `answerBy`, so it was declined. */
  reason: Schema.Literal("answered", "timed_out")
})

/** A streamed text fragment of the reply being generated (not persisted). */
export const DeltaEvent = Schema.TaggedStruct("delta", {
  sessionId: Schema.String,
  seq: Schema.Int,
  text: Schema.String
})
/** The burst ended with this exit reason. */
export const ExitEvent = Schema.TaggedStruct("exit", { sessionId: Schema.String, seq: Schema.Int, reason: ExitReason })
/** The burst's report landed. */
export const ReportEvent = Schema.TaggedStruct("report", { sessionId: Schema.String, seq: Schema.Int, report: Report })

/**
 * The burst could not go on because infrastructure failed (the store did not answer or refused a write): published
 * live (the store may be down, so it is not persisted) before the burst ends; `code` is `store_unavailable`. The
 * burst's `exit` (`crashed`) and `report` follow at once, live, even while the store is down; the session reads
 * `interrupted` (resume with a follow-up) once the store takes the landing.
 */
export const ErrorEvent = Schema.TaggedStruct("error", {
  sessionId: Schema.String,
  seq: Schema.Int,
  code: Schema.String,
  message: Schema.String
})

/** Any session event. `seq` is the sequence of the last persisted turn at the time of the event. */
export const SessionEvent = Schema.Union(
  TurnEvent,
  ToolStartEvent,
  ToolProgressEvent,
  ToolLogEvent,
  ElicitationEvent,
  ElicitationSettledEvent,
  DeltaEvent,
  ExitEvent,
  ReportEvent,
  ErrorEvent
)
export type SessionEvent = typeof SessionEvent.Type
