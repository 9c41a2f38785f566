/**
 * Tools the loop tests share: an echo read, a lookup whose answer never changes, and a write.
 */
import { Effect } from "effect"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

const q = { type: "object", properties: { q: { type: "string" } }, required: ["q"], additionalProperties: false }

/** Echoes its argument: distinct arguments give distinct results. */
export const echo = ToolRegistry.define<{ q: string }>({
  name: "echo",
  description: "Echoes its argument back.",
  parameters: q,
  run: (args) => Effect.succeed(`echo:${args.q}`)
})

/** Always answers the same thing, whatever the question (the repeat guard's favourite). */
export const status = ToolRegistry.define<{ q: string }>({
  name: "status",
  description: "Service status.",
  parameters: q,
  run: () => Effect.succeed("all systems nominal")
})

/** Returns a large result (for truncation). */
export const logs = ToolRegistry.define<{ q: string }>({
  name: "logs",
  description: "Fetches logs.",
  parameters: q,
  run: (args) =>
    Effect.succeed(`${args.q} start\n` + "line of log output ✓ ünïcødé 日本\n".repeat(5000) + "end of logs")
})

/** A write: restarts a service. Never runs without approval. */
export const restart = ToolRegistry.define<{ service: string }>({
  name: "restart",
  description: "Restarts a service.",
  effect: "write",
  parameters: {
    type: "object",
    properties: { service: { type: "string" } },
    required: ["service"],
    additionalProperties: false
  },
  run: (args) => Effect.succeed(`restarted ${args.service}`)
})

/** A tool whose body dies (a bug in the tool, not in the loop). */
export const broken = ToolRegistry.define<{ q: string }>({
  name: "broken",
  description: "Always throws.",
  parameters: q,
  run: () => Effect.die(new Error("tool bug"))
})

/** All of the above. */
export const all = [echo, status, logs, restart, broken]
/** Their names, for an agent's allowlist. */
export const names = all.map((t) => t.name)
