/**
 * `corral/mcp` as Node loads it from the package: src/mcp.ts behind `load`, so that a program without
 * @modelcontextprotocol/sdk (an optional peer) is told which package this entry needs and the line that installs it.
 * The types are src/mcp.ts's (package.json `exports`); test/entries/OptionalPeers.test.ts keeps the names equal.
 */
import { load } from "../internal/optionalPeers.js"

const entry = await load("corral/mcp", () => import("../mcp.js"))

export const { Elicitations, layer, layerConfig, McpConfig, McpRegistry } = entry
