/**
 * 0005 — `mcp_credentials`: the OAuth state of MCP servers (client registration, access and refresh tokens,
 * discovered authorization server), one row per server (`<name> <url>`), so a restart does not ask a person to sign
 * in again. `sealed` is AES-256-GCM ciphertext made by the tools layer (`McpCredentials.sealed`, key from
 * `CORRAL_SECRET_KEY`): the database never holds a usable token.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE mcp_credentials (
    key text PRIMARY KEY,
    sealed text NOT NULL,
    updated_at double precision NOT NULL
  )`
})
