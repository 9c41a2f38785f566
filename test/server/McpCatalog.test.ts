/**
 * The MCP catalog's bound, under the TestClock: a `run_<agent>` call waits at most the agent's active-time ceiling
 * plus the margin, then answers that the session is still running (and where to follow it) instead of hanging; the
 * session goes on.
 */
import { expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, TestClock } from "effect"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as DemoAgent from "../../src/server/DemoAgent.js"
import * as Catalog from "../../src/server/mcp/Catalog.js"
import type * as Runs from "../../src/server/mcp/Runs.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

// A demo model that thinks for a minute per reply: no burst lands within the call's bound.
const runtime = Corral.layer().pipe(
  Layer.provideMerge(Layer.mergeAll(
    LiveEvents.layer,
    ToolRegistry.layer(DemoAgent.tools),
    Layer.succeed(Providers, Providers.fromRoutes({ demo: [DemoAgent.provider(60_000)] }))
  )),
  Layer.provideMerge(MemoryStore.layerMemory)
)

const by = new Principal({ orgId: "acme", userId: "alice" })

const silent: Runs.Host = { progress: () => Effect.void, log: () => Effect.void }

it.scoped("a run waits at most the active-time ceiling plus the margin, then says the session goes on", () =>
  Effect.gen(function*() {
    const corral = yield* Corral
    yield* corral.publishAgent(by, DemoAgent.spec)
    const catalog = yield* Catalog.make({ activeTimeMs: 5_000, marginMs: 1_000 })
    const call = yield* Effect.fork(
      catalog.callTool(by, "run_demo", { scope: "incident:B-1", prompt: "Why is checkout failing?" }, silent)
    )
    yield* TestClock.adjust("5999 millis")
    expect(call.unsafePoll()).toBeNull()
    yield* TestClock.adjust("2 millis")
    const result = yield* Fiber.join(call)
    expect(result.isError).toBe(false)
    expect(result.structuredContent).toMatchObject({ status: "running", landed: false })
    expect(result.content[0]).toMatchObject({
      type: "text",
      text: expect.stringMatching(
        /still running: this call waited 6000 ms \(its bound\) and returns now; the session goes on/
      )
    })
  }).pipe(Effect.provide(runtime)))
