/**
 * The SQL store's catalogue methods: agents published and listed (every version kept, the highest first), and the
 * sessions of an org listed newest first (a cursor pages them) or, at start-up, every running one. Every read is
 * filtered by org except `listRunning` (recovery's, across orgs).
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Context } from "effect"
import { AgentSpec } from "../../domain/AgentSpec.js"
import { PersistenceFailed } from "../../domain/Errors.js"
import type { SessionStore } from "../SessionStore.js"
import { decodeCursor, encodeCursor } from "../SessionStore.js"
import { persist } from "./failure.js"
import { columns, decodeSessions, toSession } from "./sessionReads.js"

type Methods = Pick<Context.Tag.Service<SessionStore>, "putAgent" | "listAgents" | "listSessions" | "listRunning">

const decodeSpecs = Schema.decodeUnknown(Schema.Array(Schema.Struct({ spec: AgentSpec })))
const encodeSpec = Schema.encode(AgentSpec)

/** The catalogue methods over `sql`. */
export const make = (sql: SqlClient.SqlClient): Methods => {
  const sessionColumns = sql.literal(columns)
  return {
    putAgent: (orgId, spec) =>
      Effect.gen(function*() {
        const encoded = JSON.stringify(yield* encodeSpec(spec))
        yield* sql`INSERT INTO agents (org_id, id, version, spec)
          VALUES (${orgId}, ${spec.id}, ${spec.version}, ${encoded}::json)
          ON CONFLICT (org_id, id, version) DO UPDATE SET spec = EXCLUDED.spec, published_at = now()`
      }).pipe(persist("putAgent")),

    listAgents: (orgId) =>
      sql`SELECT DISTINCT ON (id) spec FROM agents WHERE org_id = ${orgId} ORDER BY id, version DESC`.pipe(
        Effect.flatMap(decodeSpecs),
        // Sorted here, not by the database's collation, so the order is the same code-unit order on every driver.
        Effect.map((rows) => rows.map((row) => row.spec).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))),
        persist("listAgents")
      ),

    listSessions: (orgId, options) =>
      Effect.gen(function*() {
        const after = options.cursor === undefined ? undefined : decodeCursor(options.cursor)
        if (options.cursor !== undefined && after === undefined) {
          return yield* new PersistenceFailed({ operation: "listSessions", message: "not a session cursor" })
        }
        const limit = Math.max(1, Math.floor(options.limit))
        // `COLLATE "C"` orders ids by code unit, as `listedBefore` (and so the memory driver and the cursor) does.
        const where = [
          sql`org_id = ${orgId}`,
          ...(options.scope === undefined ? [] : [sql`scope = ${options.scope}`]),
          ...(options.status === undefined ? [] : [sql`status = ${options.status}`]),
          ...(after === undefined ? [] : [
            sql`(created_at < ${after.createdAt} OR (created_at = ${after.createdAt} AND id COLLATE "C" < ${after.id}))`
          ])
        ]
        const rows = yield* sql`SELECT ${sessionColumns} FROM sessions WHERE ${sql.and(where)}
          ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT ${limit + 1}`.pipe(Effect.flatMap(decodeSessions))
        const page = rows.slice(0, limit).map(toSession)
        const last = page[page.length - 1]
        return rows.length > limit && last !== undefined
          ? { sessions: page, nextCursor: encodeCursor(last) }
          : { sessions: page }
      }).pipe(persist("listSessions")),

    listRunning: () =>
      sql`SELECT ${sessionColumns} FROM sessions WHERE status = 'running'`.pipe(
        Effect.flatMap(decodeSessions),
        Effect.map((rows) => rows.map(toSession)),
        persist("listRunning")
      )
  }
}
