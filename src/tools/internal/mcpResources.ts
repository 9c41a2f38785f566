/**
 * Resources and prompts of MCP servers: the core `read_resource` tool, prompts resolved into text (an agent's
 * `mcpPrompt`), and the listings `corral mcp inspect` prints.
 *
 * Why a core tool rather than one per server: a tool result that links a resource (`resource_link`) is only useful
 * if the agent can follow the link, and the link names its server. One tool whose `server` argument is checked
 * against the servers the agent may use keeps the allowlist the only door: an agent allowed no tool of a server
 * reads none of its resources either. Every request is bounded like a tool call (the server's `timeoutMs`, capped by
 * the caller's limit), and every failure is a tool result that says what to do, never an exception.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"
import { McpError } from "@modelcontextprotocol/sdk/types.js"
import type { Prompt, Resource, ResourceTemplate, Tool } from "@modelcontextprotocol/sdk/types.js"
import { Ajv } from "ajv"
import type { ValidateFunction } from "ajv"
import { Duration, Effect, Either } from "effect"
import { Limits } from "../../rails/Limits.js"
import * as Spans from "../../telemetry/Spans.js"
import type { PromptRef, ToolContext, ToolDef, ToolOutcome } from "../ToolExecutor.js"
import * as Arguments from "./arguments.js"
import type { Entry } from "./mcpCall.js"
import * as Connection from "./mcpConnection.js"
import { base64Bytes } from "./mcpContent.js"
import * as Texts from "./texts.js"

/** The name of the core tool that reads a resource of an MCP server. */
export const READ_RESOURCE = "read_resource"

/** Listing pages followed at most (a server that keeps handing out cursors is broken). */
const MAX_PAGES = 100

/** `read_resource` as advertised, for the servers `servers` (sorted). */
export const readResourceDef = (servers: ReadonlyArray<string>): ToolDef => ({
  name: READ_RESOURCE,
  description: "Reads a resource of an MCP server by its URI (for example a resource link a tool returned). " +
    `Servers: ${servers.join(", ")}. Give the server named in the link.`,
  parameters: {
    type: "object",
    properties: {
      server: { type: "string", enum: [...servers], description: "The MCP server the resource belongs to." },
      uri: { type: "string", minLength: 1, description: "The resource's URI, exactly as given." }
    },
    required: ["uri"],
    additionalProperties: false
  },
  effect: "read",
  source: "core"
})

/** What a server answered, or why it could not be asked (a message for the model or the operator). */
const describe = (server: string, error: unknown): string =>
  error instanceof McpError
    ? `MCP server "${server}" answered: ${error.message}`
    : `MCP server "${server}": ${Connection.describeError(error)}`

/**
 * Runs `request` on the handle's live connection (waiting for a restart as a tool call does), within `timeoutMs`.
 * Fails with a message naming the server: down, no answer in time, or the server's error.
 */
export const onServer = <A>(
  handle: Connection.Handle,
  timeoutMs: number,
  what: string,
  request: (client: Client, signal: AbortSignal) => Promise<A>
): Effect.Effect<A, string> =>
  Effect.flatMap(
    Connection.acquire(handle),
    Either.match({
      onLeft: (detail) => Effect.fail(`MCP server "${handle.name}" is unavailable (${detail})`),
      onRight: (conn) =>
        Effect.tryPromise({
          try: (signal) => request(conn.client, signal),
          catch: (error) => describe(handle.name, error)
        })
    })
  ).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(timeoutMs),
      onTimeout: () => `MCP server "${handle.name}" did not answer ${what} within ${timeoutMs} ms`
    })
  )

type ReadResult = Awaited<ReturnType<Client["readResource"]>>

