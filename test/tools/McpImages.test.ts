/**
 * An image an MCP tool returns reaches the model: a whole session — server-everything's `get-tiny-image` called by a
 * model behind the real adapters over HTTP (the fake provider) — and the request that follows the tool turn carries
 * the image in each wire format (an Anthropic `image` block inside the `tool_result`; an OpenAI `image_url` data URL
 * in a user message after the tool message), while the transcript keeps its description. A provider set to
 * `describe`, and an image over the result-size cap, get the description only.
 */
import type { HttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import * as path from "node:path"
import { Corral } from "../../src/Corral.js"
import { Principal } from "../../src/domain/Principal.js"
import * as LiveEvents from "../../src/events/LiveEvents.js"
import * as Anthropic from "../../src/model/Anthropic.js"
import type { ModelProvider } from "../../src/model/ModelProvider.js"
import { Providers } from "../../src/model/ModelProvider.js"
import * as OpenAiCompat from "../../src/model/OpenAiCompat.js"
import * as Limits from "../../src/rails/Limits.js"
import { makeMemory } from "../../src/store/MemoryStore.js"
import { SessionStore } from "../../src/store/SessionStore.js"
import * as McpRegistry from "../../src/tools/McpRegistry.js"
import * as Fake from "../support/FakeProvider.js"
import { root } from "../support/McpServers.js"

const EVERYTHING = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
const alice = new Principal({ orgId: "org_a", userId: "alice" })

/** Runs one session whose model calls `get-tiny-image` once, then answers; the fake provider's requests come back. */
const session = (
  provider: (fake: Fake.FakeProvider) => Effect.Effect<ModelProvider, never, HttpClient.HttpClient>,
  limits?: Parameters<typeof Limits.layer>[0]
) =>
  Effect.gen(function*() {
    const fake = yield* Fake.make({
      script: [
        Fake.reply({ toolCalls: [{ id: "call_img", name: "get-tiny-image", arguments: {} }] }),
        Fake.text("a logo")
      ]
    })
    const model = yield* provider(fake)
    const store = yield* makeMemory
    const runtime = Corral.layer().pipe(
      Layer.provide(Layer.mergeAll(
        LiveEvents.layer,
        McpRegistry.layer({ ev: { command: process.execPath, args: [EVERYTHING, "stdio"] } }),
        Layer.succeed(Providers, Providers.fromRoutes({ default: [model] }))
      )),
      Layer.provide(Layer.succeed(SessionStore, store)),
      Layer.provide(limits === undefined ? Layer.empty : Limits.layer(limits))
    )
    const run = yield* Effect.flatMap(Corral, (c) =>
      Effect.gen(function*() {
        yield* c.publishAgent(alice, {
          id: "looker",
          version: 1,
          name: "Looker",
          instructions: "Look at the image.",
          tools: ["get-tiny-image"],
          finalize: "transcript"
        })
        return yield* c.run(alice, { agentId: "looker", scope: "q:1", prompt: "what is it?" })
      })).pipe(Effect.provide(runtime))
    expect(run.exitReason).toBe("completed")
    return fake.requests
  }).pipe(Effect.provide(NodeHttpClient.layerUndici))

const anthropic = (attachments?: "send" | "describe") => (fake: Fake.FakeProvider) =>
  Effect.orDie(Anthropic.make({
    name: "claude",
    model: "claude-test",
    baseUrl: fake.anthropicBaseUrl,
    apiKey: Redacted.make("k"),
    ...(attachments === undefined ? {} : { attachments })
  }))

const openai = (attachments?: "send" | "describe") => (fake: Fake.FakeProvider) =>
  Effect.orDie(OpenAiCompat.make({
    name: "gpt",
    model: "gpt-test",
    baseUrl: fake.openAiBaseUrl,
    apiKey: Redacted.make("k"),
    ...(attachments === undefined ? {} : { attachments })
  }))

type Json = Record<string, unknown>
const messagesOf = (body: Json) => body["messages"] as ReadonlyArray<Json>

describe("MCP images reach the model", () => {
  it.scopedLive(
    "Anthropic: an image block inside the tool_result, after its description",
    () =>
      Effect.gen(function*() {
        const requests = yield* session(anthropic())
        const last = messagesOf(requests[1]!.body).at(-1)!
        const result = (last["content"] as ReadonlyArray<Json>)[0]!
        expect(result).toMatchObject({ type: "tool_result", tool_use_id: "call_img" })
        const blocks = result["content"] as ReadonlyArray<Json>
        expect(blocks[0]).toMatchObject({
          type: "text",
          text: expect.stringMatching(/\[image: image\/png, \d+ bytes\]/)
        })
        expect(blocks[1]).toMatchObject({
          type: "image",
          source: { type: "base64", media_type: "image/png", data: expect.stringMatching(/^iVBOR/) }
        })
      }),
    90_000
  )

  it.scopedLive(
    "OpenAI-compatible: an image_url data URL in a user message after the tool message",
    () =>
      Effect.gen(function*() {
        const requests = yield* session(openai())
        const messages = messagesOf(requests[1]!.body)
        const tool = messages.findIndex((m) => m["role"] === "tool")
        expect(messages[tool]!["content"]).toMatch(/\[image: image\/png, \d+ bytes\]/)
        expect(messages[tool + 1]).toEqual({
          role: "user",
          content: [
            { type: "text", text: "Attachments of tool result call_img (get-tiny-image):" },
            { type: "image_url", image_url: { url: expect.stringMatching(/^data:image\/png;base64,iVBOR/) } }
          ]
        })
      }),
    90_000
  )

  it.scopedLive("describes the image only, for a provider set to describe", () =>
    Effect.gen(function*() {
      const requests = yield* session(openai("describe"))
      expect(JSON.stringify(requests[1]!.body)).not.toContain("image_url")
    }), 90_000)

  it.scopedLive("leaves out an image over the result-size cap, and tells the model", () =>
    Effect.gen(function*() {
      const requests = yield* session(anthropic(), { toolResultMaxBytes: 200 })
      const body = JSON.stringify(requests[1]!.body)
      expect(body).not.toContain("\"type\":\"image\"")
      expect(body).toMatch(/1 attachment\(s\), \d+ bytes, not shown to you: over the 200-byte cap of one tool result/)
    }), 90_000)
})
