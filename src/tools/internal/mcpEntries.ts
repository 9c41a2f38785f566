/**
 * A server's listed tools as the registry's entries: each compiled once (ajv, in the dialect its schema declares),
 * named as offered (prefixed), with its effect (config override, else `readOnlyHint`), minus what the config
 * excludes; and, for a server that has not listed any yet, the tools its config names.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import { Ajv } from "ajv"
import type { ValidateFunction } from "ajv"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Effect } from "effect"
import * as McpConfig from "../McpConfig.js"
import type { ToolDef } from "../ToolExecutor.js"
import type { Entry } from "./mcpCall.js"
import type * as Connection from "./mcpConnection.js"
import { READ_RESOURCE } from "./mcpResources.js"
import * as Texts from "./texts.js"

/** `strict: false`: MCP servers use keywords and formats ajv does not know; they must not break validation. */
const ajv = new Ajv({ allErrors: true, strict: false, logger: false })
const ajv2020 = new Ajv2020({ allErrors: true, strict: false, logger: false })

/** Compiles with the dialect the schema declares (zod 4 emits 2020-12; most servers draft-07 or none). */
const compile = (schema: Tool["inputSchema"]): ValidateFunction => {
  const dialect = schema["$schema"]
  const instance = typeof dialect === "string" && dialect.includes("2020-12") ? ajv2020 : ajv
  const validate = instance.compile(schema)
  // The validator is kept on the entry: drop ajv's own reference, or registries rebuilt per scope would pile up
  // schemas (and two servers reusing one `$id` would clash).
  instance.removeSchema(schema)
  return validate
}

/**
 * A server's listed tools as entries: `exclude` dropped, `effects` overrides applied, prefixed. A tool advertised
 * under the core `read_resource` name is dropped with an error line: the core tool keeps its name.
 */
export const entriesOf = (
  handle: Connection.Handle,
  tools: ReadonlyArray<Tool>
): Effect.Effect<ReadonlyArray<Entry>> => {
  const excluded = new Set(handle.config.exclude ?? [])
  const overrides = handle.config.effects ?? {}
  const reserved = tools.filter((t) => McpConfig.toolName(handle.config, t.name) === READ_RESOURCE)
  return Effect.zipRight(
    Effect.forEach(reserved, (tool) =>
      Effect.logError(
        `MCP server "${handle.name}" exports tool "${tool.name}", the name of Corral's core tool ` +
          `"${READ_RESOURCE}": it is not advertised; give the server a \`prefix\` or \`exclude\` it`
      ), { discard: true }),
    Effect.forEach(
      tools.filter((t) => !excluded.has(t.name) && !reserved.includes(t)),
      (tool) => toEntry(tool, handle, overrides)
    )
  )
}

const toEntry = (
  tool: Tool,
  handle: Connection.Handle,
  overrides: Readonly<Record<string, "read" | "write">>
): Effect.Effect<Entry> =>
  Effect.gen(function*() {
    let validate: ValidateFunction | undefined
    try {
      validate = compile(tool.inputSchema)
    } catch (error) {
      yield* Effect.logWarning(
        `MCP tool "${tool.name}" of server "${handle.name}": input schema not compiled (${Texts.messageOf(error)}); ` +
          "arguments are validated by the server only"
      )
    }
    const def: ToolDef = {
      name: McpConfig.toolName(handle.config, tool.name),
      description: tool.description ?? tool.annotations?.title ?? tool.title ?? "",
      parameters: tool.inputSchema,
      effect: overrides[tool.name] ?? (tool.annotations?.readOnlyHint === true ? "read" : "write"),
      source: `mcp:${handle.name}`
    }
    return { def, remote: tool.name, handle, validate, expected: Texts.summarize(tool.inputSchema) }
  })

/**
 * The tools a server is known by before it has listed any (it is down at start): its config's `tools` and
 * `effects` names, never offered (they are unavailable until it lists them) and described as such.
 */
export const configuredEntries = (handle: Connection.Handle): ReadonlyArray<Entry> => {
  const excluded = new Set(handle.config.exclude ?? [])
  const overrides = handle.config.effects ?? {}
  const names = [...new Set([...(handle.config.tools ?? []), ...Object.keys(overrides)])]
  const parameters = { type: "object" }
  return names.filter((name) => !excluded.has(name)).map((name) => ({
    def: {
      name: McpConfig.toolName(handle.config, name),
      description: `(not listed yet: MCP server "${handle.name}" has not started)`,
      parameters,
      effect: overrides[name] ?? "write",
      source: `mcp:${handle.name}`
    },
    remote: name,
    handle,
    validate: undefined,
    expected: Texts.summarize(parameters)
  }))
}
