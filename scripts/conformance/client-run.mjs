#!/usr/bin/env node
/* global URL */
/**
 * The client the MCP conformance suite drives (`npx conformance client --command "node scripts/conformance/client-run.mjs"`):
 * Corral's own MCP client, through `corral mcp inspect`. The suite appends the scenario server's URL and names the
 * scenario in MCP_CONFORMANCE_SCENARIO; each scenario wants one thing done, which becomes inspect's `--call` (and
 * the answer to give an elicitation). Everything else — initialize, listing, transport, retries, auth — is what
 * Corral does for any configured server.
 */
import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"

const url = process.argv.at(-1)
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? ""
const corral = fileURLToPath(new URL("../../bin/corral.js", import.meta.url))

/** What each scenario asks of a client beyond connecting and listing. */
const extra = {
  tools_call: ["--call", "add_numbers", "--args", JSON.stringify({ a: 5, b: 3 })],
  "sse-retry": ["--call", "test_reconnection"],
  "elicitation-sep1034-client-defaults": ["--call", "test_client_elicitation_defaults", "--elicit", "accept"]
}[scenario] ?? []

const child = spawn(process.execPath, [corral, "mcp", "inspect", url, ...extra], { stdio: "inherit" })
child.on("exit", (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)))
