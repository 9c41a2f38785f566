/**
 * What travels on the cluster's events channel (cluster/ClusterEvents), and the bounds of a notification.
 */
import { Schema } from "effect"
import { Turn } from "../../domain/Message.js"
import { SessionEvent } from "../../domain/SessionEvent.js"

/** The Postgres channel events travel on. */
export const channel = "corral_events"

/** Postgres refuses a payload of 8000 bytes or more; this leaves room for the envelope. */
export const maxPayloadBytes = 7_000

/**
 * What travels on the channel: the whole event, a reference to a stored turn, or a node's heartbeat. `n` numbers a
 * node's events in the order published, so a receiver sees when some never reached it.
 */
export const Wire = Schema.Union(
  Schema.Struct({ node: Schema.String, n: Schema.Int, event: SessionEvent }),
  Schema.Struct({ node: Schema.String, n: Schema.Int, sessionId: Schema.String, seq: Schema.Int }),
  Schema.Struct({ node: Schema.String, heartbeat: Schema.Int }),
  // A turn notified by the store in the transaction that stored it (`stored`), whole or by reference.
  Schema.Struct({ node: Schema.String, stored: Turn }),
  Schema.Struct({ node: Schema.String, storedRef: Schema.Struct({ sessionId: Schema.String, seq: Schema.Int }) })
)
export const encode = Schema.encodeSync(Schema.parseJson(Wire))
export const decode = Schema.decodeUnknownOption(Schema.parseJson(Wire))
