/**
 * The report of `corral mcp inspect`: what a server lists against what Corral's registry offers from it, with the
 * reason for every difference (a refused tool) and for every tool's effect. Pure, so the text and the JSON say the
 * same thing.
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Either, Option } from "effect"
import type { Description } from "../../tools/internal/mcpResources.js"
import * as McpConfig from "../../tools/McpConfig.js"
import type { ToolDef, ToolOutcome, ToolServerStatus } from "../../tools/ToolExecutor.js"

/** A single server's config, decoded as the `mcpServers` section would be; fails with every problem, one per line. */
export const decodeOne = (name: string, raw: unknown): Effect.Effect<McpConfig.McpServer, string> =>
  Either.match(McpConfig.decode({ [name]: raw }, "server"), {
    onLeft: (error) => Effect.fail(error.issues.map((i) => `${i.path}: ${i.message}`).join("; ")),
    onRight: (servers) => Effect.succeed(servers[name]!)
  })

/** A tool Corral would offer: its name as offered, its name on the server, its effect and why. */
export interface Offered {
  readonly name: string
  readonly remote: string | undefined
  readonly effect: "read" | "write"
  readonly why: string
  readonly description: string
}

/** A tool the server lists that Corral would not offer, and why. */
export interface Refused {
  readonly tool: string
  readonly reason: string
}

/** Everything `inspect` found. */
export interface Report {
  readonly server: {
    readonly name: string
    readonly transport: "stdio" | "http"
    readonly target: string
    readonly state: string
    /** Why it is down, or why listing it failed. */
    readonly error: string | undefined
    readonly info: { readonly name: string; readonly version: string } | undefined
    readonly instructions: string | undefined
    readonly capabilities: ReadonlyArray<string>
  }
  readonly tools: ReadonlyArray<Tool>
  readonly resources: Description["resources"]
  readonly templates: Description["templates"]
  readonly prompts: Description["prompts"]
  readonly offered: ReadonlyArray<Offered>
  readonly refused: ReadonlyArray<Refused>
}

const whyEffect = (config: McpConfig.McpServer, tool: Tool | undefined, remote: string): string => {
  const override = config.effects?.[remote]
  if (override !== undefined) return `set by the config's effects`
  if (tool?.annotations?.readOnlyHint === true) return "the server marks it read-only (readOnlyHint)"
  return "not marked read-only by the server: every call waits for a person's approval"
}

/** Builds the report of server `name` from its status, its description (when it answered) and the registry's tools. */
export const build = (
  name: string,
  config: McpConfig.McpServer,
  status: ToolServerStatus,
  described: Option.Option<Either.Either<Description, string>>,
  tools: ReadonlyArray<ToolDef>
): Report => {
  const description = Option.flatMap(described, Either.getRight)
  const listingError = Option.flatMap(described, Either.getLeft)
  const d = Option.getOrUndefined(description)
  const listed = d?.tools ?? []
  const mine = tools.filter((t) => t.source === `mcp:${name}`)
  const offeredNames = new Set(mine.map((t) => t.name))
  const offered: Array<Offered> = mine.map((def) => {
    const tool = listed.find((t) => McpConfig.toolName(config, t.name) === def.name)
    const remote = tool?.name
    return {
      name: def.name,
      remote,
      effect: def.effect,
      why: def.unavailable ?? whyEffect(config, tool, remote ?? def.name),
      description: def.description
    }
  })
  const core = tools.find((t) => t.source === "core" && t.name === "read_resource")
  if (core !== undefined && d?.capabilities["resources"] !== undefined) {
    offered.push({
      name: core.name,
      remote: undefined,
      effect: "read",
      why: "Corral's core tool: reads this server's resources (resource links in tool results) for agents " +
        "allowed one of its tools",
      description: core.description
    })
  }
  const excluded = new Set(config.exclude ?? [])
  const seen = new Set<string>()
  const refused: Array<Refused> = []
  for (const tool of listed) {
    const advertised = McpConfig.toolName(config, tool.name)
    const twice = seen.has(tool.name)
    seen.add(tool.name)
    if (excluded.has(tool.name)) refused.push({ tool: tool.name, reason: "excluded by the config (exclude)" })
    else if (twice) refused.push({ tool: tool.name, reason: "listed twice by the server" })
    else if (advertised === "read_resource") {
      refused.push({
        tool: tool.name,
        reason: "its name is that of Corral's core tool read_resource: give the server a prefix"
      })
    } else if (!offeredNames.has(advertised)) {
      const owner = tools.find((t) => t.name === advertised)
      refused.push({
        tool: tool.name,
        reason: owner === undefined
          ? "not offered"
          : `the name "${advertised}" is taken by ${owner.source}: give one of the servers a prefix`
      })
    }
  }
  return {
    server: {
      name,
      transport: McpConfig.isStdio(config) ? "stdio" : "http",
      target: McpConfig.isStdio(config) ? [config.command, ...(config.args ?? [])].join(" ") : config.url,
      state: status.state,
      error: status.state === "up" ? Option.getOrUndefined(listingError) : status.lastError,
      info: d === undefined ? undefined : { name: d.name, version: d.version },
      instructions: d?.instructions,
      capabilities: d === undefined ? [] : Object.keys(d.capabilities).sort()
    },
    tools: listed,
    resources: d?.resources ?? [],
    templates: d?.templates ?? [],
    prompts: d?.prompts ?? [],
    offered: offered.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    refused
  }
}

