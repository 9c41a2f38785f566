/**
 * The texts a failed tool call hands back to the model. They are prescriptive on purpose: a model that is told what
 * went wrong AND what to emit next recovers in one turn, while a bare "invalid arguments" invites the same call again
 * (which the repeat guard and the strikes rail would then have to stop).
 */
import type { ErrorObject } from "ajv"
import type { ToolFailure, ToolOutcome } from "../ToolExecutor.js"

/** An error-flagged outcome. */
export const failed = (failure: ToolFailure, content: string): ToolOutcome => ({ content, isError: true, failure })

/** `unknown_tool`: names every callable tool so the model can pick one. */
export const unknownTool = (name: string, available: string): ToolOutcome =>
  failed(
    "unknown_tool",
    available.length > 0
      ? `unknown tool "${name}". Available tools: ${available}. Call one of them by its exact name.`
      : `unknown tool "${name}". No tools are available in this session; answer without calling tools.`
  )

/** `invalid_json`: quotes the parser; the arguments are never repaired. */
export const invalidJson = (name: string, parserMessage: string): ToolOutcome =>
  failed(
    "invalid_json",
    `arguments for tool "${name}" were not valid JSON: ${parserMessage.replace(/\.\s*$/, "")}. ` +
      "Re-emit the call with corrected arguments: a single JSON object matching the tool's schema."
  )

const REEMIT = "Re-emit the call with corrected arguments."

/** `invalid_args` for JSON that parsed but is not an object (an array, a string, a number, null). */
export const notAnObject = (name: string, value: unknown, expected: string): ToolOutcome =>
  failed(
    "invalid_args",
    `arguments for tool "${name}" must be a JSON object, got ${jsonKind(value)}.\n` +
      `Expected arguments: ${expected}. ${REEMIT}`
  )

/** How many validation errors are spelled out; the rest are counted (a 500-item array can yield 500 errors). */
const MAX_LISTED_ERRORS = 20

/** `invalid_args` for an object that fails the schema: one line per ajv error, then the expected shape. */
export const invalidArgs = (name: string, errors: ReadonlyArray<ErrorObject>, expected: string): ToolOutcome => {
  const lines = errors.slice(0, MAX_LISTED_ERRORS).map((e) => `- ${describeError(e)}`)
  if (errors.length > MAX_LISTED_ERRORS) lines.push(`- ... and ${errors.length - MAX_LISTED_ERRORS} more`)
  return failed(
    "invalid_args",
    `arguments for tool "${name}" do not match its schema:\n${lines.join("\n")}\n` +
      `Expected arguments: ${expected}. ${REEMIT}`
  )
}

/** `tool_error`: the tool ran and failed (or died). */
export const toolError = (name: string, message: string): ToolOutcome =>
  failed("tool_error", `tool "${name}" failed: ${message}`)

/** `timeout`: the tool was interrupted at its deadline. */
export const timedOut = (name: string, ms: number): ToolOutcome =>
  failed("timeout", `tool "${name}" did not finish within ${ms} ms; it was stopped. Try a narrower request.`)

/** `interrupted`: the tool interrupted itself (the caller was not cancelled). */
export const interrupted = (name: string): ToolOutcome =>
  failed("interrupted", `tool "${name}" was interrupted before it finished. Try again or use another tool.`)

const describeError = (e: ErrorObject): string => {
  const path = e.instancePath === "" ? "(root)" : e.instancePath
  const message = e.message ?? e.keyword
  const params: Record<string, unknown> = e.params
  if (e.keyword === "additionalProperties" && typeof params["additionalProperty"] === "string") {
    return `${path}: ${message}: "${params["additionalProperty"]}"`
  }
  if (e.keyword === "enum" && Array.isArray(params["allowedValues"])) {
    return `${path}: ${message}: ${params["allowedValues"].map((v) => JSON.stringify(v)).join(", ")}`
  }
  return `${path}: ${message}`
}

const jsonKind = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** How deep the summary descends into nested objects before writing just `object`. */
const SUMMARY_DEPTH = 3

/**
 * A one-line, TypeScript-like summary of a JSON Schema (`{ q: string, limit?: integer }`), computed once per tool
 * at registration so the invalid-args text costs nothing on the hot path.
 */
