/**
 * The one reason a burst ended. Exhaustive and stable on the wire: stores, HTTP and dashboards key on these names.
 */
import { Schema } from "effect"

/** The 17 exit reasons of DESIGN §4 (`cost_budget` joined with the money rail, §11). */
export const ExitReason = Schema.Literal(
  "completed",
  "confirmation_pending",
  "burst_limit",
  "session_limit",
  "tool_budget",
  "token_budget",
  "cost_budget",
  "deadline",
  "provider_failed",
  "context_overflow",
  "refused",
  "filtered",
  "repeat_call_halt",
  "bad_tool_use",
  "empty_exhausted",
  "cancelled",
  "crashed"
)
export type ExitReason = typeof ExitReason.Type

/** All exit reasons, in declaration order. */
export const all: ReadonlyArray<ExitReason> = ExitReason.literals