const oneLine = (text: string | undefined, max = 100): string => {
  const flat = (text ?? "").replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

const section = (
  title: string,
  rows: ReadonlyArray<string>
): ReadonlyArray<string> => ["", `${title} (${rows.length})`, ...(rows.length === 0 ? ["  (none)"] : rows)]

/** The report as text for a terminal, with the result of `--call` when one was made. */
export const text = (
  report: Report,
  call?: { readonly tool: string; readonly outcome: ToolOutcome }
): string => {
  const s = report.server
  const head = [
    `server     ${s.name} (${s.transport}: ${s.target})`,
    `state      ${s.state}${s.error === undefined ? "" : `: ${s.error}`}`,
    ...(s.info === undefined ? [] : [`serves     ${s.info.name} ${s.info.version}`]),
    ...(s.capabilities.length === 0 ? [] : [`offers     ${s.capabilities.join(", ")}`]),
    ...(s.instructions === undefined ? [] : [`instructs  ${oneLine(s.instructions)}`])
  ]
  const width = Math.max(8, ...report.offered.map((o) => o.name.length))
  const lines = [
    ...head,
    ...section("tools listed", report.tools.map((t) => `  ${t.name}  ${oneLine(t.description ?? t.title)}`)),
    ...section(
      "resources",
      report.resources.map((r) => `  ${r.uri}  ${r.name}${r.mimeType ? ` (${r.mimeType})` : ""}`)
    ),
    ...section("resource templates", report.templates.map((t) => `  ${t.uriTemplate}  ${t.name}`)),
    ...section(
      "prompts",
      report.prompts.map((p) =>
        `  ${p.name}(${(p.arguments ?? []).map((a) => `${a.name}${a.required === true ? "" : "?"}`).join(", ")})  ${
          oneLine(p.description)
        }`
      )
    ),
    ...section(
      "Corral would offer an agent",
      report.offered.map((o) =>
        `  ${o.name.padEnd(width)}  ${o.effect.padEnd(5)}  ${o.why}${
          o.remote !== undefined && o.remote !== o.name ? ` [server's name: ${o.remote}]` : ""
        }`
      )
    ),
    ...section("refused", report.refused.map((r) => `  ${r.tool}: ${r.reason}`))
  ]
  if (call !== undefined) {
    lines.push(
      "",
      `call ${call.tool}: ${call.outcome.isError ? `error (${call.outcome.failure ?? "tool_error"})` : "ok"}`
    )
    lines.push(call.outcome.content)
  }
  return lines.join("\n")
}
