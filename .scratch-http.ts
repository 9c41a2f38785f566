import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as McpRegistry from "./src/tools/McpRegistry.js"
const ctx = { sessionId: "s", principal: { orgId: "o", userId: "u" } as never, scope: "x", runId: "r", callId: "c" }
const PORT = "39217"
const startServer = () => new Promise<ReturnType<typeof spawn>>((resolve) => {
  const child = spawn("node", ["node_modules/@modelcontextprotocol/server-everything/dist/index.js", "streamableHttp"], { env: { ...process.env, PORT }, stdio: ["ignore", "ignore", "pipe"] })
  child.stderr!.on("data", (d: Buffer) => { if (d.toString().includes("listening on port")) resolve(child) })
})
const t0 = Date.now()
let server = await startServer()
console.log("server up", Date.now() - t0)
const prog = Effect.scoped(Effect.gen(function*() {
  const reg = yield* McpRegistry.make({ ev: { url: `http://127.0.0.1:${PORT}/mcp`, exclude: ["get-env"], timeoutMs: 3000 } })
  console.log("started", Date.now() - t0, reg.tools.length)
  console.log(yield* reg.call("echo", `{"message":"hi"}`, ctx))
  console.log(yield* reg.call("trigger-long-running-operation", `{"duration":0.3,"steps":3}`, ctx))
  yield* Effect.promise(async () => { const exited = new Promise((r) => server.once("exit", r)); server.kill("SIGKILL"); await exited; server = await startServer() })
  let t = Date.now()
  console.log("after restart", yield* reg.call("echo", `{"message":"again"}`, ctx), Date.now() - t)
  // kill mid-call
  t = Date.now()
  const fiber = yield* Effect.fork(reg.call("trigger-long-running-operation", `{"duration":10,"steps":10}`, ctx))
  yield* Effect.sleep("300 millis")
  server.kill("SIGKILL")
  console.log("killed mid-call", yield* fiber.await, Date.now() - t)
  t = Date.now()
  console.log("down", yield* reg.call("echo", `{"message":"down"}`, ctx), Date.now() - t)
  t = Date.now()
  console.log("down2", yield* reg.call("echo", `{"message":"down"}`, ctx), Date.now() - t)
  server = yield* Effect.promise(startServer)
  yield* Effect.sleep("1 second")
  t = Date.now()
  console.log("back", yield* reg.call("echo", `{"message":"back"}`, ctx), Date.now() - t)
}))
await Effect.runPromise(prog).catch((e) => console.error("ERR", e))
console.log("closed", Date.now() - t0)
server.kill()
