/**
 * ToolNotices — where a running tool's progress and its server's log messages go: the session's live stream.
 *
 * A port, so that `tools/` never reaches into `events/` (the dependency points the other way): the runtime's
 * wiring connects it to `SessionEvents`, and without it notices are simply dropped. A notice is live-only, never
 * persisted: it says how a call is going, not what it produced (the result is the transcript's business).
 */
import { Context } from "effect"
import type { Effect } from "effect"

/** A call's progress (an MCP `notifications/progress` for its request). */
export interface ProgressNotice {
  readonly _tag: "progress"
  readonly sessionId: string
  readonly callId: string
  /** The tool called. */
  readonly name: string
  readonly progress: number
  readonly total: number | undefined
  readonly message: string | undefined
}

/** A log message (MCP `notifications/message`) its server sent while the call ran. */
export interface LogNotice {
  readonly _tag: "log"
  readonly sessionId: string
  readonly callId: string
  readonly name: string
  /** The MCP log level: debug, info, notice, warning, error, critical, alert, emergency. */
  readonly level: string
  readonly message: string
}

/** A notice of a running call. */
export type ToolNotice = ProgressNotice | LogNotice

/** The sink of tool notices. `notify` never fails and must not block the call. */
export class ToolNotices extends Context.Tag("corral/tools/ToolNotices")<ToolNotices, {
  readonly notify: (notice: ToolNotice) => Effect.Effect<void>
}>() {}
