/**
 * MCP sampling served by the session's own provider chain (issue 17): a real MCP server over stdio
 * (test/support/mcp-sampler.ts) asks for a completion from inside its tool; the session's scripted model answers it
 * through the same gate, counters and budget as the loop's own calls. Sampling off → the tool hears the refusal that
 * says how to allow it; on → it hears the model's text, the sample is in the trajectory and counts toward the
 * ceilings; a ceiling already reached → refused naming it, no model call; the stored session replays verified.
 *
 * Live clock where nothing waits on a timer (the server is a real child process answering in real time); TestClock
 * where a deadline decides, moved only once the sample is known to wait on the model.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, TestClock } from "effect"
import * as path from "node:path"
import type { ExitReason } from "../../src/domain/ExitReason.js"
import type { LimitsOverride } from "../../src/domain/Limits.js"
import type { Turn } from "../../src/domain/Message.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import * as Replay from "../../src/session/Replay.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import * as Harness from "../../src/testing/Harness.js"
import type * as McpConfig from "../../src/tools/McpConfig.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import { root } from "../support/McpServers.js"

const SAMPLER = path.join(root, "test/support/mcp-sampler.ts")

const sampler = (sampling: boolean): McpConfig.StdioServer => ({
  command: process.execPath,
  args: ["--import", "tsx", SAMPLER],
  cwd: root,
  effects: { sample: "read" },
  ...(sampling ? { sampling: true } : {})
})

/** One burst of an agent allowed the `sample` tool, against `providers`, with the sampler server as its tools. */
const run = (options: {
  readonly sampling: boolean
  readonly providers: ReadonlyArray<ModelProvider>
  readonly limits?: LimitsOverride
  readonly verify?: boolean
}) =>
  Effect.gen(function*() {
    const spec = Harness.agent({
      tools: ["sample"],
      ...(options.limits === undefined ? {} : { limits: options.limits })
    })
    const landed = yield* Harness.runBurst({ spec })
    const verified = options.verify === true
      ? yield* Effect.flatMap(
        Replay.load(Harness.principal.orgId, landed.session.id),
        (recorded) => Replay.verifySession(recorded)
      )
      : []
    return { ...landed, verified }
  }).pipe(
    Effect.provide(
      Layer.mergeAll(
        LiveEvents.layer,
        McpRegistry.layer({ sampler: sampler(options.sampling) }),
        Layer.succeed(Providers, Providers.fromRoutes({ default: options.providers }))
      ).pipe(Layer.provideMerge(MemoryStore.layerMemory))
    )
  )

const results = (turns: ReadonlyArray<Turn>) =>
  turns.flatMap((t) => t.entry.kind === "tool_results" ? t.entry.results : [])

/**
 * Runs a sampling session over `script` whose tool (a 10 s deadline) asks a sample the model has not answered by the
 * sample's bound: once the sample waits on the model (a request with no tools and no response schema), the clock
 * moves 8 s — the call's deadline less the 2 s margin left for the server to answer.
 */
const cutByDeadline = (script: ReadonlyArray<Scripted.Step>) =>
  Effect.gen(function*() {
    const reached = yield* Deferred.make<void>()
    const scripted = Scripted.make({ script })
    const model: ModelProvider = {
      ...scripted,
      complete: (request) =>
        request.tools.length === 0 && request.responseSchema === undefined
          ? Effect.zipRight(Deferred.succeed(reached, undefined), scripted.complete(request))
          : scripted.complete(request)
    }
    const running = yield* Effect.fork(
      run({ sampling: true, providers: [model], limits: { toolTimeoutMs: 10_000 }, verify: true })
    )
    yield* Deferred.await(reached)
    yield* TestClock.adjust("8 seconds")
    return yield* Fiber.join(running)
  })

