/**
 * catalogCalls — the MCP catalog's tool calls (Catalog): `run_<agent>` starts a session of the agent and follows it
 * to its landing, `approve` decides a pending write and follows the resumed session. Every call is bounded by the
 * agent's active time (the host's ceiling at most) plus a margin for the landing; a failure of the run itself is an
 * `isError` result saying what went wrong, never a protocol error.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js"
import { Clock, Effect, Option } from "effect"
import type { Corral } from "../../../Corral.js"
import type { AgentSpec } from "../../../domain/AgentSpec.js"
import type { Principal } from "../../../domain/Principal.js"
import * as Runs from "../Runs.js"
import * as Render from "./render.js"

/** What the calls share: the service, and the bounds of a call's wait. */
export interface Calls {
  readonly corral: Corral["Type"]
  /** The host's active-time ceiling; an agent's own limit can only be tighter. */
  readonly hostActiveMs: number
  /** Added to the active time for a call's wait: the landing (report) after the burst ends. */
  readonly marginMs: number
}

/** The structured content of a call's answer (the shape `Schemas.runOutput` declares). */
const structured = (outcome: Runs.Outcome): Record<string, unknown> => {
  const view = outcome.view
  return {
    sessionId: view.id,
    resource: Render.sessionUri(view.id),
    agentId: view.agentId,
    scope: view.scope,
    status: view.status,
    landed: outcome.landed,
    ...(view.exitReason === undefined ? {} : { exitReason: view.exitReason }),
    ...(view.report === undefined || view.status === "running"
      ? {}
      : { report: view.report.data, reportSource: view.report.source }),
    pending: view.pending.map((p) => ({
      tool: p.tool,
      arguments: p.arguments,
      ...(p.token === undefined ? {} : { token: p.token }),
      ...(p.expiresAt === undefined ? {} : { expiresAt: new Date(p.expiresAt).toISOString() })
    })),
    modelCalls: view.modelCalls,
    toolCalls: view.toolCalls
  }
}

/** A session's answer: `isError` when the burst ended any way but `completed` or waiting for a decision. */
const answer = (outcome: Runs.Outcome): CallToolResult => {
  const reason = outcome.view.exitReason
  return {
    content: [
      { type: "text", text: Render.session(outcome.view, outcome.note) },
      {
        type: "resource_link",
        uri: Render.sessionUri(outcome.view.id),
        name: `session ${outcome.view.id}`,
        mimeType: "application/json"
      }
    ],
    structuredContent: structured(outcome),
    isError: outcome.landed && reason !== undefined && reason !== "completed" && reason !== "confirmation_pending"
  }
}

const failed = (message: string): CallToolResult => ({ content: [{ type: "text", text: message }], isError: true })

/** An error of the Corral service as a tool error text: the message and every field issue. */
const describe = (
  error: { readonly message: string; readonly issues?: ReadonlyArray<{ path: string; message: string }> }
) => [error.message, ...(error.issues ?? []).map((i) => `  ${i.path}: ${i.message}`)].join("\n")

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The fields of `args` that `allowed` does not name, as a tool error (hosts must send only declared fields). */
const extraFields = (args: Record<string, unknown>, allowed: ReadonlyArray<string>): string | undefined => {
  const extra = Object.keys(args).filter((k) => !allowed.includes(k))
  return extra.length === 0
    ? undefined
    : `unknown argument${extra.length > 1 ? "s" : ""}: ${extra.join(", ")} (expected ${allowed.join(", ")})`
}

const deadlineFor = (calls: Calls, spec: AgentSpec | undefined) =>
  Effect.map(
    Clock.currentTimeMillis,
    (now) => now + Math.min(calls.hostActiveMs, spec?.limits?.activeTimeMs ?? calls.hostActiveMs) + calls.marginMs
  )

/** `run_<agent>`: starts a session of the agent in the given scope and follows it to its landing. */
export const run = (calls: Calls, by: Principal, agentId: string, args: unknown, host: Runs.Host) =>
  Effect.gen(function*() {
    const { corral } = calls
    if (!isRecord(args)) return failed("the arguments must be an object with `scope` and `prompt`")
    const extra = extraFields(args, ["scope", "prompt"])
    if (extra !== undefined) return failed(extra)
    const spec = yield* corral.getAgent(by, agentId)
    const started = yield* corral.start(by, {
      agentId,
      scope: args["scope"] as string,
      prompt: args["prompt"] as string
    })
    yield* host.log("info", `session ${started.id} started (agent ${agentId} v${started.agentVersion})`)
    const outcome = yield* Runs.drive(corral, by, started.id, host, yield* deadlineFor(calls, spec))
    return answer(outcome)
  }).pipe(Effect.catchAll((error) => Effect.succeed(failed(describe(error)))))

/** `approve`: decides a pending write by its token and follows the resumed session like a run. */
export const approve = (calls: Calls, by: Principal, args: unknown, host: Runs.Host) =>
  Effect.gen(function*() {
    const { corral } = calls
    if (!isRecord(args)) return failed("the arguments must be an object with `sessionId`, `token` and `decision`")
    const extra = extraFields(args, ["sessionId", "token", "decision"])
    if (extra !== undefined) return failed(extra)
    const { decision, sessionId, token } = args
    if (typeof sessionId !== "string" || sessionId.length === 0) {
      return failed("sessionId: a session id is required")
    }
    if (typeof token !== "string" || token.length === 0) return failed("token: the approval token is required")
    if (decision !== "approve" && decision !== "reject") return failed(`decision: "approve" or "reject"`)
    const view = yield* corral.get(by, sessionId)
    const spec = yield* Effect.option(corral.getAgent(by, view.agentId, view.agentVersion))
    const deadline = yield* deadlineFor(calls, Option.getOrUndefined(spec))
    return answer(yield* Runs.decide(corral, by, sessionId, token, decision, host, deadline))
  }).pipe(Effect.catchAll((error) => Effect.succeed(failed(describe(error)))))
