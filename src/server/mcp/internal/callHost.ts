/**
 * callHost — what a `tools/call` of one MCP connection (Protocol) offers the run it starts (`Runs.Host`): progress
 * notifications when the request carried a progress token (one per persisted turn, numbered from 1), log
 * notifications at or above the connection's level, and — when the client declared the elicitation capability — a
 * pending write put to the person, whose answer waits at most the connection's approval wait (then the write stays
 * pending, never a hang).
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js"
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js"
import { ElicitResultSchema } from "@modelcontextprotocol/sdk/types.js"
import type {
  LoggingLevel,
  ServerNotification,
  ServerRequest,
  ToolListChangedNotification
} from "@modelcontextprotocol/sdk/types.js"
import { Effect } from "effect"
import type * as Runs from "../Runs.js"

/** What a connection holds that its calls read: the level set by `logging/setLevel`, and the approval wait. */
export interface Connection {
  level: LoggingLevel
  readonly approvalWaitMs: number
}

const severity: ReadonlyArray<LoggingLevel> = [
  "debug",
  "info",
  "notice",
  "warning",
  "error",
  "critical",
  "alert",
  "emergency"
]

/** The form of an approval: one required choice, approve or reject (titled single-select, SEP-1330). */
const approvalSchema = {
  type: "object" as const,
  properties: {
    decision: {
      type: "string" as const,
      title: "Decision",
      description: "Approve runs the call exactly as shown; reject tells the agent it was not run.",
      oneOf: [
        { const: "approve", title: "Approve: run it as shown" },
        { const: "reject", title: "Reject: do not run it" }
      ]
    }
  },
  required: ["decision"]
}

/** The elicitation message of a pending write: the exact call. */
const approvalMessage = (request: Runs.ApprovalRequest): string =>
  `Corral agent "${request.agentId}" (session ${request.sessionId}) wants to run the write tool "${request.tool}" ` +
  `with these arguments:\n${request.arguments}\n\nApprove it?`

/** The person's decision on a pending write, asked through `elicitation/create`; `undecided` when no answer came. */
const decide = (
  extra: RequestHandlerExtra<ServerRequest, ServerNotification | ToolListChangedNotification>,
  approvalWaitMs: number,
  approval: Runs.ApprovalRequest
): Effect.Effect<Runs.Decision> =>
  Effect.promise(() =>
    extra.sendRequest(
      {
        method: "elicitation/create",
        // No `mode`: a form is the default, and clients of 2025-06-18 know no other field.
        params: { message: approvalMessage(approval), requestedSchema: approvalSchema }
      },
      ElicitResultSchema,
      { timeout: approvalWaitMs, signal: extra.signal }
    ).then(
      (answer): Runs.Decision =>
        answer.action === "decline"
          ? "reject"
          : answer.action === "accept" &&
              (answer.content?.["decision"] === "approve" || answer.content?.["decision"] === "reject")
          ? answer.content["decision"]
          : "undecided",
      // A timeout, a cancelled request or a client that cannot answer: the write stays pending.
      () => "undecided" as const
    )
  )

/** The host of one `tools/call` request. */
export const make = (
  server: Server,
  connection: Connection,
  progressToken: string | number | undefined,
  extra: RequestHandlerExtra<ServerRequest, ServerNotification | ToolListChangedNotification>
): Runs.Host => {
  let step = 0
  const notify = (notification: ServerNotification) =>
    Effect.promise(() => extra.sendNotification(notification).catch(() => undefined))
  // Form elicitation: declared as `form`, or as an empty object (clients of 2025-06-18, before modes existed).
  const elicitation = server.getClientCapabilities()?.elicitation
  const canElicit = elicitation !== undefined && (elicitation.form !== undefined || elicitation.url === undefined)
  return {
    progress: (message) =>
      progressToken === undefined
        ? Effect.void
        : Effect.suspend(() =>
          notify({ method: "notifications/progress", params: { progressToken, progress: ++step, message } })
        ),
    log: (at, message) =>
      severity.indexOf(at) < severity.indexOf(connection.level)
        ? Effect.void
        : notify({ method: "notifications/message", params: { level: at, logger: "corral", data: message } }),
    ...(canElicit ? { decide: (approval) => decide(extra, connection.approvalWaitMs, approval) } : {})
  }
}
