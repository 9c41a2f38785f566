import { Effect } from "effect"
import * as McpRegistry from "./src/tools/McpRegistry.js"
const ctx = { sessionId: "s", principal: { orgId: "o", userId: "u" } as never, scope: "x", runId: "r", callId: "c" }
const t0 = Date.now()
const prog = Effect.scoped(Effect.gen(function*() {
  const reg = yield* McpRegistry.make({
    fx: { command: "node", args: ["--import", "tsx", "test/support/mcp-fixture.ts", "--junk"], timeoutMs: 20000 },
  })
  console.log("started", Date.now() - t0)
  let t = Date.now()
  const ok = yield* reg.call("big_output", `{"bytes":1048576}`, ctx)
  console.log("1MiB", ok.content.length, ok.isError, Date.now() - t)
  t = Date.now()
  const big = yield* reg.call("big_output", `{"bytes":11534336}`, ctx)
  console.log(big, Date.now() - t)
  t = Date.now()
  console.log(yield* reg.call("echo", `{"message":"after big"}`, ctx), Date.now() - t)
  console.log(yield* reg.call("read_notes", `{}`, ctx), Date.now() - t)
})).pipe(Effect.tapErrorCause(Effect.logError))
await Effect.runPromise(prog).catch((e) => console.error("ERR", e))
console.log("closed", Date.now() - t0)
