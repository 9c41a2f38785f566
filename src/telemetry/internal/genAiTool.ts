/**
 * genAiTool — the GenAI instrumentation of a tool call (GenAi): one `execute_tool {tool}` span, the whole run of the
 * call's fiber, and `corral.tool_call.duration`.
 */
import { Clock, Context, Effect, FiberRef } from "effect"
import * as Metrics from "../Metrics.js"
import * as Spans from "../Spans.js"
import { wholeFiber } from "./genAiFacts.js"

/** What the tool wrapper needs of a tool (tools/ToolExecutor's `ToolDef`). */
export interface ToolView {
  readonly effect: string
  readonly source: string
}

/** What the tool wrapper reads of a tool outcome (tools/ToolExecutor's `ToolOutcome`). */
export interface OutcomeView {
  readonly content: string
  readonly isError: boolean
  readonly failure?: string
}

/**
 * Runs one tool call (MCP or in-process) inside its `execute_tool {tool}` span: the server (`corral.tool.server`,
 * the tool's source), its effect, duration, result bytes, whether the result will be truncated (over `maxBytes`),
 * `is_error` and `error.type` (the executor's failure class). Moves `corral.tool_call.duration`.
 *
 * The wrapped call must be the whole run of the fiber it runs on (session/ToolCall runs each call so): the span
 * ends with that fiber, interrupted or not, with no region of its own (`Spans.span`'s `wholeFiber`).
 */
export const executeTool = (
  call: { readonly id: string; readonly name: string; readonly arguments: string },
  def: ToolView | undefined,
  maxBytes: number
) =>
<O extends OutcomeView, R>(self: Effect.Effect<O, never, R>): Effect.Effect<O, never, R> => {
  const server = def === undefined ? "none" : def.source.startsWith("mcp:") ? def.source.slice(4) : def.source
  const measure = (outcome: O, durationMs: number): string | undefined => {
    const errorType = outcome.isError ? outcome.failure ?? "tool_error" : undefined
    Metrics.add(
      Metrics.toolDuration,
      durationMs / 1000,
      "gen_ai.tool.name",
      call.name,
      "corral.tool.server",
      server,
      "error.type",
      errorType ?? "none"
    )
    return errorType
  }
  // Tracing off: the metric alone, timed by the fiber's clock read in place (see `chat`).
  return Effect.withFiberRuntime((fiber) => {
    const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
    const startedAt = clock.unsafeCurrentTimeMillis()
    if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) {
      return Effect.map(self, (outcome) => {
        measure(outcome, clock.unsafeCurrentTimeMillis() - startedAt)
        return outcome
      })
    }
    const capture = Context.get(fiber.currentContext, Spans.CaptureContent)
    return self.pipe(
      // A map on the same fiber, in the tool's span: annotated in place (`annotateIn`), not by an effect of its own.
      Effect.map((outcome) => {
        const durationMs = clock.unsafeCurrentTimeMillis() - startedAt
        const errorType = measure(outcome, durationMs)
        Spans.annotateIn(fiber, () => {
          const bytes = utf8Bytes(outcome.content)
          const attributes: Spans.Attributes = {
            "corral.tool.duration_ms": durationMs,
            "corral.tool.result_bytes": bytes,
            "corral.tool.truncated": bytes > maxBytes,
            "corral.tool.is_error": outcome.isError,
            "error.type": errorType
          }
          if (capture) {
            attributes["gen_ai.tool.call.arguments"] = call.arguments
            attributes["gen_ai.tool.call.result"] = outcome.content
          }
          return attributes
        })
        return outcome
      }),
      Spans.spanIn(
        fiber,
        () => `execute_tool ${call.name}`,
        () => ({
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": call.name,
          "gen_ai.tool.call.id": call.id,
          "gen_ai.tool.type": server.startsWith("mcp") || def?.source.startsWith("mcp:") === true
            ? "extension"
            : "function",
          "corral.tool.server": server,
          "corral.tool.effect": def?.effect ?? "unknown"
        }),
        "internal",
        wholeFiber
      )
    )
  })
}

/**
 * The UTF-8 size of a tool result, without changing how the result itself is held. Measuring a string made by
 * concatenation (a rope) makes the engine flatten it IN PLACE: the result then keeps a flat copy for as long as the
 * transcript holds it, and the garbage collector copies it again (docs/benchmarks.md, "Notes moved from the code"). A
 * short result is measured on a throwaway string that starts with it (whatever is flattened dies young); a long one
 * is measured in place, where a copy would cost more than it saves (and what a parser produced is flat already).
 */
const utf8Bytes = (text: string): number =>
  text.length <= 4096 ? Buffer.byteLength(` ${text}`, "utf8") - 1 : Buffer.byteLength(text, "utf8")
