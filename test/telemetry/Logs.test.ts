/**
 * Structured logs: one JSON object per line, carrying the session and run of the burst that wrote it and, with
 * tracing on, the trace and span ids of the span it was written in.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Logger } from "effect"
import * as Scripted from "../../src/model/Scripted.js"
import * as Logs from "../../src/telemetry/Logs.js"
import * as Harness from "../../src/testing/Harness.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"
import * as InMemoryTracing from "../support/InMemoryTracing.js"

/** A tool that logs a line while it runs (inside the burst). */
const noisy = ToolRegistry.define<{ q: string }>({
  name: "noisy",
  description: "Logs, then answers.",
  parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  run: (args) => Effect.as(Effect.logInfo(`looking up ${args.q}`), "found")
})

const capture = () => {
  const lines: Array<Record<string, unknown>> = []
  const logger = Logger.make<unknown, void>((options) => {
    lines.push(JSON.parse(Logs.jsonLogger.log(options)))
  })
  return { lines, layer: Logger.replace(Logger.defaultLogger, logger) }
}

describe("structured logs", () => {
  it.effect("a line written inside a burst carries its session, run, trace and span", () => {
    const tracing = InMemoryTracing.make()
    const logs = capture()
    const model = Scripted.make({ script: [Scripted.toolCalls([{ name: "noisy", arguments: { q: "db" } }])] })
    return Effect.gen(function*() {
      const landed = yield* Harness.drive(Harness.runBurst({ spec: Harness.agent({ tools: ["noisy"] }) })).pipe(
        Effect.provide(Harness.layer({ providers: [model], tools: [noisy] }))
      )
      const line = logs.lines.find((l) => l.message === "looking up db")
      expect(line).toMatchObject({
        level: "INFO",
        session_id: landed.session.id,
        run_id: landed.trajectory.runId,
        trace_id: expect.stringMatching(/^[0-9a-f]{32}$/),
        span_id: expect.stringMatching(/^[0-9a-f]{16}$/)
      })
      const tool = tracing.exporter.getFinishedSpans().find((s) => s.name === "execute_tool noisy")!
      expect(line!.span_id).toBe(tool.spanContext().spanId)
      expect(line!.trace_id).toBe(tool.spanContext().traceId)
      expect(typeof line!.time).toBe("string")
    }).pipe(Effect.provide(tracing.layer), Effect.provide(logs.layer))
  })

  it.effect("without tracing the line still names its session and run, and no trace", () => {
    const logs = capture()
    const model = Scripted.make({ script: [Scripted.toolCalls([{ name: "noisy", arguments: { q: "cache" } }])] })
    return Effect.gen(function*() {
      const landed = yield* Harness.drive(Harness.runBurst({ spec: Harness.agent({ tools: ["noisy"] }) })).pipe(
        Effect.provide(Harness.layer({ providers: [model], tools: [noisy] }))
      )
      const line = logs.lines.find((l) => l.message === "looking up cache")!
      expect(line.session_id).toBe(landed.session.id)
      expect(line.run_id).toBe(landed.trajectory.runId)
      expect(line.trace_id).toBeUndefined()
    }).pipe(Effect.provide(logs.layer))
  })

  it("JSON unless stdout is a terminal, or as CORRAL_LOG_FORMAT says", () => {
    expect(Logs.isJson("auto", false)).toBe(true)
    expect(Logs.isJson("auto", true)).toBe(false)
    expect(Logs.isJson("json", true)).toBe(true)
    expect(Logs.isJson("pretty", false)).toBe(false)
  })
})
