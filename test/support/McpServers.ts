/**
 * What the MCP registry tests share: the tool context of their calls and the fixture server (test/support/
 * mcp-fixture.ts) as a stdio server config.
 */
import { fileURLToPath } from "node:url"
import { Principal } from "../../src/domain/Principal.js"
import type * as McpConfig from "../../src/tools/McpConfig.js"
import type { ToolContext } from "../../src/tools/ToolExecutor.js"

/** The repository root: the fixture runs with it as its working directory. */
export const root = fileURLToPath(new URL("../..", import.meta.url))
const FIXTURE = fileURLToPath(new URL("./mcp-fixture.ts", import.meta.url))

/** The context every test call is made in. */
export const ctx: ToolContext = {
  sessionId: "ses_1",
  principal: new Principal({ orgId: "org_a", userId: "u1" }),
  scope: "incident:1",
  runId: "run_1",
  callId: "call_1"
}

/** The fixture MCP server over stdio, with its flags (see mcp-fixture.ts) and config extras. */
export const fixture = (
  flags: ReadonlyArray<string>,
  extra: Partial<Omit<McpConfig.StdioServer, "command" | "args">> = {}
): McpConfig.StdioServer => ({
  command: process.execPath,
  args: ["--import", "tsx", FIXTURE, ...flags],
  cwd: root,
  ...extra
})
