import { Effect } from "effect"
import * as McpRegistry from "./src/tools/McpRegistry.js"
const ctx = { sessionId: "s", principal: { orgId: "o", userId: "u" } as never, scope: "x", runId: "r", callId: "c" }
let t = Date.now()
const lap = (label: string) => { console.log(label, Date.now() - t); t = Date.now() }
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const reg = yield* McpRegistry.make({ big: { command: process.execPath, args: ["--import", "tsx", "test/support/mcp-fixture.ts", "--only", "big_output"], timeoutMs: 20000 } })
  lap("start")
  yield* reg.call("big_output", `{"bytes":1048576}`, ctx); lap("1MiB")
  yield* reg.call("big_output", `{"bytes":11534336}`, ctx); lap("11MiB")
  yield* reg.call("big_output", `{"bytes":5}`, ctx); lap("after")
})))
lap("close")
