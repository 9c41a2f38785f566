/**
 * The `ToolExecutor` port. `call` never fails: unknown tools, invalid JSON, schema-invalid arguments, tool errors,
 * timeouts and cancellation all come back as error-flagged outcomes whose text tells the model what to do next.
 *
 * `list` returns every KNOWN tool, including those of a tool server that is down right now (marked `unavailable`
 * with the reason): an agent naming them can still be published, and a burst leaves them out and says why.
 */
import { Context } from "effect"
import type { Effect } from "effect"
import type { JsonSchema } from "../domain/AgentSpec.js"
import type { SampleRefused } from "../domain/Errors.js"
import type { Attachment } from "../domain/Message.js"
import type { Principal } from "../domain/Principal.js"
import type { ToolFailure as TrajectoryFailure } from "../domain/Trajectory.js"

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
  /**
   * Set when the tool cannot be called now (its MCP server is down or has not started): why, for the operator and
   * the trajectory. Such a tool is known (publishing an agent naming it is accepted) but never offered to a model.
   */
  readonly unavailable?: string
}

/** Where a tool server stands: starting (its first connection attempt), up, or down (being retried). */
export type ToolServerState = "starting" | "up" | "down"

/** One configured tool server (an MCP server), as operators see it. */
export interface ToolServerStatus {
  readonly name: string
  readonly transport: "stdio" | "http"
  readonly state: ToolServerState
  /** When it entered `state` (epoch ms). */
  readonly since: number
  /** Why it was last lost or could not be (re)started; kept once it is back, for the record. */
  readonly lastError: string | undefined
  /** Failed (re)start attempts since it was last up. */
  readonly failures: number
  /** How many of the known tools are its. */
  readonly tools: number
}

/** Who is calling, for which session. Tools may scope what they read by the principal. */
export interface ToolContext {
  readonly sessionId: string
  readonly principal: Principal
  readonly scope: string
  readonly runId: string
  readonly callId: string
  /**
   * The burst's effective `toolTimeoutMs` (host limits ∩ the agent's): the executor bounds the call by it (and by
   * the tool's own, tighter timeout). Absent: the `Limits` in context.
   */
  readonly timeoutMs?: number
  /**
   * The agent's tool allowlist, when the caller has one (a burst): tools that act on behalf of several servers (the
   * core `read_resource`) reach only the servers of allowlisted tools. Absent: no such restriction.
   */
  readonly allowlist?: ReadonlyArray<string>
  /**
   * Asks the session's own model for a completion on behalf of the tool server running this call (MCP sampling),
   * through the session's model-call gate, counters, token budget and provider chain: a sample is a model call of
   * the session. Fails with `SampleRefused` (a ceiling or budget reached: no model call is made; the chain failed).
   * Absent: no model serves samples here (outside a burst), and a server's request is refused.
   */
  readonly sample?: Sampler
}

/** One message of a sample's conversation: text only. */
export interface SampleMessage {
  readonly role: "user" | "assistant"
  readonly text: string
}

/** What a tool server asks the model (MCP `sampling/createMessage`, mapped to what Corral samples). */
export interface SampleRequest {
  /** The server that asks, for the trajectory and the messages. */
  readonly server: string
  /** The server's system prompt for this completion; absent: none. */
  readonly system?: string
  readonly messages: ReadonlyArray<SampleMessage>
  /** The server's cap on the completion's length, in tokens. */
  readonly maxTokens: number
  readonly stopSequences?: ReadonlyArray<string>
}

/** The completion: its text, the model that wrote it, and why it stopped (MCP's `stopReason` values). */
export interface SampleReply {
  readonly text: string
  readonly model: string
  /** `endTurn`, `maxTokens`, `stopSequence`, or the provider's finish reason when it is none of those. */
  readonly stopReason: string
}

/** Serves a sample for the tool call in flight (see `ToolContext.sample`). */
export type Sampler = (request: SampleRequest) => Effect.Effect<SampleReply, SampleRefused>

/** An MCP prompt an agent takes its instructions from (`mcpPrompt` in its spec): server, prompt name, arguments. */
export interface PromptRef {
  readonly server: string
  readonly name: string
  readonly arguments: Readonly<Record<string, string>>
}

/** Why a call failed (`domain/Trajectory`): three kinds are strikes of bad tool use, the others the tool's trouble. */
export type ToolFailure = TrajectoryFailure

/** What a call produced. `content` is the text the model will see (before truncation). */
export interface ToolOutcome {
  readonly content: string
  readonly isError: boolean
  readonly failure?: ToolFailure
  /** Images and audio the tool returned (base64), also described in `content`; absent: none. */
  readonly attachments?: ReadonlyArray<Attachment>
}

/** The decoded size of base64 `data`, without decoding it. */
const base64Bytes = (data: string): number => {
  const trimmed = data.replace(/\s/g, "")
  const padding = trimmed.endsWith("==") ? 2 : trimmed.endsWith("=") ? 1 : 0
  return Math.max(0, Math.floor((trimmed.length * 3) / 4) - padding)
}

/**
 * The result-size rail for binary parts: the attachments kept, in order, while their decoded bytes fit `maxBytes`
 * (the cap of one tool result, `Limits.toolResultMaxBytes`), and a notice for the model naming what was left out —
 * a cut image is worthless, so an attachment is kept whole or not at all. Its description stays in the text either way.
 */
export const capAttachments = (
  attachments: ReadonlyArray<Attachment> | undefined,
  maxBytes: number
): { readonly kept: ReadonlyArray<Attachment>; readonly notice: string | undefined } => {
  if (attachments === undefined || attachments.length === 0) return { kept: [], notice: undefined }
  const kept: Array<Attachment> = []
  let used = 0
  let droppedBytes = 0
  for (const attachment of attachments) {
    const bytes = base64Bytes(attachment.data)
    if (used + bytes <= maxBytes) {
      kept.push(attachment)
      used += bytes
    } else droppedBytes += bytes
  }
  const dropped = attachments.length - kept.length
  return {
    kept,
    notice: dropped === 0 ?
      undefined :
      `[${dropped} attachment(s), ${droppedBytes} bytes, not shown to you: over the ` +
      `${maxBytes}-byte cap of one tool result; ask the tool for a smaller one]`
  }
}

/** The tool port: list what is callable, call by name with the model's raw argument text. */
export class ToolExecutor extends Context.Tag("corral/tools/ToolExecutor")<ToolExecutor, {
  /** Every callable tool, sorted by name. */
  readonly list: (ctx: Omit<ToolContext, "callId">) => Effect.Effect<ReadonlyArray<ToolDef>>
  /** Runs one call. Never fails; interruption of the caller interrupts the tool. */
  readonly call: (name: string, argumentsJson: string, ctx: ToolContext) => Effect.Effect<ToolOutcome>
  /** The tool servers behind this executor and their state, sorted by name; absent = none (in-process tools only). */
  readonly servers?: Effect.Effect<ReadonlyArray<ToolServerStatus>>
  /**
   * The text of an MCP prompt (the agent's `mcpPrompt`), bounded like a tool call; fails with a message naming the
   * server and the prompt (unknown server, server down, no such prompt, arguments refused). Absent: no prompts here.
   */
  readonly prompt?: (ref: PromptRef, ctx: Omit<ToolContext, "callId">) => Effect.Effect<string, string>
}>() {}
