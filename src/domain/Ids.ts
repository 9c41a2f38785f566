/**
 * Identifiers. Branded strings so a session id can never be passed where a run id is expected.
 */
import { Schema } from "effect"

/** A session's id (`ses_` + 32 hex when minted by Corral; any non-empty string when supplied by a host). */
export const SessionId = Schema.NonEmptyTrimmedString.pipe(Schema.brand("SessionId"))
export type SessionId = typeof SessionId.Type

/** A run id: `run_` + 32 lowercase hex characters, random per burst. */
export const RunId = Schema.String.pipe(Schema.pattern(/^run_[0-9a-f]{32}$/), Schema.brand("RunId"))
export type RunId = typeof RunId.Type

/** An agent spec's id: lowercase letters, digits, `-` and `_`, starting with a letter. */
export const AgentId = Schema.String.pipe(
  Schema.pattern(/^[a-z][a-z0-9_-]{0,63}$/, {
    message: () => "an agent id: 1-64 chars of a-z, 0-9, '-' or '_', starting with a letter"
  }),
  Schema.brand("AgentId")
)
export type AgentId = typeof AgentId.Type

/** The id a model gave one tool call; unique within its assistant turn. */
export const ToolCallId = Schema.NonEmptyString
export type ToolCallId = typeof ToolCallId.Type
