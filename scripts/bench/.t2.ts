import { Effect, Layer, ManagedRuntime } from "effect"
import { Corral, Principal, ToolRegistry, Usage } from "../../src/index.js"
import * as Scripted from "../../src/model/Scripted.js"
const usage = new Usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 })
const p = new Principal({ orgId: "b", userId: "b" })
const T = Number(process.env.TT ?? 10)
const model = Scripted.fromFunction({ reply: (req) => {
  const r = req.messages.filter((m) => m.kind === "tool_results").length
  return r < T ? { text: "", toolCalls: [{id: `c${r}a`, name: "echo", arguments: `{"q":"${r}a"}`},{id: `c${r}b`, name: "echo", arguments: `{"q":"${r}b"}`}], finishReason: "tool_calls", usage, model: "m" }
   : { text: "done", toolCalls: [], finishReason: "stop", usage, model: "m" } } })
const echo = ToolRegistry.define<{q: string}>({ name: "echo", description: "e", parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] }, run: (a) => Effect.succeed(a.q.padEnd(1024, "x")) })
const idle = process.env.IDLE ?? "5 minutes"
const layer = Layer.merge(Corral.layerMemory({ providers: [model], tools: [echo], idleTimeout: idle as "5 minutes" }), process.env.TRACER === "off" ? Layer.setTracerEnabled(false) : Layer.empty)
const rt = ManagedRuntime.make(layer)
const c = await rt.runPromise(Corral)
await rt.runPromise(c.publishAgent(p, { id: "b", version: 1, name: "B", instructions: "x", tools: ["echo"], finalize: "transcript" }))
const N = Number(process.env.N ?? 100)
for (let round = 0; round < Number(process.env.R ?? 10); round++) {
  const cpu0 = process.cpuUsage(); const t0 = performance.now()
  for (let i = 0; i < N; i++) await rt.runPromise(c.run(p, { agentId: "b", scope: "s", prompt: "session:" + i }))
  const dt = performance.now() - t0; const cpu = process.cpuUsage(cpu0);
  (globalThis as {gc?: () => void}).gc?.(); console.log(`wall ${(dt/N).toFixed(2)} ms/session cpu ${((cpu.user+cpu.system)/1000/N).toFixed(2)} heap ${(process.memoryUsage().heapUsed/1e6).toFixed(0)}MB`)
}
process.exit(0)