export const summarize = (schema: unknown, depth = 0): string => {
  if (!isRecord(schema)) return "any"
  if (Array.isArray(schema["enum"])) return schema["enum"].map((v) => JSON.stringify(v)).join(" | ")
  if ("const" in schema) return JSON.stringify(schema["const"])
  for (const key of ["anyOf", "oneOf"] as const) {
    const options = schema[key]
    if (Array.isArray(options)) return options.map((o) => summarize(o, depth + 1)).join(" | ")
  }
  const type = schema["type"]
  const properties = schema["properties"]
  if (type === "object" || (type === undefined && isRecord(properties))) {
    if (!isRecord(properties) || depth >= SUMMARY_DEPTH) return "object"
    const required = new Set(Array.isArray(schema["required"]) ? schema["required"] : [])
    const fields = Object.entries(properties).map(([key, sub]) =>
      `${key}${required.has(key) ? "" : "?"}: ${summarize(sub, depth + 1)}`
    )
    return fields.length === 0 ? "{}" : `{ ${fields.join(", ")} }`
  }
  if (type === "array") return `array of ${summarize(schema["items"], depth + 1)}`
  if (Array.isArray(type)) return type.join(" | ")
  return typeof type === "string" ? type : "any"
}

/**
 * The message of whatever a tool failed or died with: an `Error`'s message, a tagged error's message or tag, a
 * string as is, anything else as JSON.
 */
export const messageOf = (u: unknown): string => {
  if (typeof u === "string") return u
  if (isRecord(u) || u instanceof Error) {
    const record = u as Record<string, unknown>
    const message = record["message"]
    if (typeof message === "string" && message.length > 0) return message
    const tag = record["_tag"]
    if (typeof tag === "string") return tag
  }
  try {
    return JSON.stringify(u) ?? String(u)
  } catch {
    return String(u)
  }
}

/** `tool_error`: the MCP server's process exited while the call was in flight; the registry restarts it. */
export const serverExited = (server: string, name: string): ToolOutcome =>
  failed(
    "tool_error",
    `MCP server "${server}" exited while running tool "${name}"; it is being restarted; retry the call if it is safe.`
  )

/** `tool_error`: the answer exceeded the stdio message cap, which closes the connection; the registry restarts it. */
export const outputTooLarge = (server: string, name: string, limit: string): ToolOutcome =>
  failed(
    "tool_error",
    `the output of tool "${name}" was larger than the ${limit} an MCP stdio message may carry, so the connection to ` +
      `MCP server "${server}" was closed; it is being restarted. Call the tool again with a narrower request.`
  )

/** `tool_error`: the connection to a (remote) MCP server broke while the call was in flight. */
export const connectionLost = (server: string, name: string, detail: string): ToolOutcome =>
  failed(
    "tool_error",
    `the connection to MCP server "${server}" was lost while running tool "${name}" (${detail}); it is being ` +
      "re-established; retry the call if it is safe."
  )

/**
 * `tool_error`: the call was never sent because its MCP server is down and has not come back yet. Says the tool
 * exists and is only unavailable for now (a model told "unknown tool" would stop using it for good), and since when
 * when it is known (epoch ms).
 */
export const serverUnavailable = (server: string, name: string, detail: string, since?: number): ToolOutcome =>
  failed(
    "tool_error",
    `tool "${name}" was not run: it is temporarily unavailable because MCP server "${server}" is down` +
      `${since === undefined ? "" : ` since ${new Date(since).toISOString()}`} (${detail}). The tool exists and ` +
      "Corral is reconnecting to its server: try the call again later, or use another tool meanwhile."
  )

/** `timeout` for a tool that reported progress before its deadline: how far it got helps size the next request. */
export const timedOutAfterProgress = (name: string, ms: number, progress: string | undefined): ToolOutcome => {
  const outcome = timedOut(name, ms)
  return progress === undefined ? outcome : failed("timeout", `${outcome.content} Last progress reported: ${progress}.`)
}

/** `timeout` for a tool that kept reporting progress until the hard cap on one call. */
export const progressCapReached = (name: string, capMs: number, progress: string | undefined): ToolOutcome =>
  failed(
    "timeout",
    `tool "${name}" was still reporting progress after ${capMs} ms, the most one call may run; it was stopped.` +
      `${progress === undefined ? "" : ` Last progress reported: ${progress}.`} Split the work into smaller requests.`
  )
