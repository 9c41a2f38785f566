/**
 * An MCP server over stdio that asks its client for a model completion (`sampling/createMessage`) whether or not the
 * client declared sampling — as a careless or hostile server would — and answers its one tool, `sample`, with what
 * came back: the completion's text, or `refused: <the client's error>`.
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

const server = new Server({ name: "corral-sampler-fixture", version: "1.0.0" }, { capabilities: { tools: {} } })
server.setRequestHandler(ListToolsRequestSchema, () => ({
  tools: [{ name: "sample", description: "Asks the client's model.", inputSchema: { type: "object" } }]
}))
server.setRequestHandler(CallToolRequestSchema, async (_request, extra) => {
  try {
    const result = await extra.sendRequest({
      method: "sampling/createMessage",
      params: { messages: [{ role: "user", content: { type: "text", text: "Say hi." } }], maxTokens: 20 }
    }, CreateMessageResultSchema)
    const text = result.content.type === "text" ? result.content.text : `[${result.content.type}]`
    return { content: [{ type: "text", text: `sampled: ${text}` }] }
  } catch (error) {
    return { content: [{ type: "text", text: `refused: ${error instanceof Error ? error.message : String(error)}` }] }
  }
})
await server.connect(new StdioServerTransport())
