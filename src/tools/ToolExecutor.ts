/**
 * The `ToolExecutor` port. `call` never fails: unknown tools, invalid JSON, schema-invalid arguments, tool errors,
 * timeouts and cancellation all come back as error-flagged outcomes whose text tells the model what to do next.
 */
import { Context } from "effect"
import type { Effect } from "effect"
import type { JsonSchema } from "../domain/AgentSpec.js"
import type { Principal } from "../domain/Principal.js"

/** Whether a tool only reads, or changes something (a write waits for a person's approval). */
export type ToolEffect = "read" | "write"

/** A tool as advertised: name, description, JSON Schema of its arguments, effect, and where it comes from. */
export interface ToolDef {
  readonly name: string
  readonly description: string
  readonly parameters: JsonSchema
  readonly effect: ToolEffect
  /** `core`, `job`, `session`, or `mcp:<server>`. */
  readonly source: string
}

/** Who is calling, for which session. Tools may scope what they read by the principal. */
export interface ToolContext {
  readonly sessionId: string
  readonly principal: Principal
  readonly scope: string
  readonly runId: string
  readonly callId: string
}

/**
 * Why a call failed, for the rails: `unknown_tool`, `invalid_json` and `invalid_args` are strikes of bad tool use;
 * the others are the tool's own trouble.
 */
export type ToolFailure = "unknown_tool" | "invalid_json" | "invalid_args" | "tool_error" | "timeout" | "interrupted"

/** What a call produced. `content` is the text the model will see (before truncation). */
export interface ToolOutcome {
  readonly content: string
  readonly isError: boolean
  readonly failure?: ToolFailure
}

/** The tool port: list what is callable, call by name with the model's raw argument text. */
export class ToolExecutor extends Context.Tag("corral/tools/ToolExecutor")<ToolExecutor, {
  /** Every callable tool, sorted by name. */
  readonly list: (ctx: Omit<ToolContext, "callId">) => Effect.Effect<ReadonlyArray<ToolDef>>
  /** Runs one call. Never fails; interruption of the caller interrupts the tool. */
  readonly call: (name: string, argumentsJson: string, ctx: ToolContext) => Effect.Effect<ToolOutcome>
}>() {}
