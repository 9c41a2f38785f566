import { Effect, ManagedRuntime } from "effect"
import { Corral, Principal, ToolRegistry, Usage } from "../../src/index.js"
import * as Scripted from "../../src/model/Scripted.js"
const usage = new Usage({ inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0 })
const p = new Principal({ orgId: "b", userId: "b" })
const model = Scripted.fromFunction({ reply: (req) => {
  const r = req.messages.filter((m) => m.kind === "tool_results").length
  return r < 10 ? { text: "", toolCalls: [{id: `c${r}a`, name: "echo", arguments: `{"q":"${r}a"}`},{id: `c${r}b`, name: "echo", arguments: `{"q":"${r}b"}`}], finishReason: "tool_calls", usage, model: "m" }
   : { text: "done", toolCalls: [], finishReason: "stop", usage, model: "m" } } })
const echo = ToolRegistry.define<{q: string}>({ name: "echo", description: "e", parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] }, run: (a) => Effect.succeed(a.q.padEnd(1024, "x")) })
const rt = ManagedRuntime.make(Corral.layerMemory({ providers: [model], tools: [echo] }))
const c = await rt.runPromise(Corral)
await rt.runPromise(c.publishAgent(p, { id: "b", version: 1, name: "B", instructions: "x", tools: ["echo"], finalize: "transcript" }))
for (let round = 0; round < 30; round++) {
  const cpu0 = process.cpuUsage(); const t0 = performance.now()
  for (let i = 0; i < 100; i++) await rt.runPromise(c.run(p, { agentId: "b", scope: "s", prompt: "session:" + i }))
  const dt = performance.now() - t0; const cpu = process.cpuUsage(cpu0)
  console.log(`wall ${(dt/100).toFixed(2)} ms/session cpu ${((cpu.user+cpu.system)/1000/100).toFixed(2)} ms/session`)
}
process.exit(0)
