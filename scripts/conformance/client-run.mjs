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

/**
 * The auth scenarios: a server behind OAuth 2.1 with a tool `test-tool`. Corral authenticates as configured for such
 * a server (`auth` in mcpServers), here given on inspect's command line: the grant, and the pre-registered client
 * the scenario hands over in MCP_CONFORMANCE_CONTEXT (its secret or private key passed through an environment
 * variable, as `clientSecretEnv` / `privateKeyEnv` name them in a config). Inspect follows the authorization redirect itself (the suite's
 * authorization server approves without a person).
 */
const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? "{}")
const env = { ...process.env }
const auth = []
if (scenario.startsWith("auth/")) {
  auth.push("--oauth", scenario.startsWith("auth/client-credentials") ? "client_credentials" : "authorization_code")
  if (context.client_id !== undefined) auth.push("--client-id", context.client_id)
  if (context.client_secret !== undefined) {
    env.CONFORMANCE_CLIENT_SECRET = context.client_secret
    auth.push("--client-secret-env", "CONFORMANCE_CLIENT_SECRET")
  }
  // private_key_jwt (SEP-1046): the key registered for the client, and its algorithm.
  if (context.private_key_pem !== undefined) {
    env.CONFORMANCE_CLIENT_KEY = context.private_key_pem
    auth.push("--private-key-env", "CONFORMANCE_CLIENT_KEY")
    if (context.signing_algorithm !== undefined) auth.push("--signing-algorithm", context.signing_algorithm)
  }
  // SEP-991: where the authorization server accepts URL client ids, the suite expects this one.
  if (scenario === "auth/basic-cimd") {
    auth.push("--client-metadata-url", "https://conformance-test.local/client-metadata.json")
  }
  auth.push("--call", "test-tool")
}

const child = spawn(process.execPath, [corral, "mcp", "inspect", url, ...extra, ...auth], { stdio: "inherit", env })
child.on("exit", (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)))
