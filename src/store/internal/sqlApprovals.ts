/**
 * The approval methods of the SQL store: tokens kept as hashes in `approvals`, spent at most once.
 *
 * A decision spends its token with one conditional UPDATE (`used_at IS NULL AND expires_at > at`), so of two
 * concurrent decisions with one token, in one process or in two, exactly one wins. Every read is filtered by org
 * and session.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Option, Schema } from "effect"
import type { Context } from "effect"
import type { ApprovalRecord } from "../../domain/Approval.js"
import type { SessionStore } from "../SessionStore.js"
import { persist } from "./failure.js"

type Methods = Required<
  Pick<Context.Tag.Service<SessionStore>, "issueApprovals" | "findApproval" | "spendApproval" | "countPendingApprovals">
>

const Row = Schema.Struct({
  token_hash: Schema.String,
  org_id: Schema.String,
  user_id: Schema.String,
  session_id: Schema.String,
  call_id: Schema.String,
  turn_seq: Schema.Int,
  tool: Schema.String,
  args_hash: Schema.String,
  created_at: Schema.Number,
  expires_at: Schema.Number,
  used_at: Schema.NullOr(Schema.Number)
})
const decodeRows = Schema.decodeUnknown(Schema.Array(Row))
const decodeCount = Schema.decodeUnknown(Schema.Array(Schema.Struct({ n: Schema.NumberFromString })))
const decodeHashes = Schema.decodeUnknown(Schema.Array(Schema.Struct({ token_hash: Schema.String })))

const toRecord = (row: typeof Row.Type): ApprovalRecord => ({
  tokenHash: row.token_hash,
  orgId: row.org_id,
  userId: row.user_id,
  sessionId: row.session_id,
  callId: row.call_id,
  turnSeq: row.turn_seq,
  tool: row.tool,
  argsHash: row.args_hash,
  createdAt: row.created_at,
  expiresAt: row.expires_at,
  ...(row.used_at === null ? {} : { usedAt: row.used_at })
})

/** The approval methods over `sql`. */
export const make = (sql: SqlClient.SqlClient): Methods => ({
  issueApprovals: (sessionId, records) =>
    sql.withTransaction(Effect.forEach(records, (r) =>
      Effect.zipRight(
        sql`DELETE FROM approvals WHERE session_id = ${sessionId} AND turn_seq = ${r.turnSeq}
          AND call_id = ${r.callId} AND used_at IS NULL`,
        sql`INSERT INTO approvals
          (token_hash, org_id, user_id, session_id, call_id, turn_seq, tool, args_hash, created_at, expires_at)
          VALUES (${r.tokenHash}, ${r.orgId}, ${r.userId}, ${sessionId}, ${r.callId}, ${r.turnSeq}, ${r.tool},
            ${r.argsHash}, ${r.createdAt}, ${r.expiresAt})`
      ), { discard: true })).pipe(persist("issueApprovals")),

  findApproval: (orgId, sessionId, tokenHash) =>
    sql`SELECT token_hash, org_id, user_id, session_id, call_id, turn_seq, tool, args_hash, created_at, expires_at,
        used_at
      FROM approvals WHERE token_hash = ${tokenHash} AND org_id = ${orgId} AND session_id = ${sessionId}`.pipe(
      Effect.flatMap(decodeRows),
      Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), toRecord)),
      persist("findApproval")
    ),

  spendApproval: (tokenHash, at) =>
    sql`UPDATE approvals SET used_at = ${at}
      WHERE token_hash = ${tokenHash} AND used_at IS NULL AND expires_at > ${at}
      RETURNING token_hash`.pipe(
      Effect.flatMap(decodeHashes),
      Effect.map((rows) => rows.length > 0),
      persist("spendApproval")
    ),

  // Bounded by the LIMIT: the count stops at `cap` rows however many tokens are live.
  countPendingApprovals: (at, cap) =>
    sql`SELECT count(*)::text AS n FROM (SELECT 1 FROM approvals WHERE used_at IS NULL AND expires_at > ${at}
      LIMIT ${cap}) AS live`.pipe(
      Effect.flatMap(decodeCount),
      Effect.map((rows) => rows[0]?.n ?? 0),
      persist("countPendingApprovals")
    )
})
