/**
 * A misbehaving MCP server over stdio, for the McpRegistry tests: it hangs, crashes, floods, writes junk and changes
 * its tools on purpose, so the registry's timeout, restart, size, parsing and refresh paths run against a real child
 * process.
 *
 * Run with `node --import tsx test/support/mcp-fixture.ts [--junk] [--prefix P] [--only a,b] [--mutable]
 * [--tools-file F]`:
 * - `--junk` writes a line that is not JSON-RPC to stdout before every answer (the client must skip it);
 * - `--prefix P` prefixes every tool name (so two fixtures can run side by side without colliding);
 * - `--only a,b` exports only the named tools (before prefixing);
 * - `--mutable` also exports `add_tool` (adds or redefines a tool that answers with its name and arguments),
 *   `remove_tool` and `fail_listing` (makes `tools/list` fail, or work again); each changes the list, then sends
 *   `notifications/tools/list_changed` before it answers, so the client has the notification when the call returns;
 * - `--tools-file F` reads `{ "add"?: [{ name, inputSchema?, readOnly? }], "remove"?: [name] }` from F at start, if
 *   it exists (names as exported, after prefixing): a restarted fixture can list other tools than before;
 * - `--require-file F` exits at once (code 2, a line on stderr) unless F exists: a server that is down until the
 *   test brings it up.
 * - `--stubborn` ignores SIGTERM and the end of its stdin: only SIGKILL ends it (a server that outlives its host
 *   unless the host kills it).
 * Tools are listed in pages of 3, so every client of the fixture exercises `nextCursor` pagination.
 *
 * Built on the SDK's low-level `Server` with plain JSON Schemas: the project does not depend on zod directly, and
 * the junk mode needs nothing more than the raw stdout the transport writes to.
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js"
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js"
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js"
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js"
import * as fs from "node:fs"

const argv = process.argv.slice(2)
const option = (flag: string): string | undefined => {
  const i = argv.indexOf(flag)
  return i === -1 ? undefined : argv[i + 1]
}
const junk = argv.includes("--junk")
const prefix = option("--prefix") ?? ""
const only = option("--only")?.split(",")
const mutable = argv.includes("--mutable")
const toolsFile = option("--tools-file")
const required = option("--require-file")
if (required !== undefined && !fs.existsSync(required)) {
  process.stderr.write(`fixture: ${required} does not exist\n`)
  process.exit(2)
}

const PAGE_SIZE = 3

const object = (properties: Record<string, object>, required: ReadonlyArray<string> = []): Tool["inputSchema"] => ({
  type: "object",
  properties,
  required: [...required],
  additionalProperties: false
})

const all: ReadonlyArray<Tool> = [
  {
    name: "echo",
    description: "Echoes its message.",
    inputSchema: object({ message: { type: "string" } }, ["message"])
  },
  { name: "hang", description: "Never answers (until cancelled).", inputSchema: object({}) },
  {
    name: "progress_then_hang",
    description: "Reports progress 2 of 3, then never answers.",
    inputSchema: object({})
  },
  { name: "crash", description: "Exits the server process mid-call.", inputSchema: object({}) },
  {
    name: "big_output",
    description: "Returns `bytes` bytes of text.",
    inputSchema: object({ bytes: { type: "integer", minimum: 0 } }, ["bytes"])
  },
  {
    name: "delete_file",
    description: "Deletes a file (a write). Its schema declares JSON Schema 2020-12, as zod 4 emits.",
    inputSchema: {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      ...object({ path: { type: "string" } }, ["path"])
    }
  },
  {
    name: "read_notes",
    description: "Reads the notes (a read).",
    inputSchema: object({}),
    annotations: { readOnlyHint: true }
  },
  {
    name: "stats",
    description: "How many `hang` calls started and how many were cancelled by the client.",
    inputSchema: object({}),
    annotations: { readOnlyHint: true }
  },
  { name: "fail", description: "Answers with isError.", inputSchema: object({}) },
  {
    name: "pid",
    description: "The server's process id.",
    inputSchema: object({}),
    annotations: { readOnlyHint: true }
  },
  {
    name: "structured_only",
    description: "Answers with structured content and no text.",
    inputSchema: object({}),
    annotations: { readOnlyHint: true }
  }
]

const changers: ReadonlyArray<Tool> = [
  {
    name: "add_tool",
    description: "Adds tool `name` (or redefines it), then notifies that the tool list changed.",
    inputSchema: object({ name: { type: "string" }, inputSchema: { type: "object" }, readOnly: { type: "boolean" } }, [
      "name"
    ])
  },
  {
    name: "remove_tool",
    description: "Removes tool `name`, then notifies that the tool list changed.",
    inputSchema: object({ name: { type: "string" } }, ["name"])
  },
  {
    name: "fail_listing",
    description: "Makes tools/list fail (or work again), then notifies that the tool list changed.",
    inputSchema: object({ fail: { type: "boolean" } }, ["fail"])
  }
]

interface Added {
  readonly name: string
  readonly inputSchema?: Tool["inputSchema"]
  readonly readOnly?: boolean
}

const added = (spec: Added): Tool => ({
  name: spec.name,
  description: "Added at run time; answers with its name and arguments.",
  inputSchema: spec.inputSchema ?? object({}),
  ...(spec.readOnly === true ? { annotations: { readOnlyHint: true } } : {})
})

let tools: Array<Tool> = [...all, ...(mutable ? changers : [])]
  .filter((t) => only === undefined || only.includes(t.name) || changers.includes(t))
  .map((t) => ({ ...t, name: `${prefix}${t.name}` }))
/** Names of the tools added at run time (they answer generically). */
const dynamic = new Set<string>()

