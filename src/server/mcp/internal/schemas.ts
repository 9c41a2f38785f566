/**
 * The JSON Schemas of the MCP tools: the input of `run_<agent>` and `approve`, and the structured output both
 * answer (the session, its exit reason, its report, its pending writes).
 */
import type { JsonSchema } from "../../../domain/AgentSpec.js"
import * as ExitReason from "../../../domain/ExitReason.js"

/** An MCP tool's object schema (the SDK's `Tool.inputSchema` shape). */
export interface ObjectSchema {
  readonly [key: string]: unknown
  readonly type: "object"
  readonly properties?: Record<string, object>
  readonly required?: Array<string>
}

/** The input of `run_<agent>`: the scope the session investigates and the first prompt. */
export const runInput: ObjectSchema = {
  type: "object",
  properties: {
    scope: {
      type: "string",
      minLength: 1,
      maxLength: 200,
      description: "What the session investigates (an incident id, a ticket, a question id), e.g. incident:INC-42. " +
        "Sessions of one scope may build on each other's reports."
    },
    prompt: { type: "string", minLength: 1, maxLength: 200_000, description: "The first message to the agent." }
  },
  required: ["scope", "prompt"],
  additionalProperties: false
}

/** The input of `approve`: the session, the approval token a run answered, and the decision. */
export const approveInput: ObjectSchema = {
  type: "object",
  properties: {
    sessionId: { type: "string", minLength: 1, description: "The session that waits (sessionId of the run's answer)." },
    token: { type: "string", minLength: 1, description: "The approval token of the pending write (shown once)." },
    decision: { type: "string", enum: ["approve", "reject"], description: "Run the write as shown, or not." }
  },
  required: ["sessionId", "token", "decision"],
  additionalProperties: false
}

/**
 * The structured output of a run (and of `approve`). `report` is the landed report: valid against the agent's
 * report schema when the model wrote it, or against the default report schema when it was built from the
 * transcript (`reportSource: "fallback"`), so it is declared as any JSON value described by the agent's schema.
 */
export const runOutput = (reportSchema: JsonSchema | undefined): ObjectSchema => ({
  type: "object",
  properties: {
    sessionId: { type: "string" },
    resource: { type: "string", description: "The session's resource URI (transcript and report)." },
    agentId: { type: "string" },
    scope: { type: "string" },
    status: { type: "string", enum: ["idle", "running", "awaiting_confirmation", "interrupted"] },
    landed: { type: "boolean", description: "false: the call's bound passed before the burst landed." },
    exitReason: { type: "string", enum: [...ExitReason.all] },
    report: {
      description: reportSchema === undefined
        ? "The landed report (summary, findings, confidence, nextSteps)."
        : `The landed report; the agent's report schema: ${JSON.stringify(reportSchema)}`
    },
    reportSource: { type: "string", enum: ["model", "fallback"] },
    pending: {
      type: "array",
      description: "Writes waiting for a person's decision, exactly as they will run, with their approval tokens.",
      items: {
        type: "object",
        properties: {
          tool: { type: "string" },
          arguments: { type: "string" },
          token: { type: "string" },
          expiresAt: { type: "string" }
        },
        required: ["tool", "arguments"]
      }
    },
    modelCalls: { type: "integer" },
    toolCalls: { type: "integer" }
  },
  required: ["sessionId", "resource", "status", "landed", "pending"]
})