/** The contents of a read resource as text: text kept, binary described by type and size. */
export const renderContents = (contents: ReadResult["contents"]): string => {
  if (contents.length === 0) return "(the resource is empty)"
  return contents.map((c) => {
    const mime = c.mimeType === undefined ? "" : `, ${c.mimeType}`
    return "text" in c
      ? `[resource: ${c.uri}${mime}]\n${c.text}`
      : `[resource: ${c.uri}${mime}, ${base64Bytes(c.blob)} bytes]`
  }).join("\n")
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * One `read_resource` call: `args` already passed the tool's schema. `allowed` are the servers the caller may read
 * (the servers of its allowlisted tools); `server` may be left out when exactly one is allowed. Never fails.
 */
export const readResource = (
  handles: ReadonlyArray<Connection.Handle>,
  allowed: ReadonlySet<string>,
  args: unknown,
  limitMs: number
): Effect.Effect<ToolOutcome> => {
  const record = isRecord(args) ? args : {}
  const uri = typeof record["uri"] === "string" ? record["uri"] : ""
  const named = typeof record["server"] === "string" ? record["server"] : undefined
  const mine = handles.filter((h) => allowed.has(h.name)).map((h) => h.name)
  const server = named ?? (mine.length === 1 ? mine[0] : undefined)
  if (server === undefined) {
    return Effect.succeed(Texts.failed(
      "invalid_args",
      `arguments for tool "${READ_RESOURCE}" need "server": this agent may read resources of ${
        mine.length === 0 ? "no MCP server" : mine.join(", ")
      }. Re-emit the call with the server named in the resource link.`
    ))
  }
  const handle = handles.find((h) => h.name === server)
  if (handle === undefined || !allowed.has(server)) {
    return Effect.succeed(Texts.toolError(
      READ_RESOURCE,
      `this agent may not read resources of MCP server "${server}" (it may read those of ${
        mine.length === 0 ? "none" : mine.join(", ")
      }).`
    ))
  }
  const ms = handle.config.timeoutMs === undefined ? limitMs : Math.min(handle.config.timeoutMs, limitMs)
  return onServer(handle, ms, "resources/read", (client, signal) => {
    if (client.getServerCapabilities()?.resources === undefined) {
      return Promise.reject(new Error("it offers no resources"))
    }
    return client.readResource({ uri }, { signal, timeout: ms })
  }).pipe(
    Effect.match({
      onFailure: (message) => Texts.toolError(READ_RESOURCE, `${message} (reading ${uri})`),
      onSuccess: (result): ToolOutcome => ({ content: renderContents(result.contents), isError: false })
    }),
    Spans.span(() => "mcp.read_resource", () => ({ "mcp.server": server, "mcp.timeout_ms": ms }), "client", {
      leaf: true
    })
  )
}

/** The core `read_resource` tool over a registry's servers: its definition and its compiled argument check. */
export interface Core {
  readonly def: ToolDef
  readonly validate: ValidateFunction
  readonly expected: string
}

const ajv = new Ajv({ allErrors: true, strict: false, logger: false })

/**
 * The core tool for the servers of `handles` (sorted by name) that have offered resources (the `resources`
 * capability, at their last connection); `undefined` when none has: there is nothing to read, and a host without
 * resource servers lists no extra tool.
 */
export const coreOf = (handles: ReadonlyArray<Connection.Handle>): Core | undefined => {
  const servers = handles.filter(Connection.offersResources).map((h) => h.name)
  if (servers.length === 0) return undefined
  const def = readResourceDef(servers)
  const validate = ajv.compile(def.parameters)
  ajv.removeSchema(def.parameters)
  return { def, validate, expected: Texts.summarize(def.parameters) }
}

/** The servers `ctx` may reach through the core tool: those of its allowlisted tools (all, without an allowlist). */
export const allowedServers = (
  entries: ReadonlyMap<string, Entry>,
  handles: ReadonlyArray<Connection.Handle>,
  ctx: ToolContext
): ReadonlySet<string> => {
  if (ctx.allowlist === undefined) return new Set(handles.map((h) => h.name))
  const allowed = new Set<string>()
  for (const name of ctx.allowlist) {
    const entry = entries.get(name)
    if (entry !== undefined) allowed.add(entry.handle.name)
  }
  return allowed
}

/** One call of the core tool: arguments checked, servers scoped by `ctx.allowlist`, bounded. Never fails. */
export const callCore = (
  core: Core,
  entries: ReadonlyMap<string, Entry>,
  handles: ReadonlyArray<Connection.Handle>,
  argumentsJson: string,
  ctx: ToolContext
): Effect.Effect<ToolOutcome> => {
  const checked = Arguments.check(core.def.name, argumentsJson, core.validate, core.expected)
  if (!checked.ok) return Effect.succeed(checked.outcome)
  return Effect.flatMap(
    Limits,
    (limits) =>
      readResource(handles, allowedServers(entries, handles, ctx), checked.args, ctx.timeoutMs ?? limits.toolTimeoutMs)
  )
}

/**
 * The text of the prompt `ref` among `handles`, bounded by `limitMs` (absent: `Limits.toolTimeoutMs`) and the
 * server's own `timeoutMs`. Fails with a message naming the prompt and what is wrong (unknown server, see `getPrompt`).
 */
export const prompt = (
  handles: ReadonlyArray<Connection.Handle>,
  ref: PromptRef,
  limitMs: number | undefined
): Effect.Effect<string, string> => {
  const handle = handles.find((h) => h.name === ref.server)
  if (handle === undefined) {
    return Effect.fail(
      `prompt "${ref.server}/${ref.name}": no MCP server "${ref.server}" is configured (servers: ${
        handles.map((h) => h.name).join(", ") || "none"
      })`
    )
  }
  return Effect.flatMap(Limits, (limits) => {
    const limit = limitMs ?? limits.toolTimeoutMs
    const ms = handle.config.timeoutMs === undefined ? limit : Math.min(handle.config.timeoutMs, limit)
    return getPrompt(handle, ref.name, ref.arguments, ms)
  })
}

type PromptResult = Awaited<ReturnType<Client["getPrompt"]>>

/** A prompt's messages as one text: each message's text (embedded text resources included), in order. */
export const promptText = (result: PromptResult): string =>
  result.messages.map((message) => {
    const c = message.content
    switch (c.type) {
      case "text":
        return c.text
      case "resource":
        return "text" in c.resource && typeof c.resource.text === "string"
          ? c.resource.text
          : `[resource: ${c.resource.uri}]`
      case "image":
      case "audio":
        return `[${c.type}: ${c.mimeType}, ${base64Bytes(c.data)} bytes]`
      case "resource_link":
        return `[resource link: ${c.name} ${c.uri}]`
      default:
        return ""
    }
  }).filter((text) => text.length > 0).join("\n\n")

/**
 * The text of prompt `name` of the handle's server with `args`, within `timeoutMs`. Fails with a message naming the
 * server and the prompt: the server is down or has no prompts, the prompt does not exist (the server's prompts are
 * listed), or the server refused the arguments.
 */
export const getPrompt = (
  handle: Connection.Handle,
  name: string,
  args: Readonly<Record<string, string>>,
  timeoutMs: number
): Effect.Effect<string, string> =>
  onServer(handle, timeoutMs, "prompts/get", async (client, signal) => {
    if (client.getServerCapabilities()?.prompts === undefined) throw new Error("it offers no prompts")
    const prompts = await listPages(
      (cursor) => client.listPrompts(cursor === undefined ? undefined : { cursor }, { signal, timeout: timeoutMs }),
      (page) => page.prompts
    )
    if (!prompts.some((p) => p.name === name)) {
      throw new Error(`it has no prompt "${name}" (its prompts: ${prompts.map((p) => p.name).join(", ") || "none"})`)
    }
    return client.getPrompt({ name, arguments: { ...args } }, { signal, timeout: timeoutMs })
  }).pipe(
    Effect.map(promptText),
    Effect.mapError((message) => `prompt "${handle.name}/${name}": ${message}`)
  )

/** Every page of a cursor-paginated listing. */
export const listPages = async <P extends { readonly nextCursor?: string | undefined }, A>(
  page: (cursor: string | undefined) => Promise<P>,
  items: (page: P) => ReadonlyArray<A>
): Promise<ReadonlyArray<A>> => {
  const all: Array<A> = []
  let cursor: string | undefined
  for (let i = 0; i < MAX_PAGES; i++) {
    const result = await page(cursor)
    all.push(...items(result))
    if (result.nextCursor === undefined) return all
    cursor = result.nextCursor
  }
  throw new Error(`a listing still returned a cursor after ${MAX_PAGES} pages`)
}

/** What a server offers besides tools, for `corral mcp inspect`. */
export interface Offer {
  readonly resources: ReadonlyArray<Resource>
  readonly templates: ReadonlyArray<ResourceTemplate>
  readonly prompts: ReadonlyArray<Prompt>
}

/** Lists a server's resources, resource templates and prompts (each empty when it lacks the capability). */
export const offerOf = (client: Client, signal: AbortSignal, timeout: number): Promise<Offer> => {
  const caps = client.getServerCapabilities()
  const options = { signal, timeout }
  return Promise.all([
    caps?.resources === undefined ? [] : listPages(
      (cursor) => client.listResources(cursor === undefined ? undefined : { cursor }, options),
      (page) => page.resources
    ),
    caps?.resources === undefined ? [] : listPages(
      (cursor) => client.listResourceTemplates(cursor === undefined ? undefined : { cursor }, options),
      (page) => page.resourceTemplates
    ),
    caps?.prompts === undefined ? [] : listPages(
      (cursor) => client.listPrompts(cursor === undefined ? undefined : { cursor }, options),
      (page) => page.prompts
    )
  ]).then(([resources, templates, prompts]) => ({ resources, templates, prompts }))
}

/** A server as it describes itself, with everything it lists: what `corral mcp inspect` prints. */
export interface Description extends Offer {
  readonly name: string
  readonly version: string
  readonly instructions: string | undefined
  readonly capabilities: Readonly<Record<string, unknown>>
  readonly tools: ReadonlyArray<Tool>
}

/**
 * Describes the handle's server on its live connection: its name, version, instructions and capabilities, and every
 * tool, resource, resource template and prompt it lists, within `timeoutMs`. Fails with a message naming the server.
 */
export const describeServer = (handle: Connection.Handle, timeoutMs: number): Effect.Effect<Description, string> =>
  onServer(handle, timeoutMs, "the listings", async (client, signal) => {
    const info = client.getServerVersion()
    const capabilities = client.getServerCapabilities() ?? {}
    const tools = capabilities.tools === undefined ? [] : await listPages(
      (cursor) => client.listTools(cursor === undefined ? undefined : { cursor }, { signal, timeout: timeoutMs }),
      (page) => page.tools
    )
    const offer = await offerOf(client, signal, timeoutMs)
    return {
      name: info?.name ?? "(unnamed)",
      version: info?.version ?? "(no version)",
      instructions: client.getInstructions(),
      capabilities,
      tools,
      ...offer
    }
  })
