/**
 * Catalog — what Corral offers an MCP host, independent of the transport (Streamable HTTP at `/mcp`, stdio with
 * `corral mcp`): each published agent of the principal's org is a tool `run_<agent>`, the `approve` tool decides a
 * pending write by its token, sessions and agents are resources (`corral://sessions/{id}`, `corral://agents/{agent}`),
 * a session resource can be watched (an update per new turn and per landing), and completion suggests session ids
 * and agent ids for those templates.
 *
 * Everything goes through the public `Corral` service with the caller's principal, so an MCP host sees exactly its
 * org, like the HTTP API; only listing sessions reads the store (as `GET /v1/sessions` does), filtered by org.
 */
import type {
  CallToolResult,
  ReadResourceResult,
  Resource,
  ResourceTemplate,
  Tool
} from "@modelcontextprotocol/sdk/types.js"
import { Effect, Schema, Stream } from "effect"
import { Corral } from "../../Corral.js"
import type { AgentSpec } from "../../domain/AgentSpec.js"
import type { PersistenceFailed, SessionNotFound } from "../../domain/Errors.js"
import type { Principal } from "../../domain/Principal.js"
import type { SessionView } from "../../domain/Session.js"
import * as Limits from "../../rails/Limits.js"
import { SessionStore } from "../../store/SessionStore.js"
import * as CatalogCalls from "./internal/catalogCalls.js"
import * as Render from "./internal/render.js"
import * as Schemas from "./internal/schemas.js"
import type * as Runs from "./Runs.js"

/** A tool name nobody offers here (a JSON-RPC "invalid params" error for the host). */
export class UnknownTool extends Schema.TaggedError<UnknownTool>()("UnknownTool", { name: Schema.String }) {
  override get message(): string {
    return `Unknown tool: ${this.name} (tools/list names the tools this server offers)`
  }
}

/** A resource URI nobody serves here, or a session / agent the caller cannot see (JSON-RPC -32002). */
export class ResourceNotFound extends Schema.TaggedError<ResourceNotFound>()("ResourceNotFound", {
  uri: Schema.String
}) {
  override get message(): string {
    return `Resource not found: ${this.uri}`
  }
}

/** Bounds of the calls (see `Runs`). */
export interface Options {
  /** The host's active-time ceiling (`limits.activeTimeMs`); an agent's own limit can only be tighter. */
  readonly activeTimeMs?: number
  /** Added to the active-time ceiling for a call's wait: the landing (report) after the burst ends. */
  readonly marginMs?: number
}

/** The default margin: the landing's two bounded store writes and its report call fit well within a minute. */
export const defaultMarginMs = 60_000

/** The template of session resources. */
export const sessionTemplate = "corral://sessions/{id}"
/** The template of agent resources. */
export const agentTemplate = "corral://agents/{agent}"

/** What the catalog offers; every method is scoped to `by`'s org. */
export interface Service {
  readonly listTools: (by: Principal) => Effect.Effect<ReadonlyArray<Tool>, PersistenceFailed>
  /** Runs a tool; a failure of the run itself is an `isError` result, an unknown name `UnknownTool`. */
  readonly callTool: (
    by: Principal,
    name: string,
    args: unknown,
    host: Runs.Host
  ) => Effect.Effect<CallToolResult, UnknownTool>
  readonly listResources: (
    by: Principal,
    cursor?: string
  ) => Effect.Effect<{ readonly resources: ReadonlyArray<Resource>; readonly nextCursor?: string }, PersistenceFailed>
  readonly templates: ReadonlyArray<ResourceTemplate>
  readonly readResource: (
    by: Principal,
    uri: string
  ) => Effect.Effect<ReadResourceResult, ResourceNotFound | PersistenceFailed>
  /**
   * The updates of a subscribable resource (a session: one per new turn and per landing), from now on; fails with
   * `ResourceNotFound` for a URI that is not a session the caller can see.
   */
  readonly watch: (
    by: Principal,
    uri: string
  ) => Effect.Effect<Stream.Stream<void, PersistenceFailed | SessionNotFound>, ResourceNotFound | PersistenceFailed>
  /** Completion values for an argument of a resource template (`id` of sessions, `agent` of agents). */
  readonly complete: (
    by: Principal,
    ref: { readonly type: string; readonly uri?: string; readonly name?: string },
    argument: string,
    value: string
  ) => Effect.Effect<ReadonlyArray<string>, PersistenceFailed>
}

