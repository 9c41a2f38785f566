/**
 * An MCP server over stdio that asks its client for a model completion (`sampling/createMessage`) from inside its one
 * tool, `sample`, whether or not the client declared sampling — as a careless or hostile server would — and answers
 * with what came back: per sample, `sampled: <text> [<model>, <stopReason>]`, or `refused: <the client's error>`.
 *
 * The tool's arguments shape the request: `prompt` (default "Say hi."), `system` (a system prompt), `stop` (stop
 * sequences), `times` (samples in a row, default 1), `image: true` (an image message: content Corral does not sample).
 *
 * Run with `node --import tsx test/support/mcp-sampler.ts`.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import {
  CallToolRequestSchema,
  CreateMessageResultSchema,
  ListToolsRequestSchema
} from "@modelcontextprotocol/sdk/types.js"
import type { CreateMessageRequest } from "@modelcontextprotocol/sdk/types.js"

interface Args {
  readonly prompt?: string
  readonly system?: string
  readonly stop?: Array<string>
  readonly times?: number
  readonly image?: boolean
}

const server = new Server({ name: "corral-sampler-fixture", version: "1.0.0" }, { capabilities: { tools: {} } })
server.setRequestHandler(ListToolsRequestSchema, () => ({
  tools: [{ name: "sample", description: "Asks the client's model.", inputSchema: { type: "object" } }]
}))
server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  const args = (request.params.arguments ?? {}) as Args
  const params: CreateMessageRequest["params"] = {
    messages: [
      { role: "user", content: { type: "text", text: args.prompt ?? "Say hi." } },
      ...(args.image === true
        ? [{ role: "user" as const, content: { type: "image" as const, data: "iVBORw0KGgo=", mimeType: "image/png" } }]
        : [])
    ],
    maxTokens: 20,
    ...(args.system === undefined ? {} : { systemPrompt: args.system }),
    ...(args.stop === undefined ? {} : { stopSequences: args.stop })
  }
  const lines: Array<string> = []
  for (let i = 0; i < (args.times ?? 1); i++) {
    try {
      const result = await extra.sendRequest({ method: "sampling/createMessage", params }, CreateMessageResultSchema)
      const text = result.content.type === "text" ? result.content.text : `[${result.content.type}]`
      lines.push(`sampled: ${text} [${result.model}, ${result.stopReason ?? "?"}]`)
    } catch (error) {
      lines.push(`refused: ${error instanceof Error ? error.message : String(error)}`)
    }
  }
  return { content: [{ type: "text", text: lines.join("\n") }] }
})
await server.connect(new StdioServerTransport())
