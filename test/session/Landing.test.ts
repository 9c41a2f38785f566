/**
 * The report landing (session/Landing.ts) as a user meets it: what the finalize call asks the model for, which
 * replies become the report, and when — and why — the report is built from the transcript instead.
 */
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer, Option } from "effect"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as Scripted from "../../src/model/Scripted.js"
import { AuthorPhase } from "../../src/session/Landing.js"
import * as MemoryStore from "../../src/store/MemoryStore.js"
import * as ToolRegistry from "../../src/tools/ToolRegistry.js"

const alice = new Principal({ orgId: "org_a", userId: "alice" })
const schema = {
  type: "object",
  properties: { cause: { type: "string" } },
  required: ["cause"],
  additionalProperties: false
}
const instruction = "Write the report of this investigation now. Reply with ONE JSON object and nothing else, valid " +
  `against this JSON Schema:\n${JSON.stringify(schema)}`

/** One burst of an agent with `spec` over, answered by `finalizeReply` when it asks for its report. */
const land = (
  finalizeReply: string | undefined,
  spec: Record<string, unknown> = {},
  author?: () => Effect.Effect<unknown, unknown>
) =>
  Effect.gen(function*() {
    // The finalize call (the request with a response schema) is answered by `report`, outside the script.
    const model = Scripted.make({
      script: [Scripted.text("The disk is full.")],
      report: () => Scripted.text(finalizeReply ?? "(no finalize call was expected)")
    })
    const context = yield* Layer.build(
      Corral.layer().pipe(
        Layer.provideMerge(
          Layer.mergeAll(
            LiveEvents.layer,
            ToolRegistry.layer([]),
            Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
          )
        ),
        Layer.provideMerge(MemoryStore.layerMemory)
      )
    ).pipe(
      // The author phase is read where the burst runs: in the supervisor's runtime, made when the layer is built.
      Effect.provideService(AuthorPhase, Option.fromNullable(author))
    )
    const c = Context.get(context, Corral)
    yield* c.publishAgent(alice, {
      id: "triage",
      version: 1,
      name: "Triage",
      instructions: "Find the cause.",
      tools: [],
      reportSchema: schema,
      ...spec
    })
    const view = yield* c.run(alice, { agentId: "triage", scope: "incident:1", prompt: "why is db down?" })
    return { report: view.report, requests: model.requests }
  }).pipe(Effect.scoped)

describe("Landing: the report", () => {
  it.effect("the finalize call asks for ONE JSON object valid against the agent's schema, with no tools", () =>
    Effect.gen(function*() {
      const { report, requests } = yield* land(`{"cause":"disk"}`)
      expect(requests).toHaveLength(2)
      const finalize = requests[1]!
      expect(finalize.messages.at(-1)).toStrictEqual({ kind: "user", text: instruction })
      // The conversation so far comes first: the prompt and the model's answer.
      expect(finalize.messages.slice(0, -1).map((m) => m.kind)).toEqual(["user", "assistant"])
      expect(finalize.tools).toEqual([])
      expect(finalize.responseSchema).toEqual(schema)
      expect(report).toStrictEqual({ exitReason: "completed", source: "model", data: { cause: "disk" } })
    }))

  it.effect.each([
    ["a fence tagged json, with blank lines around it", "\n\n```json\n{\"cause\":\"disk\"}\n```\n  "],
    ["a fence without a tag", "```\n{\"cause\":\"disk\"}\n```"],
    ["a fence with the object on its own lines", "```json\n\n  {\n  \"cause\": \"disk\"\n}\n\n```"],
    ["a fence with the object on the fence's line", "```json{\"cause\":\"disk\"}```"]
  ])("a reply in a Markdown code fence is unwrapped: %s", ([, reply]) =>
    Effect.gen(function*() {
      const { report } = yield* land(reply)
      expect(report).toStrictEqual({ exitReason: "completed", source: "model", data: { cause: "disk" } })
    }))

  it.effect.each([
    ["prose before the fence", "Here is the report:\n```json\n{\"cause\":\"disk\"}\n```"],
    ["prose after the fence", "```json\n{\"cause\":\"disk\"}\n```\nHope this helps."],
    ["no JSON at all", "The disk is full."]
  ])(
    "a reply that is not one JSON object (%s) gives the report from the transcript, saying why",
    ([, reply]) =>
      Effect.gen(function*() {
        const { report } = yield* land(reply)
        expect(report?.source).toBe("fallback")
        expect(report?.fallbackReason).toBe("the finalize reply was not JSON")
        expect(report?.exitReason).toBe("completed")
      })
  )

  it.effect("an agent that writes its report from the transcript makes no finalize call, and the report says so", () =>
    Effect.gen(function*() {
      const { report, requests } = yield* land(undefined, { finalize: "transcript" })
      expect(requests).toHaveLength(1)
      expect(report?.source).toBe("fallback")
      expect(report?.fallbackReason).toBe("the agent writes its report from the transcript")
      expect(report?.data).toMatchObject({ cause: expect.any(String) })
    }))

  it.effect("a schema no fallback can satisfy gives the default report shape, and the reason says so", () =>
    Effect.gen(function*() {
      const impossible = {
        type: "object",
        properties: { n: { type: "integer", minimum: 5, maximum: 1 } },
        required: ["n"]
      }
      const { report } = yield* land("not JSON", { reportSchema: impossible })
      expect(report?.source).toBe("fallback")
      expect(report?.fallbackReason).toBe(
        "the finalize reply was not JSON; the agent's report schema could not be satisfied mechanically, so the " +
          "default report shape is used"
      )
      expect(report?.data).toMatchObject({ summary: expect.any(String) })
    }))

  it.effect("the author phase's artifact rides on every kind of report; an author that fails leaves none", () =>
    Effect.gen(function*() {
      const artifact = { html: "<h1>db</h1>" }
      const fromModel = yield* land(`{"cause":"disk"}`, {}, () => Effect.succeed(artifact))
      expect(fromModel.report).toStrictEqual({
        exitReason: "completed",
        source: "model",
        data: { cause: "disk" },
        artifact
      })
      const fromTranscript = yield* land(undefined, { finalize: "transcript" }, () => Effect.succeed(artifact))
      expect(fromTranscript.report?.artifact).toStrictEqual(artifact)
      const failed = yield* land(`{"cause":"disk"}`, {}, () => Effect.fail("the renderer is down"))
      expect(failed.report).toStrictEqual({ exitReason: "completed", source: "model", data: { cause: "disk" } })
    }))
})
