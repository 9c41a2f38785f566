/**
 * Logs — Corral's log lines through Effect's `Logger`: one JSON object per line when stdout is not a terminal (a
 * collector or `journald` reads it), the pretty format on a terminal, or either by `CORRAL_LOG_FORMAT`.
 *
 * Every line carries the fiber's log annotations — a burst adds `session_id` and `run_id` (`GenAi.invokeAgent`,
 * `GenAi.runStarted`) — and, when it was written inside a span, that span's `trace_id` and `span_id`, so a log line
 * leads to its trace. Nothing here reads a secret: what is logged is what callers log, and configuration keeps
 * keys `Redacted` (a test greps a whole run's output for the provider key).
 */
import { Cause, FiberRef, HashMap, HashSet, Inspectable, Layer, Logger, Option } from "effect"
import type { LogFormat } from "./Settings.js"
import * as Spans from "./Spans.js"

const text = (message: unknown): string => {
  if (Array.isArray(message)) return message.map(text).join(" ")
  return typeof message === "string" ? message : Inspectable.toStringUnknown(message)
}

/** One JSON object per log line: time, level, message, annotations, trace and span ids, cause. */
export const jsonLogger: Logger.Logger<unknown, string> = Logger.make(
  ({ annotations, cause, context, date, logLevel, message }) => {
    const record: Record<string, unknown> = {
      time: date.toISOString(),
      level: logLevel.label,
      message: text(message)
    }
    for (const [key, value] of HashMap.toEntries(annotations)) record[key] = value
    // The fiber's leaf span (a tool call) when it is in one, else the span of its context.
    const span = Spans.currentOf(context)
    if (Option.isSome(span)) {
      record.trace_id = span.value.traceId
      record.span_id = span.value.spanId
    }
    if (!Cause.isEmpty(cause)) record.cause = Cause.pretty(cause, { renderErrorCause: true })
    return JSON.stringify(record)
  }
)

/** Whether `format` means JSON for an output that `isTerminal` or not. */
export const isJson = (format: LogFormat, isTerminal: boolean): boolean =>
  format === "json" || (format === "auto" && !isTerminal)

/**
 * The loggers for `format` (`auto`: JSON unless `isTerminal`), replacing whatever loggers were installed (the
 * tracer logger, which turns log lines into span events, stays).
 */
export const layer = (format: LogFormat, isTerminal: boolean): Layer.Layer<never> =>
  Layer.locallyScoped(
    FiberRef.currentLoggers,
    HashSet.make<Array<Logger.Logger<unknown, unknown>>>(
      isJson(format, isTerminal) ? Logger.withConsoleLog(jsonLogger) : Logger.prettyLoggerDefault,
      Logger.tracerLogger
    )
  )