const RUN_PREFIX = "run_"

const json = (value: unknown): string => JSON.stringify(value, null, 2)

const toolOf = (spec: AgentSpec): Tool => ({
  name: `${RUN_PREFIX}${spec.id}`,
  title: spec.name,
  description: `${spec.description.length > 0 ? `${spec.description}\n\n` : ""}Runs the Corral agent "${spec.name}" ` +
    `(${spec.id} v${spec.version}) as one bounded session in the given scope and returns its landed report with the ` +
    "exit reason. A write the agent wants to make waits for a person's approval (asked through elicitation when " +
    "this host supports it; otherwise the answer carries the approval token for the `approve` tool).",
  inputSchema: Schemas.runInput,
  outputSchema: Schemas.runOutput(spec.reportSchema),
  annotations: { title: spec.name, readOnlyHint: false, destructiveHint: false, openWorldHint: true }
})

const approveTool: Tool = {
  name: "approve",
  title: "Decide a pending write",
  description: "Approves or rejects a write a Corral session waits for, with the approval token a run answered, then " +
    "follows the resumed session to its landing and returns its report like a run.",
  inputSchema: Schemas.approveInput,
  outputSchema: Schemas.runOutput(undefined),
  annotations: { title: "Decide a pending write", readOnlyHint: false, destructiveHint: true, openWorldHint: true }
}

/** Parses `corral://sessions/{id}[/transcript|/report]` and `corral://agents/{agent}`. */
const parseUri = (uri: string) => {
  const session = /^corral:\/\/sessions\/([^/]+)(?:\/(transcript|report))?$/.exec(uri)
  if (session !== null) {
    return {
      _tag: "Session" as const,
      id: decodeURIComponent(session[1]!),
      part: session[2] as "transcript" | "report" | undefined
    }
  }
  const agent = /^corral:\/\/agents\/([^/]+)$/.exec(uri)
  if (agent !== null) return { _tag: "Agent" as const, id: decodeURIComponent(agent[1]!) }
  return undefined
}

/** The session as a resource: its view without tokens (they are shown once, to a call), with its report. */
const sessionDocument = (view: SessionView) => ({
  ...view,
  pending: view.pending.map(({ arguments: args, callId, tool }) => ({ callId, tool, arguments: args }))
})