describe("MCP sampling in a session", () => {
  it.live(
    "sampling off: the tool hears the refusal that says how to allow it, and the session lands",
    () =>
      Effect.gen(function*() {
        const model = Scripted.make({
          script: [Scripted.toolCalls([{ name: "sample", arguments: {} }]), Scripted.text("done")]
        })
        const landed = yield* run({ sampling: false, providers: [model] })
        expect(landed.reason).toBe<ExitReason>("completed")
        expect(results(landed.turns).map((r) => r.content)).toEqual([
          "refused: MCP error -32601: Corral does not let MCP server \"sampler\" sample its model: sampling is off for " +
          "this server (set \"sampling\": true on mcpServers.sampler to allow it)"
        ])
        expect(landed.trajectory.modelCalls.filter((a) => a.sampled !== undefined)).toEqual([])
        // Two calls of the loop, and the landing's finalize.
        expect(landed.state.modelCalls).toBe(3)
      }),
    60_000
  )

  it.live(
    "sampling on: the tool receives the model's text; the sample is in the trajectory, counted, and replays",
    () =>
      Effect.gen(function*() {
        const model = Scripted.make({
          script: [
            Scripted.toolCalls([{ name: "sample", arguments: { system: "Be brief.", stop: ["STOP"] } }]),
            Scripted.text("hi there STOP and more"),
            Scripted.text("done")
          ]
        })
        const landed = yield* run({ sampling: true, providers: [model], verify: true })
        expect(landed.reason).toBe<ExitReason>("completed")
        const [result] = results(landed.turns)
        // Cut at the stop sequence by Corral; the scripted model names no model, so the provider's is reported.
        expect(result?.content).toBe(`sampled: hi there  [${model.model}, stopSequence]`)
        // The sample went to the model as the server's own conversation: its system prompt, no tools, its caps.
        const asked = model.requests[1]!
        expect(asked.system).toBe("Be brief.")
        expect(asked.messages).toEqual([{ kind: "user", text: "Say hi." }])
        expect(asked.tools).toEqual([])
        expect(asked.maxTokens).toBe(20)
        expect(asked.stopSequences).toEqual(["STOP"])
        const callId = landed.trajectory.toolCalls[0]!.callId
        expect(landed.trajectory.modelCalls.map((a) => a.sampled)).toEqual([
          undefined,
          { callId, n: 1 },
          undefined,
          undefined
        ])
        // Both counters counted it: two calls of the loop, the sample, the finalize; one budget snapshot each.
        expect(landed.state.modelCalls).toBe(4)
        expect(landed.trajectory.budgets.map((b) => b.modelCallsBurst)).toEqual([1, 2, 3, 4])
        // The sample's tokens are charged to the session like any call's.
        expect(landed.state.usage.total).toBe(landed.trajectory.modelCalls.reduce((n, a) => n + a.usage.total, 0))
        expect(landed.verified.map((r) => r._tag)).toEqual(["Verified"])
      }),
    60_000
  )

  it.live(
    "a sample counts toward the per-burst ceiling: the burst ends at burst_limit after it",
    () =>
      Effect.gen(function*() {
        const model = Scripted.make({
          script: [
            Scripted.toolCalls([{ name: "sample", arguments: {} }]),
            Scripted.text("hi"),
            Scripted.text("never asked")
          ]
        })
        const landed = yield* run({
          sampling: true,
          providers: [model],
          limits: { modelCallsPerBurst: 2 },
          verify: true
        })
        expect(results(landed.turns).map((r) => r.content)).toEqual([`sampled: hi [${model.model}, endTurn]`])
        expect(landed.reason).toBe<ExitReason>("burst_limit")
        expect(landed.state.modelCalls).toBe(2)
        expect(landed.verified.map((r) => r._tag)).toEqual(["Verified"])
      }),
    60_000
  )

  it.live(
    "a ceiling already reached: the sample is refused naming it, and no model call is made",
    () =>
      Effect.gen(function*() {
        const model = Scripted.make({
          script: [Scripted.toolCalls([{ name: "sample", arguments: { times: 2 } }]), Scripted.text("never asked")]
        })
        const landed = yield* run({
          sampling: true,
          providers: [model],
          limits: { modelCallsPerBurst: 1 },
          verify: true
        })
        const refusal =
          "refused: MCP error -32600: Corral did not sample for MCP server \"sampler\": 1 model calls in " +
          "this burst reached modelCallsPerBurst 1 (the burst_limit check of the session's exit policy); no model call " +
          "was made"
        expect(results(landed.turns).map((r) => r.content)).toEqual([`${refusal}\n${refusal}`])
        expect(model.requests).toHaveLength(1)
        expect(landed.state.modelCalls).toBe(1)
        expect(landed.reason).toBe<ExitReason>("burst_limit")
        expect(landed.trajectory.errors).toContainEqual({
          code: "sampling.gate",
          message: refusal.slice("refused: MCP error -32600: ".length)
        })
        expect(landed.verified.map((r) => r._tag)).toEqual(["Verified"])
      }),
    60_000
  )
  it.live("the token budget already spent: the sample is refused naming it", () =>
    Effect.gen(function*() {
      const model = Scripted.make({
        script: [Scripted.toolCalls([{ name: "sample", arguments: {} }]), Scripted.text("never asked")]
      })
      // The first call charges 15 tokens (10 in, 5 out): the budget is spent before the sample.
      const landed = yield* run({ sampling: true, providers: [model], limits: { tokens: 15 }, verify: true })
      expect(results(landed.turns).map((r) => r.content)).toEqual([
        "refused: MCP error -32600: Corral did not sample for MCP server \"sampler\": 15 tokens reached the token " +
        "budget 15 (the token_budget check of the session's exit policy); no model call was made"
      ])
      expect(model.requests).toHaveLength(1)
      expect(landed.reason).toBe<ExitReason>("token_budget")
      expect(landed.verified.map((r) => r._tag)).toEqual(["Verified"])
    }), 60_000)

  it.live(
    "a provider failure during a sample is the server's error, recorded, and the burst goes on",
    () =>
      Effect.gen(function*() {
        const model = Scripted.make({
          script: [
            Scripted.toolCalls([{ name: "sample", arguments: {} }]),
            Scripted.fault("bad_request", { message: "no such parameter" }),
            Scripted.text("done")
          ]
        })
        const landed = yield* run({ sampling: true, providers: [model], verify: true })
        expect(results(landed.turns).map((r) => r.content)).toEqual([
          "refused: MCP error -32603: the session's model did not answer MCP server \"sampler\": bad_request: no such " +
          "parameter"
        ])
        expect(landed.reason).toBe<ExitReason>("completed")
        const callId = landed.trajectory.toolCalls[0]!.callId
        expect(landed.trajectory.modelCalls[1]).toMatchObject({
          sampled: { callId, n: 1 },
          error: { kind: "bad_request" }
        })
        expect(landed.verified.map((r) => r._tag)).toEqual(["Verified"])
      }),
    60_000
  )
  it.scoped(
    "a sample the model does not answer before the tool's deadline is refused; the call, the burst and the replay go on",
    () =>
      Effect.gen(function*() {
        // A 10 s call: the sample may take until 2 s (the margin) before its deadline.
        const landed = yield* cutByDeadline([
          Scripted.toolCalls([{ name: "sample", arguments: {} }]),
          Scripted.delay(60_000, Scripted.text("too late")),
          Scripted.text("done")
        ])
        expect(results(landed.turns).map((r) => r.content)).toEqual([
          "refused: MCP error -32001: the session's model did not answer MCP server \"sampler\" within 8000 ms (the " +
          "calling tool \"sample\"'s deadline, less a margin for the server to answer)"
        ])
        expect(landed.reason).toBe<ExitReason>("completed")
        // The sample passed the gate (counted) but no attempt of it ended: the call's record says one was asked.
        expect(landed.state.modelCalls).toBe(4)
        expect(landed.trajectory.modelCalls.some((a) => a.sampled !== undefined)).toBe(false)
        expect(landed.trajectory.toolCalls[0]?.samples).toBe(1)
        expect(landed.verified.map((r) => r._tag)).toEqual(["Verified"])
      }),
    60_000
  )
  it.scoped(
    "a sample whose retry is still in flight at the tool's deadline replays verified",
    () =>
      Effect.gen(function*() {
        // The retry's backoff passes, the retry waits on the model, and the sample's bound (8 s) stops it.
        const landed = yield* cutByDeadline([
          Scripted.toolCalls([{ name: "sample", arguments: {} }]),
          Scripted.fault("overloaded"),
          Scripted.delay(60_000, Scripted.text("too late")),
          Scripted.text("done")
        ])
        expect(results(landed.turns)[0]?.content).toContain("MCP error -32001")
        expect(landed.reason).toBe<ExitReason>("completed")
        const callId = landed.trajectory.toolCalls[0]!.callId
        expect(landed.trajectory.modelCalls.map((a) => a.sampled)).toEqual([
          undefined,
          { callId, n: 1 },
          undefined,
          undefined
        ])
        expect(landed.trajectory.decisions?.map((d) => d._tag)).toContain("retry")
        expect(landed.verified.map((r) => r._tag)).toEqual(["Verified"])
      }),
    60_000
  )
})
