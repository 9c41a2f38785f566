/**
 * The demo's tools: canned observability reads and one write. Deterministic, offline.
 */
import { Effect } from "effect"
import * as ToolRegistry from "../tools/ToolRegistry.js"

const service = {
  type: "object",
  properties: { service: { type: "string", description: "Service name, e.g. checkout" } },
  required: ["service"],
  additionalProperties: false
}

/** Recent log lines of a service: long on purpose, so the truncation rail has work to do. */
export const logs = ToolRegistry.define<{ service: string }>({
  name: "logs",
  description: "Recent log lines of a service.",
  parameters: service,
  run: ({ service: name }) =>
    Effect.succeed(
      [
        `${name} 08:59:58 INFO  serving`,
        ...Array.from({ length: 4000 }, (_, i) =>
          `${name} 09:0${i % 10}:${String(i % 60).padStart(2, "0")} WARN  slow query (${200 + (i % 50)} ms)`),
        `${name} 09:12:41 ERROR pool exhausted: 50/50 connections busy`
      ].join("\n")
    )
})

/** A service's health: the same answer every time (the repeat guard's favourite). */
export const status = ToolRegistry.define<{ service: string }>({
  name: "status",
  description: "Health of a service.",
  parameters: service,
  run: ({ service: name }) => Effect.succeed(`${name}: healthy=false error_rate=12.5% p99=2400ms`)
})

/** Restarts a service. A write: it never runs without a person's approval. */
export const restart = ToolRegistry.define<{ service: string }>({
  name: "restart",
  description: "Restarts a service (requires approval).",
  effect: "write",
  parameters: service,
  run: ({ service: name }) => Effect.succeed(`${name} restarted at 09:14:03; health check passing`)
})

/** All demo tools. */
export const all = [logs, status, restart]