/** Builds the catalog over the Corral service and the store (for listing sessions). */
export const make = (options: Options = {}): Effect.Effect<Service, never, Corral | SessionStore> =>
  Effect.gen(function*() {
    const corral = yield* Corral
    const store = yield* SessionStore
    const calls: CatalogCalls.Calls = {
      corral,
      hostActiveMs: options.activeTimeMs ?? Limits.defaults.activeTimeMs,
      marginMs: options.marginMs ?? defaultMarginMs
    }

    const listSessions = (by: Principal, limit: number, cursor?: string) =>
      store.listSessions(by.orgId, { limit, ...(cursor === undefined ? {} : { cursor }) })

    const service: Service = {
      listTools: (by) =>
        Effect.map(
          corral.listAgents(by),
          (agents) => [...agents].sort((a, b) => a.id.localeCompare(b.id)).map(toolOf).concat([approveTool])
        ),
      callTool: (by, name, args, host) => {
        if (name === approveTool.name) return CatalogCalls.approve(calls, by, args, host)
        if (!name.startsWith(RUN_PREFIX)) return Effect.fail(new UnknownTool({ name }))
        const agentId = name.slice(RUN_PREFIX.length)
        // An agent of another org (or none) is not offered, so it is unknown here, like any other name.
        return Effect.flatMap(
          Effect.either(corral.getAgent(by, agentId)),
          (found) =>
            found._tag === "Left" && found.left._tag === "AgentNotFound"
              ? Effect.fail(new UnknownTool({ name }))
              : CatalogCalls.run(calls, by, agentId, args, host)
        )
      },
      listResources: (by, cursor) =>
        Effect.gen(function*() {
          const agents = cursor === undefined ? yield* corral.listAgents(by) : []
          const page = yield* listSessions(by, 50, cursor)
          const resources: Array<Resource> = [
            ...agents.map((spec) => ({
              uri: Render.agentUri(spec.id),
              name: `agent ${spec.id}`,
              title: spec.name,
              description: `The spec of agent "${spec.name}" (v${spec.version}).`,
              mimeType: "application/json"
            })),
            ...page.sessions.map((session) => ({
              uri: Render.sessionUri(session.id),
              name: `session ${session.id}`,
              description: `Session of agent ${session.agentId} in scope ${session.scope}: ${session.state.status}` +
                (session.state.lastExitReason === undefined ? "" : ` (last exit ${session.state.lastExitReason})`),
              mimeType: "application/json"
            }))
          ]
          return { resources, ...(page.nextCursor === undefined ? {} : { nextCursor: page.nextCursor }) }
        }),
      templates: [
        {
          uriTemplate: sessionTemplate,
          name: "session",
          title: "A Corral session",
          description: "A session of your org: where it stands, its last report, and its transcript " +
            "(also readable alone at corral://sessions/{id}/transcript and …/report).",
          mimeType: "application/json"
        },
        {
          uriTemplate: agentTemplate,
          name: "agent",
          title: "A published Corral agent",
          description: "The latest published spec of an agent of your org.",
          mimeType: "application/json"
        }
      ],
      readResource: (by, uri) =>
        Effect.gen(function*() {
          const parsed = parseUri(uri)
          if (parsed === undefined) return yield* new ResourceNotFound({ uri })
          if (parsed._tag === "Agent") {
            const spec = yield* corral.getAgent(by, parsed.id)
            return { contents: [{ uri, mimeType: "application/json", text: json(spec) }] }
          }
          const view = yield* corral.get(by, parsed.id)
          const base = Render.sessionUri(view.id)
          const report = { uri: `${base}/report`, mimeType: "application/json", text: json(view.report ?? null) }
          const transcript = Effect.map(corral.turns(by, view.id), (turns) => ({
            uri: `${base}/transcript`,
            mimeType: "application/json",
            text: json(turns)
          }))
          if (parsed.part === "report") return { contents: [report] }
          if (parsed.part === "transcript") return { contents: [yield* transcript] }
          return {
            contents: [
              { uri: base, mimeType: "application/json", text: json(sessionDocument(view)) },
              yield* transcript
            ]
          }
        }).pipe(
          Effect.catchTags({
            AgentNotFound: () => Effect.fail(new ResourceNotFound({ uri })),
            SessionNotFound: () => Effect.fail(new ResourceNotFound({ uri }))
          })
        ),
      watch: (by, uri) =>
        Effect.gen(function*() {
          const parsed = parseUri(uri)
          if (parsed === undefined || parsed._tag !== "Session") return yield* new ResourceNotFound({ uri })
          const turns = yield* corral.turns(by, parsed.id)
          // From the last stored turn on: a subscriber hears of what happens next, not of the history.
          return corral.events(by, parsed.id, { fromSeq: turns.at(-1)?.seq ?? 0 }).pipe(
            Stream.filter((event) => event._tag === "turn" || event._tag === "report"),
            Stream.as(undefined)
          )
        }).pipe(Effect.catchTag("SessionNotFound", () => Effect.fail(new ResourceNotFound({ uri })))),
      complete: (by, ref, argument, value) =>
        Effect.gen(function*() {
          if (ref.type !== "ref/resource") return []
          if (ref.uri === sessionTemplate && argument === "id") {
            const page = yield* listSessions(by, 100)
            return page.sessions.map((s) => s.id as string).filter((id) => id.startsWith(value))
          }
          if (ref.uri === agentTemplate && argument === "agent") {
            return (yield* corral.listAgents(by)).map((a) => a.id as string).filter((id) => id.startsWith(value))
          }
          return []
        })
    }
    return service
  })
