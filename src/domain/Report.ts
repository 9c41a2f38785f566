/**
 * The landing artifact. A report always lands, whatever the exit reason: from the model when it can, or built
 * from the exit reason and the transcript when it cannot.
 */
import { Schema } from "effect"
import type { JsonSchema } from "./AgentSpec.js"
import { ExitReason } from "./ExitReason.js"

/** The report schema used when an agent declares none. */
export const defaultReportSchema: JsonSchema = {
  type: "object",
  additionalProperties: false,
  required: ["summary", "findings", "confidence", "nextSteps"],
  properties: {
    summary: { type: "string", description: "What was found, in a few sentences." },
    findings: { type: "array", items: { type: "string" }, description: "Facts established, each with its evidence." },
    confidence: { type: "string", enum: ["low", "medium", "high"] },
    nextSteps: { type: "array", items: { type: "string" }, description: "What a person should do next." }
  }
}

/** A landed report: `data` is valid against the agent's report schema (or the default one). */
export const Report = Schema.Struct({
  exitReason: ExitReason,
  source: Schema.Literal("model", "fallback"),
  data: Schema.Unknown,
  /** Why the model's report was not used, when `source` is `fallback`. */
  fallbackReason: Schema.optional(Schema.String),
  /** The author phase's richer artifact, if the host installed one and it succeeded. */
  artifact: Schema.optional(Schema.Unknown)
})
export type Report = typeof Report.Type
