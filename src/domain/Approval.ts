/**
 * An approval token as the store keeps it: only its hash, and everything it is bound to.
 *
 * The token itself is shown once, to the person who must decide, and never stored: whoever reads the database
 * cannot approve anything. A token is good for one decision (`usedAt`), until `expiresAt`, by the session's own
 * principal (org AND user), for one call of one session, one tool and exactly the arguments that were shown.
 */
import { Schema } from "effect"

/** One issued approval token (hashed). */
export const ApprovalRecord = Schema.Struct({
  /** SHA-256 of the token, hex. */
  tokenHash: Schema.String,
  orgId: Schema.String,
  userId: Schema.String,
  sessionId: Schema.String,
  callId: Schema.String,
  /** The assistant turn that asked for the call (call ids are unique within a turn only). */
  turnSeq: Schema.Int,
  tool: Schema.String,
  /** SHA-256 of the call's arguments exactly as shown, hex. */
  argsHash: Schema.String,
  createdAt: Schema.Number,
  expiresAt: Schema.Number,
  /** When the token was spent by a decision; absent while it is unspent. */
  usedAt: Schema.optional(Schema.Number)
})
export type ApprovalRecord = typeof ApprovalRecord.Type

/** A freshly issued token, for the one response that shows it to the person. */
export interface IssuedToken {
  readonly callId: string
  readonly token: string
  readonly expiresAt: number
}
