/**
 * What Corral's MCP client declares and answers when a server asks it something: elicitation (always declared, so a
 * question is answered — by the session's person, or declined — instead of failing as an unknown method), roots
 * (declared only when the server's config lists some), sampling (declared and answered only when the server's config
 * enables it: served by the calling session's model, see `mcpSample`), and, for anything else (sampling of a server
 * that may not sample), a JSON-RPC error that says why and what to change.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import type {
  ClientCapabilities,
  CreateMessageRequest,
  CreateMessageResult,
  ElicitRequest,
  ElicitResult
} from "@modelcontextprotocol/sdk/types.js"
import type * as McpConfig from "../McpConfig.js"

/** The capabilities declared to a server configured as `config`. */
export const capabilitiesOf = (config: McpConfig.McpServer): ClientCapabilities => ({
  // Form mode, with the schema's defaults applied to an accepted answer by the SDK too (SEP-1034).
  elicitation: { form: { applyDefaults: true } },
  ...(config.roots === undefined ? {} : { roots: {} }),
  ...(config.sampling === true ? { sampling: {} } : {})
})

/** Answers a server's question; absent: every question is declined. */
export type OnElicit = (params: ElicitRequest["params"], signal: AbortSignal) => Promise<ElicitResult>

/** Answers a server's sample request (rejecting with `rpcError`); absent: every request is refused. */
export type OnSample = (params: CreateMessageRequest["params"], signal: AbortSignal) => Promise<CreateMessageResult>

/** A JSON-RPC error the SDK sends as is: a plain error with a code (an McpError's message repeats its code). */
export const rpcError = (code: number, message: string): Error => Object.assign(new Error(message), { code })

/** Installs the request handlers on `client` for the server `name` configured as `config`. */
export const install = (
  client: Client,
  handle: { readonly name: string; readonly config: McpConfig.McpServer },
  onElicit: OnElicit | undefined,
  onSample?: OnSample
): void => {
  const { config, name } = handle
  client.setRequestHandler(ElicitRequestSchema, (request, extra) =>
    onElicit === undefined
      ? Promise.resolve<ElicitResult>({ action: "decline" })
      : onElicit(request.params, extra.signal))
  if (config.roots !== undefined) {
    const roots = config.roots.map((r) => ({ uri: r.uri, ...(r.name === undefined ? {} : { name: r.name }) }))
    client.setRequestHandler(ListRootsRequestSchema, () => ({ roots }))
  }
  if (config.sampling === true) {
    client.setRequestHandler(CreateMessageRequestSchema, (request, extra) =>
      onSample === undefined
        ? Promise.reject(rpcError(
          ErrorCode.InvalidRequest,
          `sampling is enabled for MCP server "${name}", but no model serves sampling requests on this host`
        ))
        : onSample(request.params, extra.signal))
  }
  client.fallbackRequestHandler = (request) =>
    Promise.reject(
      rpcError(
        ErrorCode.MethodNotFound,
        request.method !== "sampling/createMessage"
          ? `Corral's MCP client does not handle "${request.method}"`
          : `Corral does not let MCP server "${name}" sample its model: sampling is off for this server ` +
            `(set "sampling": true on mcpServers.${name} to allow it)`
      )
    )
}