const addTool = (spec: Added) => {
  tools = [...tools.filter((t) => t.name !== spec.name), added(spec)]
  dynamic.add(spec.name)
}
const removeTool = (name: string) => {
  tools = tools.filter((t) => t.name !== name)
}

if (toolsFile !== undefined && fs.existsSync(toolsFile)) {
  const changes = JSON.parse(fs.readFileSync(toolsFile, "utf8")) as {
    readonly add?: ReadonlyArray<Added>
    readonly remove?: ReadonlyArray<string>
  }
  changes.add?.forEach(addTool)
  changes.remove?.forEach(removeTool)
}
let failListing = false

const stats = { hangStarted: 0, hangCancelled: 0 }

const text = (s: string): CallToolResult => ({ content: [{ type: "text", text: s }] })

const server = new Server({ name: "corral-fixture", version: "1.0.0" }, {
  capabilities: { tools: { listChanged: true } }
})

server.setRequestHandler(ListToolsRequestSchema, (request) => {
  if (failListing) throw new Error("tools/list fails on purpose")
  const start = Number(request.params?.cursor ?? "0")
  const page = tools.slice(start, start + PAGE_SIZE)
  const next = start + PAGE_SIZE
  return next < tools.length ? { tools: page, nextCursor: String(next) } : { tools: page }
})

server.setRequestHandler(CallToolRequestSchema, async (request, extra): Promise<CallToolResult> => {
  if (junk) process.stdout.write("this line is not JSON-RPC\n")
  const args = request.params.arguments ?? {}
  const name = request.params.name
  if (!tools.some((t) => t.name === name)) {
    return { content: [{ type: "text", text: `unknown tool ${name}` }], isError: true }
  }
  if (dynamic.has(name)) return text(`${name}: ${JSON.stringify(args)}`)
  switch (name.slice(prefix.length)) {
    case "echo":
      return text(`echo: ${String(args["message"])}`)
    case "hang":
      stats.hangStarted++
      await new Promise<void>((resolve) => extra.signal.addEventListener("abort", () => resolve()))
      stats.hangCancelled++
      return text("cancelled")
    case "progress_then_hang": {
      const progressToken = request.params._meta?.progressToken
      if (progressToken !== undefined) {
        for (const progress of [1, 2]) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken, progress, total: 3 }
          })
        }
      }
      await new Promise<void>((resolve) => extra.signal.addEventListener("abort", () => resolve()))
      return text("cancelled")
    }
    case "crash":
      process.stderr.write("fixture: crashing on purpose\n")
      process.exit(3)
      break
    case "big_output":
      return text("x".repeat(Number(args["bytes"])))
    case "delete_file":
      return text(`deleted ${String(args["path"])}`)
    case "read_notes":
      return text("notes: all quiet")
    case "stats":
      return text(JSON.stringify(stats))
    case "fail":
      return { content: [{ type: "text", text: "the fixture failed on purpose" }], isError: true }
    case "pid":
      return text(String(process.pid))
    case "structured_only":
      return { content: [], structuredContent: { ok: true, items: [1, 2] } }
    case "add_tool":
      addTool(args as unknown as Added)
      await server.sendToolListChanged()
      return text(`added ${String(args["name"])}`)
    case "remove_tool":
      removeTool(String(args["name"]))
      await server.sendToolListChanged()
      return text(`removed ${String(args["name"])}`)
    case "fail_listing":
      failListing = args["fail"] === true
      await server.sendToolListChanged()
      return text(failListing ? "tools/list now fails" : "tools/list works")
  }
  return { content: [{ type: "text", text: `unknown tool ${request.params.name}` }], isError: true }
})

if (argv.includes("--stubborn")) {
  process.on("SIGTERM", () => {})
  // Kept alive after stdin ends (the transport's close does not exit the process).
  setInterval(() => {}, 60_000)
}

await server.connect(new StdioServerTransport())
