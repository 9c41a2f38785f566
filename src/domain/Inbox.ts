/**
 * The durable mailbox: a message accepted for a session but not yet taken up by a burst.
 *
 * A message is stored here (with its session, for a start) BEFORE anything acknowledges it, so a process that dies
 * between the acknowledgement and the burst's first write loses nothing: recovery finds the message and runs it. The
 * burst that takes a message up persists its user turn with the message's id (`UserEntry.messageId`), which is how
 * recovery tells a message that already ran from one that never did, without a second write in the burst's path.
 */
import { Schema } from "effect"
import { SessionView } from "./Session.js"

/** One accepted message. `run` opens a session's first burst; `continue` is a follow-up. */
export const InboxMessage = Schema.Struct({
  /** `msg_` + 32 hex; also the `messageId` of the user turn that takes it up. */
  id: Schema.String,
  sessionId: Schema.String,
  orgId: Schema.String,
  kind: Schema.Literal("run", "continue"),
  text: Schema.String,
  /** Retrieved or inherited context of a `run`. */
  context: Schema.optional(Schema.String),
  /** Problems met before the burst (a failed retrieval), recorded in its trajectory. */
  notes: Schema.optional(Schema.Array(Schema.Struct({ code: Schema.String, message: Schema.String }))),
  acceptedAt: Schema.Number
})
export type InboxMessage = typeof InboxMessage.Type

/**
 * The first answer to a request sent with an `Idempotency-Key`: a retry with the same key (in the same org) gets this
 * answer back and creates nothing. `fingerprint` is the SHA-256 of the request as first sent: the same key with a
 * different request is refused rather than silently answered with another request's outcome.
 */
export const IdempotencyRecord = Schema.Struct({
  orgId: Schema.String,
  key: Schema.String,
  fingerprint: Schema.String,
  sessionId: Schema.String,
  answer: SessionView,
  createdAt: Schema.Number
})
export type IdempotencyRecord = typeof IdempotencyRecord.Type
