/**
 * Elicitations — the port through which an MCP server's question (`elicitation/create`, asked while one of its tools
 * runs) reaches the person behind the session that called the tool, like an approval: they accept (with the values
 * asked for), decline or cancel.
 *
 * The registry (`McpRegistry`) finds the session (the one whose call is in flight on that server; when calls of
 * several sessions are, it cannot tell who is asked and declines), announces the question on the session's stream
 * (a `tool_log` notice), and bounds the wait by the call's own deadline (the burst's `toolTimeoutMs`): at the bound
 * the question is cancelled and the notice says so — a server never hangs a session on a person who is away. Without
 * an `Elicitations` service in context every question is declined at once, with a log line.
 *
 * Form values the person leaves out are filled from the requested schema's `default`s (SEP-1034) before the answer
 * is sent, whatever answered.
 */
import { Context, Effect, Layer } from "effect"

/** A question from an MCP server, for the person behind `sessionId`. */
export interface ElicitationRequest {
  readonly server: string
  readonly sessionId: string
  readonly callId: string
  /** The tool whose call the question belongs to (its name as offered). */
  readonly tool: string
  readonly message: string
  /** The JSON Schema of the values asked for (a flat object of primitives, per MCP). */
  readonly requestedSchema: Readonly<Record<string, unknown>>
  /**
   * When the answer must be in (epoch ms, `Clock`): the asking call's deadline less the server's margin. An answerer
   * that waits for a person settles by then itself (the registry cancels a question still open at that bound).
   */
  readonly answerBy: number
}

/** The person's answer. */
export type ElicitationAnswer =
  | { readonly action: "accept"; readonly content: Readonly<Record<string, unknown>> }
  | { readonly action: "decline" }
  | { readonly action: "cancel" }

/** The port: ask the person behind a session. `ask` never fails; its wait is bounded by the caller. */
export class Elicitations extends Context.Tag("corral/tools/Elicitations")<Elicitations, {
  readonly ask: (request: ElicitationRequest) => Effect.Effect<ElicitationAnswer>
}>() {}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** The `default` of every property of `schema` that has one (SEP-1034). */
export const defaultsOf = (schema: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const properties = isRecord(schema["properties"]) ? schema["properties"] : {}
  const defaults: Record<string, unknown> = {}
  for (const [name, property] of Object.entries(properties)) {
    if (isRecord(property) && "default" in property) defaults[name] = property["default"]
  }
  return defaults
}

/** An answerer that gives the same answer to every question: `accept` sends the schema's defaults. For tools and tests. */
export const layerAnswer = (action: ElicitationAnswer["action"]): Layer.Layer<Elicitations> =>
  Layer.succeed(Elicitations, {
    ask: (request) =>
      Effect.succeed(
        action === "accept" ? { action, content: defaultsOf(request.requestedSchema) } : { action }
      )
  })
