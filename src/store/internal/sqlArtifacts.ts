/**
 * The artifact methods of the SQL store: which earlier sessions' artifacts a session inherits. The scope is taken
 * from the inheriting session's row and the composite foreign key refuses another org's or another scope's session;
 * every read is filtered by org.
 */
import type { SqlClient } from "@effect/sql"
import { Effect, Schema } from "effect"
import type { Context } from "effect"
import { PersistenceFailed } from "../../domain/Errors.js"
import type { SessionStore } from "../SessionStore.js"
import { persist, sqlState } from "./failure.js"
import * as Refusals from "./refusals.js"

type Methods = Pick<Context.Tag.Service<SessionStore>, "inheritArtifact" | "inherited">

const decodeIds = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String })))
const decodeScopes = Schema.decodeUnknown(Schema.Array(Schema.Struct({ id: Schema.String, scope: Schema.String })))

const noSession = (sessionId: string) =>
  new PersistenceFailed({ operation: "inheritArtifact", message: `no session "${sessionId}"` })

/** The artifact methods over `sql`. */
export const make = (sql: SqlClient.SqlClient): Methods => {
  /** Words the foreign-key refusal with the scopes involved, as far as the org may see them. */
  const refusal = (orgId: string, sessionId: string, fromSessionId: string) =>
    sql`SELECT id, scope FROM sessions WHERE org_id = ${orgId} AND id IN (${sessionId}, ${fromSessionId})`.pipe(
      Effect.flatMap(decodeScopes),
      persist("inheritArtifact"),
      Effect.flatMap((rows) => {
        const scopeOf = (id: string) => rows.find((row) => row.id === id)?.scope
        return Effect.fail(
          Refusals.crossScope(sessionId, fromSessionId, scopeOf(sessionId) ?? "", scopeOf(fromSessionId))
        )
      })
    )

  return {
    inheritArtifact: (orgId, sessionId, fromSessionId) =>
      Effect.gen(function*() {
        // The scope is taken from the inheriting session's row; the composite foreign key on
        // (org_id, scope, inherited_session_id) is what refuses another org's or another scope's session.
        const outcome = yield* sql`WITH target AS (
            SELECT id, org_id, scope FROM sessions WHERE id = ${sessionId} AND org_id = ${orgId}
          ),
          ins AS (
            INSERT INTO session_artifacts (session_id, org_id, scope, inherited_session_id)
            SELECT id, org_id, scope, ${fromSessionId} FROM target
            ON CONFLICT (session_id, inherited_session_id) DO NOTHING
          )
          SELECT id FROM target`.pipe(
          Effect.flatMap(decodeIds),
          Effect.map((rows) => rows.length > 0 ? "recorded" as const : "missing" as const),
          Effect.catchIf((error) => sqlState(error) === "23503", () => Effect.succeed("refused" as const)),
          persist("inheritArtifact")
        )
        if (outcome === "missing") return yield* noSession(sessionId)
        if (outcome === "refused") return yield* refusal(orgId, sessionId, fromSessionId)
      }),

    inherited: (orgId, sessionId) =>
      sql`SELECT inherited_session_id AS id FROM session_artifacts
        WHERE session_id = ${sessionId} AND org_id = ${orgId}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((row) => row.id).sort()),
        persist("inherited")
      )
  }
}
