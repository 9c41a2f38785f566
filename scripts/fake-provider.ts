/**
 * `npm run fake-provider [-- --port 8788]`: the test suite's fake model provider as a standalone server, serving
 * the demo conversation (call the first tool offered, then answer, then a valid report) in both wire formats, so
 * Corral — `npm run demo`, `corral serve` — can be pointed at a "model" over real HTTP without a key or a network.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Console, Effect } from "effect"
import * as FakeProvider from "../test/support/FakeProvider.js"

const portArg = (argv: ReadonlyArray<string>): number => {
  const index = argv.indexOf("--port")
  const value = index === -1 ? undefined : Number(argv[index + 1])
  return value !== undefined && Number.isInteger(value) && value >= 0 ? value : 0
}

const program = Effect.gen(function*() {
  const server = yield* FakeProvider.make({ port: portArg(process.argv.slice(2)) })
  yield* Console.log(`fake provider listening on ${server.url}`)
  yield* Console.log(`  OpenAI-compatible base URL: ${server.openAiBaseUrl}`)
  yield* Console.log(`  Anthropic base URL:         ${server.anthropicBaseUrl}`)
  yield* Console.log(
    "  corral.json: " + JSON.stringify({
      providers: {
        fake: { api: "openai", baseUrl: server.openAiBaseUrl, model: "fake-model" },
        "fake-claude": { api: "anthropic", baseUrl: server.anthropicBaseUrl, model: "fake-claude" }
      },
      tiers: { default: ["fake", "fake-claude"] }
    })
  )
  return yield* Effect.never
})

NodeRuntime.runMain(Effect.scoped(program))
